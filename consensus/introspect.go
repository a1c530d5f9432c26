package consensus

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SessionActivity returns what this node knows of each session in ids besides the replicated
// table, in the same order (see SessionActivity's fields; a follower knows only creation times).
func (n *Node) SessionActivity(ids []int64) []SessionActivity {
	return n.sessions.activity(ids, n.IsLeader())
}

// SessionActivity returns what the Memory knows of each session in ids; a Memory is always the
// leader.
func (m *Memory) SessionActivity(ids []int64) []SessionActivity {
	return m.sessions.activity(ids, true)
}

// SnapshotInfo describes a snapshot in a node's snapshot store.
type SnapshotInfo struct {
	// Index is the Raft index, and so the zxid, the snapshot was taken at.
	Index uint64
	// Term is the Raft term of that entry.
	Term uint64
	// Time is when the snapshot was started, to the millisecond; zero if unknown.
	Time time.Time
	// Size is the snapshot's size in bytes.
	Size int64
}

// LastSnapshot returns the newest snapshot in the node's store: the last one it took, or the one
// it restored from or was sent, whichever is newer. ok is false while there is none.
func (n *Node) LastSnapshot() (info SnapshotInfo, ok bool, err error) {
	metas, err := n.snaps.List()
	if err != nil {
		return SnapshotInfo{}, false, fmt.Errorf("consensus: list snapshots: %w", err)
	}
	if len(metas) == 0 {
		return SnapshotInfo{}, false, nil
	}
	m := metas[0] // newest first
	return SnapshotInfo{Index: m.Index, Term: m.Term, Time: snapshotTime(m.ID), Size: m.Size}, true, nil
}

// LastSnapshot reports that a Memory has no snapshots.
func (m *Memory) LastSnapshot() (SnapshotInfo, bool, error) { return SnapshotInfo{}, false, nil }

// snapshotTime reads the creation time hashicorp/raft writes into a snapshot's id
// ("term-index-unixmillis"), or zero if the id has another shape.
func snapshotTime(id string) time.Time {
	i := strings.LastIndexByte(id, '-')
	if i < 0 {
		return time.Time{}
	}
	ms, err := strconv.ParseInt(id[i+1:], 10, 64)
	if err != nil || ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}
