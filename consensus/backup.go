package consensus

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"

	"github.com/zkd-io/zkd/internal/storage"
	"github.com/zkd-io/zkd/internal/third_party/raft"

	"github.com/zkd-io/zkd/znode"
)

// WriteBackup writes v as a backup: one snapshot in the format the node writes for Raft (the
// whole tree with every Stat, the sessions and the zxid, under a CRC-32C). zkd dump snapshot
// reads it like any state.bin.
func WriteBackup(w io.Writer, v *znode.View) error { return storage.WriteSnapshot(w, v) }

// ReadBackup reads and checks a backup.
func ReadBackup(r io.Reader) (*znode.Tree, error) {
	t, err := storage.ReadSnapshot(r)
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
	f := newFSM(slog.New(slog.DiscardHandler), "backup")
	conf, err := storage.Replay(dataDir, f.Restore, func(l *raft.Log) { f.Apply(l) })
	if err != nil {
		return nil, err
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
	err = storage.Seed(dataDir, v.Zxid(), seedMembers(id, peers), func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
	if err != nil {
		return nil, err
	}
	return v, nil
}

// SeedDir seeds an empty data directory with the tree of v, as RestoreDir does with a backup of
// it, writing v's snapshot straight into the directory: nothing is encoded twice, held whole or
// read back (zkd import, whose tree was just built and checked from the snapshot reader, and
// whose snapshot a starting node checks chunk by chunk).
func SeedDir(dataDir string, v *znode.View, id string, peers []Peer) error {
	return storage.Seed(dataDir, v.Zxid(), seedMembers(id, peers), func(w io.Writer) error {
		return storage.WriteSnapshot(w, v)
	})
}

// seedMembers is the Raft configuration of a seeded directory: id alone for a standalone
// server, else the members.
func seedMembers(id string, peers []Peer) []raft.Server {
	if len(peers) == 0 {
		return []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: "127.0.0.1:0"}}
	}
	var members []raft.Server
	for _, p := range peers {
		members = append(members, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr)})
	}
	return members
}
