package storage

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"

	"github.com/zkd-io/zkd/internal/third_party/raft"

	"github.com/zkd-io/zkd/znode"
)

// Backups. A backup is one snapshot in the format this package writes for Raft (magic, version,
// then znode's snapshot with its CRC-32C trailer): the whole tree with every Stat, the sessions
// and the zxid. zkd dump snapshot reads it like any state.bin.

// WriteSnapshot writes v in the snapshot format, buffered.
func WriteSnapshot(w io.Writer, v *znode.View) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	if err := writeSnapshot(bw, v); err != nil {
		return err
	}
	return bw.Flush()
}

// ReadSnapshot reads and checks a snapshot in the format WriteSnapshot writes.
func ReadSnapshot(r io.Reader) (*znode.Tree, error) { return readSnapshotStream(r) }

// Replay reads the state of a stopped server's data directory after verifying it: restore is
// given the newest snapshot, if any, and apply every later command entry in order. It returns
// the Raft configuration in force after the last entry.
func Replay(dataDir string, restore func(io.ReadCloser) error, apply func(*raft.Log)) (raft.Configuration, error) {
	var conf raft.Configuration
	store, fss, _, done, err := OpenDir(dataDir)
	if err != nil {
		return conf, err
	}
	defer done()
	dir := filepath.Join(dataDir, "raft")
	if err := checkState(dir, store, fss, false); err != nil {
		return conf, err
	}
	var from uint64
	snaps, err := listSnapshots(dir)
	if err != nil {
		return conf, err
	}
	if len(snaps) > 0 {
		meta, rc, err := fss.Open(snaps[0].ID)
		if err != nil {
			return conf, &DamageError{File: filepath.Join(snaps[0].dir, "state.bin"), Problem: err.Error()}
		}
		if err := restore(rc); err != nil {
			return conf, err
		}
		from, conf = meta.Index, meta.Configuration
	}
	first, _ := store.FirstIndex()
	last, _ := store.LastIndex()
	var l raft.Log
	for i := max(first, from+1); last != 0 && i <= last; i++ {
		if err := store.GetLog(i, &l); err != nil {
			return conf, store.AsDamage(i, err)
		}
		switch l.Type {
		case raft.LogCommand:
			apply(&l)
		case raft.LogConfiguration:
			conf = raft.DecodeConfiguration(l.Data)
		}
	}
	return conf, nil
}

// Seed seeds an empty data directory from a snapshot, which write writes in WriteSnapshot's
// format (its tree at zxid): Raft's state becomes that snapshot at index zxid, term 1, with the
// given members. The directory must hold no zkd data. An error from write cancels the snapshot.
func Seed(dataDir string, zxid int64, members []raft.Server, write func(io.Writer) error) error {
	if zxid <= 0 {
		return errors.New("consensus: the backup is of an empty server (zxid 0); start a new server instead")
	}
	dir := filepath.Join(dataDir, "raft")
	if exists(dir) {
		return fmt.Errorf("consensus: %s already holds zkd data; restore into a new directory", dataDir)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("consensus: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return err
	}
	defer lock.Close()
	conf := raft.Configuration{Servers: members}
	const term = 1
	hl := hclog.NewNullLogger()
	store, err := openLogStore(dir, LogStoreWAL, segmentSizeFor(dir), true, hl)
	if err != nil {
		return err
	}
	err = store.SetUint64([]byte("CurrentTerm"), term)
	if cerr := store.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	fss, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hl)
	if err != nil {
		return fmt.Errorf("consensus: snapshot store: %w", err)
	}
	snaps := checkedSnapshots{FileSnapshotStore: fss, root: filepath.Join(dir, snapshotsDirName)}
	// The store encodes the members in raft's old peers format too, through a transport.
	_, trans := raft.NewInmemTransport("")
	defer trans.Close()
	sink, err := snaps.Create(raft.SnapshotVersionMax, uint64(zxid), term, conf, uint64(zxid), trans)
	if err != nil {
		return fmt.Errorf("consensus: create snapshot: %w", err)
	}
	if err := write(sink); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("consensus: write snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("consensus: write snapshot: %w", err)
	}
	return nil
}
