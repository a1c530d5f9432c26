package storage

import (
	upstream "github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/zkd-io/zkd/internal/third_party/raft"
)

// boltStore is raft-boltdb's BoltStore as a log store of zkd's Raft. raft-boltdb is built
// against upstream hashicorp/raft, whose Log is a distinct type with the same fields as the
// fork's; each entry is converted on its way in and out. Only the bbolt log store (not the
// default) and its migration to the WAL pay for it.
type boltStore struct {
	*raftboltdb.BoltStore
}

func toUpstream(l *raft.Log) *upstream.Log {
	return &upstream.Log{Index: l.Index, Term: l.Term, Type: upstream.LogType(l.Type), Data: l.Data,
		Extensions: l.Extensions, AppendedAt: l.AppendedAt}
}

func fromUpstream(dst *raft.Log, l *upstream.Log) {
	*dst = raft.Log{Index: l.Index, Term: l.Term, Type: raft.LogType(l.Type), Data: l.Data,
		Extensions: l.Extensions, AppendedAt: l.AppendedAt}
}

func (b boltStore) GetLog(index uint64, out *raft.Log) error {
	var l upstream.Log
	if err := b.BoltStore.GetLog(index, &l); err != nil {
		return err
	}
	fromUpstream(out, &l)
	return nil
}

func (b boltStore) StoreLog(l *raft.Log) error { return b.BoltStore.StoreLog(toUpstream(l)) }

func (b boltStore) StoreLogs(logs []*raft.Log) error {
	up := make([]*upstream.Log, len(logs))
	for i, l := range logs {
		up[i] = toUpstream(l)
	}
	return b.BoltStore.StoreLogs(up)
}
