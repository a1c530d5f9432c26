package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"

	"github.com/zkd-io/zkd/internal/third_party/raft"

	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/znode"
)

// Tools for a stopped server's data directory: verify, dump, truncate. Each takes the directory's
// lock, so none runs beside a server on the same directory.

// DirReport is what VerifyDir found in a data directory that verified.
type DirReport struct {
	// FirstIndex and LastIndex bound the log (0, 0 when empty).
	FirstIndex, LastIndex uint64
	// Durable is the highest index the store had recorded as durable.
	Durable uint64
	// Snapshots lists the snapshots, newest first.
	Snapshots []SnapshotReport
	// TornBytes counts the bytes of an append a crash interrupted, which the next start drops.
	TornBytes int
	// LogStore is the store's kind.
	LogStore LogStore
}

// SnapshotReport describes one verified snapshot.
type SnapshotReport struct {
	ID          string
	Index, Term uint64
	Size        int64
	Zxid        int64
	Nodes       int
	Sessions    int
}

// OpenDir opens the log store and the snapshot store of a stopped server's data directory for
// a tool, holding the directory's lock until closeFn.
func OpenDir(dataDir string) (store *CheckedStore, fss *raft.FileSnapshotStore, kind LogStore, closeFn func(), err error) {
	dir := filepath.Join(dataDir, "raft")
	if !exists(dir) {
		return nil, nil, "", nil, fmt.Errorf("consensus: %s holds no zkd data (no raft directory)", dataDir)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, nil, "", nil, err
	}
	kind = LogStoreWAL
	if !exists(filepath.Join(dir, walDirName)) && exists(filepath.Join(dir, boltName)) {
		kind = LogStoreBolt
	}
	hl := hclog.NewNullLogger()
	if kind == LogStoreWAL && !exists(filepath.Join(dir, walDirName)) {
		lock.Close()
		return nil, nil, "", nil, fmt.Errorf("consensus: %s holds no log store", dir)
	}
	store, err = openLogStore(dir, kind, 0, false, hl)
	if err != nil {
		lock.Close()
		return nil, nil, "", nil, err
	}
	fss, err = raft.NewFileSnapshotStoreWithLogger(dir, 2, hl)
	if err != nil {
		store.Close()
		lock.Close()
		return nil, nil, "", nil, fmt.Errorf("consensus: snapshot store: %w", err)
	}
	return store, fss, kind, func() { store.Close(); lock.Close() }, nil
}

// VerifyDir checks every checksum of a stopped server's data directory: every log entry, the
// log store's metadata, every snapshot (whole, and decoded to the last node), that the log joins
// the newest snapshot and that nothing recorded as durable is missing. It returns the first
// damage as a *DamageError.
func VerifyDir(dataDir string) (DirReport, error) {
	store, fss, kind, done, err := OpenDir(dataDir)
	if err != nil {
		return DirReport{}, err
	}
	defer done()
	dir := filepath.Join(dataDir, "raft")
	rep := DirReport{LogStore: kind, Durable: store.Durable()}
	if err := checkState(dir, store, fss, true); err != nil {
		return rep, err
	}
	rep.FirstIndex, _ = store.FirstIndex()
	rep.LastIndex, _ = store.LastIndex()
	snaps, err := listSnapshots(dir)
	if err != nil {
		return rep, err
	}
	for _, si := range snaps {
		t, err := readSnapshotFile(filepath.Join(si.dir, "state.bin"))
		if err != nil {
			return rep, err
		}
		v := t.View()
		rep.Snapshots = append(rep.Snapshots, SnapshotReport{ID: si.ID, Index: si.Index, Term: si.Term, Size: si.Size,
			Zxid: v.Zxid(), Nodes: v.NodeCount(), Sessions: len(v.Sessions())})
	}
	if kind == LogStoreWAL {
		_, rep.TornBytes, _ = tornTail(filepath.Join(dir, walDirName), false)
	}
	return rep, nil
}

// readSnapshotFile decodes a snapshot state file (raft's state.bin) into a tree, checking its
// CRC-32C and structure.
func readSnapshotFile(path string) (*znode.Tree, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("consensus: %w", err)
	}
	defer f.Close()
	t, err := readSnapshotStream(f)
	if err != nil {
		return nil, &DamageError{File: path, Problem: err.Error()}
	}
	return t, nil
}

// NodeRecord is one znode as DumpSnapshot shows it.
type NodeRecord struct {
	Path string    `json:"path"`
	Stat jute.Stat `json:"stat"`
	Data []byte    `json:"data"`
}

// DumpSnapshot decodes a snapshot state file (dataDir/raft/snapshots/<id>/state.bin), checking
// its checksum, and calls sessions with its session table and fn for every znode in pre-order.
func DumpSnapshot(path string, sessions func(zxid int64, s []znode.Session) error, fn func(NodeRecord) error) error {
	t, err := readSnapshotFile(path)
	if err != nil {
		return err
	}
	v := t.View()
	if err := sessions(v.Zxid(), v.Sessions()); err != nil {
		return err
	}
	return v.Walk(func(p string, data []byte, st jute.Stat) error {
		return fn(NodeRecord{Path: p, Stat: st, Data: data})
	})
}

// TruncateLog drops the log entries from index from on, for an operator who chose to lose them
// (the writes stored after a damaged entry) rather than restore a backup. The store's metadata
// must be intact. It returns how many entries it dropped.
func TruncateLog(dataDir string, from uint64) (uint64, error) {
	store, _, _, done, err := OpenDir(dataDir)
	if err != nil {
		return 0, err
	}
	defer done()
	last, err := store.LastIndex()
	if err != nil {
		return 0, err
	}
	first, _ := store.FirstIndex()
	if from == 0 || from > last {
		return 0, fmt.Errorf("consensus: the log holds %d..%d; nothing to drop from %d", first, last, from)
	}
	if from <= first {
		return 0, errors.New("consensus: that would drop the whole log; restore a backup instead")
	}
	if err := store.DeleteRange(from, last); err != nil {
		return 0, err
	}
	return last - from + 1, nil
}
