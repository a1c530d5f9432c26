package storage

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/zkd-io/zkd/internal/third_party/raft"
)

// removeChunk is how much of a file shrinkGently frees in one step.
const removeChunk = 4 << 20

// shrinkGently empties the file at path from the end, removeChunk bytes at a time, making each
// step durable before the next. step, if not nil, is called with the size left after each step.
//
// Unlinking a large file frees all of its blocks in one filesystem transaction, and every Raft log
// fsync that comes while that transaction commits waits for it: on ext4 mounted with discard the
// commit also trims every freed block. Deleting a 200 MB snapshot that way stalled log fsyncs for
// 20-50 ms. Freed a chunk per commit instead, a log fsync waits at most for one chunk's share.
func shrinkGently(path string, step func(size int64)) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	for size := fi.Size(); size > 0; {
		size = max(0, size-removeChunk)
		if err := f.Truncate(size); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
		if step != nil {
			step(size)
		}
	}
	return nil
}

// removeGently deletes the file at path once shrinkGently has emptied it.
func removeGently(path string) error {
	_ = shrinkGently(path, nil) // a courtesy to the disk: the removal is what counts
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// removeTreeGently deletes dir, its regular files through removeGently.
func removeTreeGently(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, e := range ents {
		if e.Type().IsRegular() {
			errs = append(errs, removeGently(filepath.Join(dir, e.Name())))
		}
	}
	return errors.Join(append(errs, os.RemoveAll(dir))...)
}

// reapDirName is where snapshots go to be deleted, beside the snapshots directory. Neither raft
// nor listSnapshots looks there, so a snapshot moved there is gone as far as either knows before
// any of its bytes are.
const reapDirName = "snapshots.reap"

// snapshotReaper keeps the newest retain snapshots of a node's file snapshot store and deletes the
// others gently (removeGently). raft's own reaping (FileSnapshotStore's retain) unlinks them at
// once; the store is opened with retainAllSnapshots so that it never does.
//
// A snapshot open for reading (raft sending it to a follower that fell behind) is unlinked, not
// emptied: its reader keeps the whole file until it closes it, as it did with raft's reaping.
type snapshotReaper struct {
	store  *raft.FileSnapshotStore
	dir    string // the node's data directory: snapshots under dir/snapshots
	retain int
	log    *slog.Logger

	mu      sync.Mutex
	readers map[string]int // open readers by snapshot id
}

// retainAllSnapshots is the retention the file snapshot store is opened with when a
// snapshotReaper does the reaping.
const retainAllSnapshots = 1 << 30

// open opens snapshot id through the store, counted as a reader until the returned reader closes.
func (r *snapshotReaper) open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	r.mu.Lock()
	if r.readers == nil {
		r.readers = map[string]int{}
	}
	r.readers[id]++ // before the file opens: reap checks after it has moved the file away
	r.mu.Unlock()
	meta, rc, err := openSnapshot(r.store, id)
	if err != nil {
		r.release(id)
		return nil, nil, err
	}
	return meta, &countedReader{ReadCloser: rc, done: func() { r.release(id) }}, nil
}

func (r *snapshotReaper) release(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.readers[id]--; r.readers[id] <= 0 {
		delete(r.readers, id)
	}
}

func (r *snapshotReaper) reading(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.readers[id] > 0
}

// countedReader calls done once, on its first Close.
type countedReader struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (c *countedReader) Close() error {
	err := c.ReadCloser.Close()
	c.once.Do(c.done)
	return err
}

// reap moves every snapshot but the newest r.retain into the reap directory, makes that durable,
// then deletes the reap directory's contents: these snapshots and any a crash left there.
func (r *snapshotReaper) reap() error {
	metas, err := r.store.List() // newest first
	if err != nil {
		return fmt.Errorf("consensus: reap snapshots: %w", err)
	}
	from := filepath.Join(r.dir, snapshotsDirName)
	to := filepath.Join(r.dir, reapDirName)
	if len(metas) > r.retain {
		if err := os.MkdirAll(to, 0o755); err != nil {
			return fmt.Errorf("consensus: reap snapshots: %w", err)
		}
		for _, m := range metas[r.retain:] {
			r.log.Info("reaping snapshot", "id", m.ID, "index", m.Index)
			if err := os.Rename(filepath.Join(from, m.ID), filepath.Join(to, m.ID)); err != nil {
				return fmt.Errorf("consensus: reap snapshots: %w", err)
			}
		}
		if err := errors.Join(syncDir(from), syncDir(to)); err != nil {
			return fmt.Errorf("consensus: reap snapshots: %w", err)
		}
	}
	ents, err := os.ReadDir(to)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("consensus: reap snapshots: %w", err)
	}
	var errs []error
	for _, e := range ents {
		path := filepath.Join(to, e.Name())
		if r.reading(e.Name()) {
			errs = append(errs, os.RemoveAll(path))
			continue
		}
		errs = append(errs, removeTreeGently(path))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("consensus: reap snapshots: %w", err)
	}
	return nil
}
