package storage

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/zkd-io/zkd/internal/third_party/raft"
)

const snapshotsDirName = "snapshots"

// snapshotInfo is what this package reads of a snapshot's meta.json (raft's FileSnapshotStore
// writes it).
type snapshotInfo struct {
	ID    string
	Index uint64
	Term  uint64
	Size  int64
	CRC   []byte
	dir   string // the snapshot's directory
}

// hasSnapshots reports whether dir/snapshots holds a complete snapshot (or what claims to be one).
func hasSnapshots(dir string) bool {
	ents, _ := os.ReadDir(filepath.Join(dir, snapshotsDirName))
	for _, e := range ents {
		if e.IsDir() && !strings.HasSuffix(e.Name(), ".tmp") {
			return true
		}
	}
	return false
}

// listSnapshots reads every complete snapshot's metadata under dir/snapshots, newest first (as
// raft orders them: term, index, id). Metadata that does not read is damage: raft would skip
// that snapshot silently and start from an older state.
func listSnapshots(dir string) ([]snapshotInfo, error) {
	root := filepath.Join(dir, snapshotsDirName)
	ents, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("consensus: snapshots: %w", err)
	}
	var out []snapshotInfo
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") {
			continue // a snapshot a crash interrupted; raft never uses it
		}
		sdir := filepath.Join(root, e.Name())
		if !e.IsDir() {
			return nil, &DamageError{File: sdir, Problem: "a file where a snapshot directory belongs"}
		}
		metaPath := filepath.Join(sdir, "meta.json")
		b, err := os.ReadFile(metaPath)
		if err != nil {
			return nil, &DamageError{File: metaPath, Problem: err.Error()}
		}
		var si snapshotInfo
		if err := json.Unmarshal(b, &si); err != nil {
			return nil, &DamageError{File: metaPath, Problem: fmt.Sprintf("does not parse: %v", err)}
		}
		var term, index, ms uint64
		if _, err := fmt.Sscanf(e.Name(), "%d-%d-%d", &term, &index, &ms); err != nil || si.ID != e.Name() ||
			si.Term != term || si.Index != index || len(si.CRC) == 0 {
			return nil, &DamageError{File: metaPath, Problem: fmt.Sprintf("does not match its directory: id %q, term %d, index %d, CRC %x", si.ID, si.Term, si.Index, si.CRC)}
		}
		// Snapshots written since checksums came carry one of meta.json too.
		if sum, err := os.ReadFile(filepath.Join(sdir, metaSumName)); err == nil {
			if strings.TrimSpace(string(sum)) != metaSum(b) {
				return nil, &DamageError{File: metaPath, Problem: "checksum mismatch (" + metaSumName + ")"}
			}
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, &DamageError{File: filepath.Join(sdir, metaSumName), Problem: err.Error()}
		}
		si.dir = sdir
		out = append(out, si)
	}
	slices.SortFunc(out, func(a, b snapshotInfo) int {
		switch {
		case a.Term != b.Term:
			return cmpDesc(a.Term, b.Term)
		case a.Index != b.Index:
			return cmpDesc(a.Index, b.Index)
		}
		return strings.Compare(b.ID, a.ID)
	})
	return out, nil
}

func cmpDesc(a, b uint64) int {
	if a > b {
		return -1
	}
	return 1
}

// checkSnapshot reads a snapshot's state file whole and checks it: a chunked one chunk by chunk
// up to its end chunk and the end of the file, any other against the CRC-64 in raft's metadata.
func checkSnapshot(fss *raft.FileSnapshotStore, si snapshotInfo) error {
	state := filepath.Join(si.dir, "state.bin")
	damaged := func(index uint64, err error) error {
		return &DamageError{File: state, Problem: fmt.Sprintf("snapshot %s (index %d): %v", si.ID, index, err)}
	}
	meta, rc, err := openSnapshot(fss, si.ID)
	if err != nil {
		return damaged(si.Index, err)
	}
	defer rc.Close()
	br := bufio.NewReader(rc)
	body, err := snapshotBody(br)
	if err != nil {
		return damaged(meta.Index, err)
	}
	if fr, ok := body.(*frameReader); ok {
		if _, err := io.Copy(io.Discard, fr); err != nil {
			return damaged(meta.Index, err)
		}
		if _, err := br.Peek(1); !errors.Is(err, io.EOF) {
			return damaged(meta.Index, errors.New("bytes after the end chunk"))
		}
	}
	return nil
}

// openSnapshot opens snapshot id of fss for reading. A snapshot in the chunked format checks
// every chunk as it is read (frameReader), so raft's pass comparing the whole file with the CRC-64
// in its metadata is skipped for it: that pass read and hashed the file once more before anything
// could use it (a leader sending it to a member, a restore), 1.1 s at 10 M znodes. Any other
// snapshot is opened through that pass.
func openSnapshot(fss *raft.FileSnapshotStore, id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	meta, rc, err := fss.OpenUnverified(id)
	if err != nil {
		return nil, nil, err
	}
	var hdr [5]byte
	if _, err := io.ReadFull(rc, hdr[:]); err == nil && [4]byte(hdr[:4]) == snapshotMagic && hdr[4] == snapshotVersion {
		return meta, struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(hdr[:]), rc), rc}, nil
	}
	_ = rc.Close()
	return fss.Open(id)
}

// checkState verifies a data directory before Raft is given it: every log entry, the newest
// snapshot (all of them when all is set), that the log joins the snapshot, and that no entry
// recorded as durable went missing.
func checkState(dir string, store *CheckedStore, fss *raft.FileSnapshotStore, all bool) error {
	first, last, err := store.verifyAll(dir)
	if err != nil {
		return err
	}
	snaps, err := listSnapshots(dir)
	if err != nil {
		return err
	}
	var snapIndex uint64
	for i, si := range snaps {
		if i > 0 && !all {
			break
		}
		if err := checkSnapshot(fss, si); err != nil {
			return err
		}
	}
	if len(snaps) > 0 {
		snapIndex = snaps[0].Index
	}
	if last != 0 && first > snapIndex+1 {
		return &DamageError{File: store.where(first), Index: first,
			Problem: fmt.Sprintf("the log starts at %d but the newest snapshot ends at %d: entries in between are missing", first, snapIndex)}
	}
	if d := store.Durable(); max(last, snapIndex) < d {
		return &DamageError{File: store.where(last + 1), Index: last + 1,
			Problem: fmt.Sprintf("the log ends at %d, but entries up to %d were stored durably: entries were lost", last, d)}
	}
	return nil
}

// metaSumName is the file beside a snapshot's meta.json that holds its CRC-32C: raft's meta.json
// checksums the state file but not itself, and it carries the cluster configuration.
const metaSumName = "meta.sum"

func metaSum(meta []byte) string {
	return fmt.Sprintf("crc32c:%08x", crc32.Checksum(meta, castagnoli))
}

// checkedSnapshots is raft's file snapshot store whose sinks write meta.sum once raft has moved a
// complete snapshot into place.
type checkedSnapshots struct {
	*raft.FileSnapshotStore
	root   string          // dir/snapshots
	reaper *snapshotReaper // deletes the snapshots past the retention once a new one is in place; nil: raft's reaping
}

// Create implements raft.SnapshotStore.
func (s checkedSnapshots) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.FileSnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		return nil, err
	}
	k := &summingSink{SnapshotSink: sink, root: s.root, reaper: s.reaper, out: sink}
	if f := snapshotFile(s.root, sink.ID()); f != nil {
		k.file = f
		k.out = &chunkSyncer{w: sink, chunk: SnapshotSyncChunk, sync: func(off, n int64) {
			writeOut(f, off, n)
			if k.paced != nil {
				k.paced()
			}
		}}
	}
	return k, nil
}

// Open implements raft.SnapshotStore (openSnapshot); the reaper counts the reader (see
// snapshotReaper).
func (s checkedSnapshots) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	if s.reaper == nil {
		return openSnapshot(s.FileSnapshotStore, id)
	}
	return s.reaper.open(id)
}

// Its file's pages are written out chunk by chunk as it grows (SnapshotSyncChunk), whoever writes
// it: the FSM persisting its own snapshot (PersistSnapshot), or raft copying one a leader sent. A
// member that lost its data receives the whole tree that way, and its final fsync would otherwise
// flush hundreds of megabytes at once, stalling the log fsyncs of every member that shares its
// disk.
type summingSink struct {
	raft.SnapshotSink
	root   string
	reaper *snapshotReaper
	out    io.Writer // the sink, through a chunkSyncer when file is open
	file   *os.File  // the snapshot's state file, to write its pages out; nil: not paced
	paced  func()    // called for each chunk written out (PersistSnapshot's caller)
	closed bool      // raft closes a sink again after Persist did
	err    error     // what the first Close returned
}

// Write implements raft.SnapshotSink.
func (k *summingSink) Write(p []byte) (int, error) { return k.out.Write(p) }

// Cancel implements raft.SnapshotSink.
func (k *summingSink) Cancel() error {
	k.closeFile()
	return k.SnapshotSink.Cancel()
}

func (k *summingSink) closeFile() {
	if k.file != nil {
		_ = k.file.Close()
		k.file = nil
	}
}

// Close completes the snapshot, then records the checksum of its metadata, then deletes the
// snapshots past the retention. A crash between the first two leaves a snapshot without meta.sum,
// which is checked by its content instead.
func (k *summingSink) Close() error {
	if !k.closed {
		k.closed, k.err = true, k.close()
	}
	return k.err
}

func (k *summingSink) close() error {
	k.closeFile()
	if err := k.SnapshotSink.Close(); err != nil {
		return err
	}
	dir := filepath.Join(k.root, k.ID())
	meta, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil // reaped at once (a retention of 0 is not possible, but be safe)
	}
	if err != nil {
		return fmt.Errorf("consensus: snapshot metadata: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(dir, metaSumName), []byte(metaSum(meta)+"\n")); err != nil {
		return err
	}
	if k.reaper != nil {
		// The new snapshot is complete; a failure to delete old ones does not undo that.
		if err := k.reaper.reap(); err != nil {
			k.reaper.log.Warn("old snapshots were not all deleted; the next snapshot tries again", "err", err)
		}
	}
	return nil
}
