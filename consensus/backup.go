package consensus

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/zkd-io/zkd/internal/third_party/raft"

	"github.com/zkd-io/zkd/znode"
)

// Backups. A backup is one snapshot in the format this package writes for Raft (magic, version,
// then znode's snapshot with its CRC-32C trailer): the whole tree with every Stat, the sessions
// and the zxid. zkd dump snapshot reads it like any state.bin.

// WriteBackup writes v as a backup.
func WriteBackup(w io.Writer, v *znode.View) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	if err := writeSnapshot(bw, v); err != nil {
		return err
	}
	return bw.Flush()
}

// ReadBackup reads and checks a backup.
func ReadBackup(r io.Reader) (*znode.Tree, error) {
	t, err := readSnapshotStream(r)
	if err != nil {
		return nil, fmt.Errorf("consensus: backup: %w", err)
	}
	return t, nil
}

// BackupDir writes a backup of a stopped standalone server's data directory: its newest snapshot
// with every later log entry applied. A cluster member's log may end in entries that were never
// committed, so its directory is refused: back a cluster up through a running member's admin
// server (the snapshot command).
func BackupDir(dataDir string, w io.Writer) (*znode.View, error) {
	store, fss, _, done, err := openDir(dataDir)
	if err != nil {
		return nil, err
	}
	defer done()
	dir := filepath.Join(dataDir, "raft")
	if err := checkState(dir, store, fss, false); err != nil {
		return nil, err
	}
	f := newFSM(slog.New(slog.DiscardHandler), "backup")
	var (
		from uint64
		conf raft.Configuration
	)
	snaps, err := listSnapshots(dir)
	if err != nil {
		return nil, err
	}
	if len(snaps) > 0 {
		meta, rc, err := fss.Open(snaps[0].ID)
		if err != nil {
			return nil, &DamageError{File: filepath.Join(snaps[0].dir, "state.bin"), Problem: err.Error()}
		}
		if err := f.Restore(rc); err != nil {
			return nil, err
		}
		from, conf = meta.Index, meta.Configuration
	}
	first, _ := store.FirstIndex()
	last, _ := store.LastIndex()
	var l raft.Log
	for i := max(first, from+1); last != 0 && i <= last; i++ {
		if err := store.GetLog(i, &l); err != nil {
			return nil, store.asDamage(i, err)
		}
		switch l.Type {
		case raft.LogCommand:
			f.Apply(&l)
		case raft.LogConfiguration:
			conf = raft.DecodeConfiguration(l.Data)
		}
	}
	voters := 0
	for _, s := range conf.Servers {
		if s.Suffrage == raft.Voter {
			voters++
		}
	}
	if voters > 1 {
		return nil, fmt.Errorf("consensus: %s belongs to a cluster of %d voters: its log may end in writes that never committed; back it up from a running member's admin server instead", dataDir, voters)
	}
	v := f.view()
	return v, WriteBackup(w, v)
}

// RestoreDir seeds an empty data directory from a backup: a snapshot at the backup's zxid (so
// zxids go on above it) with a Raft configuration of the given members (id alone for a standalone
// server). Every member of a new cluster is seeded from the same backup with the same members,
// each with its own id. The directory must hold no zkd data.
func RestoreDir(dataDir string, backup io.Reader, id string, peers []Peer) (*znode.View, error) {
	b, err := io.ReadAll(backup)
	if err != nil {
		return nil, fmt.Errorf("consensus: read backup: %w", err)
	}
	t, err := ReadBackup(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	v := t.View()
	zxid := v.Zxid()
	if zxid <= 0 {
		return nil, errors.New("consensus: the backup is of an empty server (zxid 0); start a new server instead")
	}
	dir := filepath.Join(dataDir, "raft")
	if exists(dir) {
		return nil, fmt.Errorf("consensus: %s already holds zkd data; restore into a new directory", dataDir)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("consensus: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	var conf raft.Configuration
	if len(peers) == 0 {
		conf.Servers = []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: "127.0.0.1:0"}}
	}
	for _, p := range peers {
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr)})
	}
	const term = 1
	hl := hclog.NewNullLogger()
	store, err := openLogStore(dir, LogStoreWAL, segmentSizeFor(dir), true, hl)
	if err != nil {
		return nil, err
	}
	err = store.SetUint64([]byte("CurrentTerm"), term)
	if cerr := store.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	fss, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hl)
	if err != nil {
		return nil, fmt.Errorf("consensus: snapshot store: %w", err)
	}
	snaps := checkedSnapshots{FileSnapshotStore: fss, root: filepath.Join(dir, snapshotsDirName)}
	// The store encodes the members in raft's old peers format too, through a transport.
	_, trans := raft.NewInmemTransport("")
	defer trans.Close()
	sink, err := snaps.Create(raft.SnapshotVersionMax, uint64(zxid), term, conf, uint64(zxid), trans)
	if err != nil {
		return nil, fmt.Errorf("consensus: create snapshot: %w", err)
	}
	if _, err := sink.Write(b); err != nil {
		_ = sink.Cancel()
		return nil, fmt.Errorf("consensus: write snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return nil, fmt.Errorf("consensus: write snapshot: %w", err)
	}
	return v, nil
}
