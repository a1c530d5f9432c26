package znode

import (
	"bytes"

	"github.com/zkd-io/zkd/jute"
)

// createSession registers a session, or updates the timeout and password of one already known
// (its ephemerals are kept).
func (a *applier) createSession(req *CreateSession) {
	s := &session{Session: Session{ID: req.ID, Timeout: req.Timeout, Passwd: bytes.Clone(req.Passwd)}, attach: req.Attach}
	if old, ok := a.v.sessions.get(req.ID); ok {
		s.ephemerals = old.ephemerals
		if old.attach >= req.Attach {
			s.attach, s.seq = old.attach, old.seq
		}
	}
	a.v.sessions, _ = a.v.sessions.set(s)
}

// admitSession applies ZooKeeper's session rules to a client write, before the write itself: the
// session must be alive (SessionExpired otherwise: a write of a closed or expired session never
// takes effect, whatever path brought it here; closing a session that is gone is a no-op), and an ordered write (Txn.Attach set) must come
// next in its session's order: the write after the last one taken from the same attachment, or
// the first write of a later attachment. Anything else is refused with SessionMoved, the code
// ZooKeeper gives a connection the session has left, and is never applied: a write from an
// attachment the session has left, a write whose predecessor on its attachment never took effect
// (a gap), or one that already took effect (a resubmission). So a session's writes take effect
// as a prefix of each connection's order, connection after connection.
//
// On success it returns the session row to store, already advanced past this write; the caller
// stores it whether or not the write itself then fails, because a failed write still took its
// place in the order.
func (a *applier) admitSession() (*session, error) {
	txn := a.txn
	s, ok := a.v.sessions.get(txn.Session)
	if !ok {
		if txn.Op == jute.OpCloseSession {
			return nil, nil // closing a session that is gone changes nothing, as in ZooKeeper
		}
		return nil, jute.CodeSessionExpired
	}
	if txn.Attach == 0 {
		return nil, nil
	}
	switch {
	case txn.Attach == s.attach && txn.Seq == s.seq+1:
	case txn.Attach > s.attach && txn.Seq == 1:
	default:
		return nil, jute.CodeSessionMoved
	}
	ns := *s
	ns.attach, ns.seq = txn.Attach, txn.Seq
	return &ns, nil
}

// closeSessions removes the sessions and deletes all their ephemerals, in path order within each
// session. Unknown ids are skipped.
func (a *applier) closeSessions(ids []int64) {
	for _, id := range ids {
		s, ok := a.v.sessions.get(id)
		if !ok {
			continue
		}
		s.ephemerals.ascend(func(p pathKey) bool {
			path := string(p)
			n := a.find(path)
			if n != nil && n.kind() == kindEphemeral && n.owner() == id {
				parentPath, _, _ := splitParent(path)
				a.remove(path, parentPath, n, false)
			}
			return true
		})
		a.v.sessions, _ = a.v.sessions.delete(id)
		a.closed = append(a.closed, id)
	}
}

// reapable reports whether a container or TTL node is due for deletion at now, by ZooKeeper's
// ContainerManager rules: it has no children, and either it is a container that has had a child
// (or, when neverUsedInterval > 0, has had none for longer than that since its mtime), or it is a
// TTL node whose ttl has passed since its mtime.
func reapable(n *node, now, neverUsedInterval int64) bool {
	if n.numChildren() != 0 {
		return false
	}
	switch n.kind() {
	case kindContainer:
		return n.cversion() > 0 || (neverUsedInterval > 0 && now-n.mtime() > neverUsedInterval)
	case kindTTL:
		return n.owner() != 0 && now-n.mtime() > n.owner()
	}
	return false
}

func (a *applier) reap(req *Reap) {
	for _, path := range req.Paths {
		n := a.find(path)
		if n == nil || !reapable(n, a.txn.Time, req.NeverUsedInterval) {
			continue
		}
		parentPath, _, _ := splitParent(path)
		a.remove(path, parentPath, n, true)
	}
}

// ReapCandidates lists, in ZooKeeper's order (containers, then TTL nodes, each in path order), the
// paths the leader should delete at time now (ms), at most max of them (max <= 0: no limit).
// neverUsedInterval is znode.container.maxNeverUsedIntervalMs (0: containers that never had a
// child are kept).
func (v *View) ReapCandidates(now, neverUsedInterval int64, max int) []string {
	var out []string
	collect := func(p pathKey) bool {
		path := string(p)
		if max > 0 && len(out) >= max {
			return false
		}
		if n := v.lookup(path); n != nil && reapable(n, now, neverUsedInterval) {
			out = append(out, path)
		}
		return true
	}
	if v.containers.ascend(collect) {
		v.ttls.ascend(collect)
	}
	return out
}

// Session returns the session with the given id.
func (v *View) Session(id int64) (Session, bool) {
	s, ok := v.sessions.get(id)
	if !ok {
		return Session{}, false
	}
	return s.Session, true
}

// Sessions returns every session, sorted by id.
func (v *View) Sessions() []Session {
	var out []Session
	v.sessions.ascend(func(s *session) bool {
		out = append(out, s.Session)
		return true
	})
	return out
}

// Ephemerals returns the paths of the session's ephemeral nodes, sorted.
func (v *View) Ephemerals(session int64) []string {
	return v.ephemeralsWithPrefix(session, "")
}

func (v *View) ephemeralsWithPrefix(id int64, prefix string) []string {
	out := []string{}
	s, ok := v.sessions.get(id)
	if !ok {
		return out
	}
	s.ephemerals.ascendFrom(prefix, func(p pathKey) bool {
		path := string(p)
		if len(path) < len(prefix) || path[:len(prefix)] != prefix {
			return false
		}
		out = append(out, path)
		return true
	})
	return out
}

// Zxid returns the zxid of the last transaction applied in this view.
func (v *View) Zxid() int64 { return v.zxid }

// NodeCount returns the node count as ZooKeeper's znode_count gauge reports it: the real nodes plus
// one, because ZooKeeper's node map also holds "" as an alias of the root (a fresh tree reports 5).
func (v *View) NodeCount() int { return int(v.nodes) + 1 }

// DataSize returns approximate_data_size as ZooKeeper computes it: the sum over its node map of each
// key's length plus the data's length (a fresh tree reports 44).
func (v *View) DataSize() int64 { return v.dataSize }

// EphemeralCount returns the number of ephemeral nodes.
func (v *View) EphemeralCount() int { return int(v.ephemerals) }

// Stat returns the Stat of the node at path.
func (v *View) Stat(path string) (jute.Stat, bool) {
	n := v.lookup(path)
	if n == nil {
		return jute.Stat{}, false
	}
	return n.stat(), true
}

// ACL returns the ACL of the node at path. The slice is shared and must not be modified.
func (v *View) ACL(path string) ([]jute.ACL, bool) {
	n := v.lookup(path)
	if n == nil {
		return nil, false
	}
	return n.acl.list, true
}
