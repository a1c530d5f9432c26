package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/hashicorp/go-hclog"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/zkd-io/zkd/internal/third_party/raft"
	wal "github.com/zkd-io/zkd/internal/third_party/raft-wal"
	"github.com/zkd-io/zkd/internal/third_party/raft-wal/migrate"
	"github.com/zkd-io/zkd/internal/third_party/raft-wal/segment"
	"github.com/zkd-io/zkd/internal/third_party/raft-wal/types"
)

// LogStore names the on-disk format of Raft's log and stable store.
type LogStore string

const (
	// LogStoreWAL is the default: hashicorp/raft-wal segment files in Dir/raft/wal, one fsync
	// per append batch and a compact binary entry codec.
	LogStoreWAL LogStore = "wal"
	// LogStoreBolt is raft-boltdb/v2 on bbolt in Dir/raft/raft.db: two fsyncs per append batch
	// (data pages, then the meta page) and msgpack-encoded entries.
	LogStoreBolt LogStore = "bolt"
)

const (
	walDirName  = "wal"
	boltName    = "raft.db"
	migratedExt = ".migrated"
)

// openLogStore opens (creating if needed) the durable log and stable store under dir, with
// checksums on both (CheckedStore). A data directory that still holds only a bbolt store is
// migrated to the WAL when kind is LogStoreWAL: entries and stable keys are copied into a fresh
// WAL in a temporary directory, which is renamed into place only once complete, so a crash
// during the copy leaves the bbolt store in charge. fresh says whether dir held no state before.
func openLogStore(dir string, kind LogStore, segmentSize int, fresh bool, hl hclog.Logger) (*CheckedStore, error) {
	boltPath := filepath.Join(dir, boltName)
	walDir := filepath.Join(dir, walDirName)
	var (
		backend storeBackend
		where   func(uint64) string
	)
	switch kind {
	case LogStoreBolt:
		if exists(walDir) {
			return nil, fmt.Errorf("consensus: %s holds a WAL log store; it cannot be opened as %q", dir, kind)
		}
		if !fresh {
			if err := checkFile(boltPath); err != nil {
				return nil, err
			}
		}
		b, err := openBolt(boltPath)
		if err != nil {
			return nil, err
		}
		backend, where = b, func(uint64) string { return boltPath }
	case LogStoreWAL:
		if !exists(walDir) && exists(boltPath) {
			if err := migrateBolt(boltPath, walDir, segmentSize, hl); err != nil {
				return nil, err
			}
		}
		if err := checkWALDir(walDir); err != nil {
			return nil, err
		}
		w, err := openWAL(walDir, segmentSize, hl)
		if err != nil {
			return nil, err
		}
		backend, where = w, func(i uint64) string { return walSegmentOf(walDir, i) }
	default:
		return nil, fmt.Errorf("consensus: unknown log store %q", kind)
	}
	c, err := newCheckedStore(backend, where, fresh)
	if err != nil {
		backend.Close()
		return nil, err
	}
	return c, nil
}

// checkFile refuses a store file that is missing or empty where data is expected: the stores
// would start afresh on it and forget everything.
func checkFile(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return &DamageError{File: path, Problem: fmt.Sprintf("missing while the directory holds data (%v)", err)}
	}
	if st.Size() == 0 {
		return &DamageError{File: path, Problem: "empty (0 bytes) while the directory holds data"}
	}
	return nil
}

// checkWALDir refuses a WAL directory whose segments are present without their metadata, or
// whose metadata is an empty file: raft-wal would start a new log over the old segments.
func checkWALDir(walDir string) error {
	segs, _ := filepath.Glob(filepath.Join(walDir, "*.wal"))
	if len(segs) == 0 {
		return nil
	}
	if exists(filepath.Join(walDir, walMetaName)) {
		return checkFile(filepath.Join(walDir, walMetaName))
	}
	return checkFile(filepath.Join(walDir, walMetaFileName))
}

// walMetaName is raft-wal's own metadata file (bbolt), which walMetaFile replaces.
const walMetaName = "wal-meta.db"

// walSegmentOf names the segment file that holds index (the one with the highest base index at
// or below it; raft-wal names segments <base index>-<id>.wal), or the metadata file for index 0.
func walSegmentOf(walDir string, index uint64) string {
	if index == 0 {
		return filepath.Join(walDir, walMetaFileName)
	}
	segs, _ := filepath.Glob(filepath.Join(walDir, "*.wal"))
	best, bestBase := "", uint64(0)
	for _, s := range segs {
		var base, id uint64
		if _, err := fmt.Sscanf(filepath.Base(s), "%020d-%016x.wal", &base, &id); err != nil {
			continue
		}
		if base <= index && (best == "" || base >= bestBase) {
			best, bestBase = s, base
		}
	}
	if best == "" {
		return walDir
	}
	return best
}

func openBolt(path string) (boltStore, error) {
	b, err := raftboltdb.New(raftboltdb.Options{
		Path: path,
		// The freelist settings keep appends fast after a burst is truncated (the reference
		// measured 10x slower appends with bbolt's defaults).
		BoltOptions: &bbolt.Options{Timeout: time.Second, NoFreelistSync: true, FreelistType: bbolt.FreelistMapType},
	})
	if err != nil {
		return boltStore{}, fmt.Errorf("consensus: open bolt log store: %w", err)
	}
	return boltStore{b}, nil
}

// walStore is a raft-wal WAL with its metadata in a walMetaFile, which it closes too (WAL.Close
// leaves its metadata store open).
type walStore struct {
	*wal.WAL
	meta    *walMetaFile
	deletes *laterDeletes
	zeroing func() // stops the zeroer
}

func (w *walStore) Close() error {
	err := w.WAL.Close()
	w.deletes.close()
	w.zeroing()
	return errors.Join(err, w.meta.Close())
}

func openWAL(dir string, segmentSize int, hl hclog.Logger) (w *walStore, err error) {
	var deletes *laterDeletes
	stopZeroing := func() {}
	defer func() {
		// A damaged segment or metadata file can make raft-wal's decoders index out of range.
		if r := recover(); r != nil {
			w, err = nil, &DamageError{File: dir, Problem: fmt.Sprintf("the log store failed opening it: %v", r)}
		}
		if w == nil { // the store's goroutines stop with the store, or here when there is none
			if deletes != nil {
				deletes.close()
			}
			stopZeroing()
		}
	}()
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("consensus: wal dir: %w", err)
	}
	meta := &walMetaFile{}
	size := wal.DefaultSegmentSize
	if segmentSize > 0 {
		size = segmentSize
	}
	var pool *segmentPool
	if runtime.GOOS == "linux" {
		if pool, err = newSegmentPool(dir, int64(size), hl.Named("wal")); err != nil {
			return nil, fmt.Errorf("consensus: wal dir: %w", err)
		}
	}
	var vfs types.VFS
	vfs, stopZeroing = newZeroAheadFS(hl.Named("wal"), pool)
	deletes = newLaterDeletes(segment.NewFiler(dir, vfs), dir, pool, hl.Named("wal"))
	ww, err := wal.Open(dir, wal.WithLogger(hl.Named("wal")), wal.WithMetaStore(meta), wal.WithSegmentSize(size),
		wal.WithSegmentFiler(deletes))
	if err != nil {
		meta.Close()
		var d *DamageError
		if errors.As(err, &d) || errors.Is(err, os.ErrPermission) {
			return nil, err
		}
		return nil, &DamageError{File: dir, Problem: fmt.Sprintf("the log store cannot open it: %v", err)}
	}
	return &walStore{WAL: ww, meta: meta, deletes: deletes, zeroing: stopZeroing}, nil
}

// copyStable copies the keys hashicorp/raft v1.7 keeps in its StableStore (CurrentTerm and
// LastVoteTerm as uint64, LastVoteCand as bytes). A key the source never had is skipped;
// migrate.CopyStable would fail on it (a node that never voted has no LastVoteCand).
func copyStable(dst, src raft.StableStore) error {
	for _, k := range []string{"CurrentTerm", "LastVoteTerm"} {
		v, err := src.GetUint64([]byte(k))
		if errors.Is(err, raftboltdb.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", k, err)
		}
		if err := dst.SetUint64([]byte(k), v); err != nil {
			return fmt.Errorf("write %s: %w", k, err)
		}
	}
	v, err := src.Get([]byte("LastVoteCand"))
	if errors.Is(err, raftboltdb.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read LastVoteCand: %w", err)
	}
	if err := dst.Set([]byte("LastVoteCand"), v); err != nil {
		return fmt.Errorf("write LastVoteCand: %w", err)
	}
	return nil
}

func migrateBolt(boltPath, walDir string, segmentSize int, hl hclog.Logger) error {
	src, err := openBolt(boltPath)
	if err != nil {
		return err
	}
	defer src.Close()
	tmp := walDir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("consensus: migrate: %w", err)
	}
	dst, err := openWAL(tmp, segmentSize, hl)
	if err != nil {
		return err
	}
	err = errors.Join(migrate.CopyLogs(context.Background(), dst, src, 4<<20, nil), copyStable(dst, src))
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("consensus: migrate %s to a WAL: %w", boltPath, err)
	}
	if err := syncDir(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, walDir); err != nil {
		return fmt.Errorf("consensus: migrate: %w", err)
	}
	if err := syncDir(filepath.Dir(walDir)); err != nil {
		return err
	}
	// The WAL is in charge from here; keep the old store beside it for the operator.
	if err := os.Rename(boltPath, boltPath+migratedExt); err != nil {
		return fmt.Errorf("consensus: migrate: %w", err)
	}
	hl.Info("migrated the bolt log store to a WAL", "from", boltPath, "to", walDir)
	return nil
}

// storeCloser closes the log store, then releases the data directory lock.
type storeCloser struct {
	store io.Closer
	lock  io.Closer
}

func (c storeCloser) Close() error {
	return errors.Join(c.store.Close(), c.lock.Close())
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("consensus: sync dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("consensus: sync dir %s: %w", dir, err)
	}
	return nil
}

// Segment sizes: raft-wal's default preallocates 64 MiB per segment file, which a small data
// volume cannot hold (a 20 MB volume could not start). The size follows the space available when
// the store opens: an eighth of it, between 1 MiB and 64 MiB.
const (
	minSegmentSize = 1 << 20
	maxSegmentSize = 64 << 20
)

func segmentSizeFor(dir string) int {
	free, ok := DiskFree(dir)
	if !ok {
		return maxSegmentSize
	}
	return int(min(max(free/8, minSegmentSize), maxSegmentSize))
}

// WALDir is the directory of the raft-wal log under a data directory's raft directory.
func WALDir(raftDir string) string { return filepath.Join(raftDir, walDirName) }
