package consensus

import (
	"slices"
	"sync"
	"time"

	"github.com/zkd-io/zkd/znode"
)

// sessionTracker holds session liveness: a deadline per session. It has no clock of its own:
// every method that needs the time is given it, so tests drive it with any times they like. It
// is fed on every node by the FSM (sessions created and closed) and by touches, but only the
// leader's copy matters: only the leader expires sessions, and a new leader starts every session
// with a full timeout. Nothing here is replicated or logged.
//
// The leader also records which server each session is attached to (its owner), as ZooKeeper's
// leader does: a session that reattaches on another server moves there, and a write that still
// arrives through the old server is refused (ErrSessionMoved), so that server closes the stale
// connection instead of acting for a client that has moved on. A new leader starts with no owners;
// the first server to write for or validate a session becomes its owner.
type sessionTracker struct {
	mu struct {
		sync.Mutex
		sessions map[int64]*liveness
		owners   map[int64]string // session → server id (leader only)
	}
}

type liveness struct {
	timeout  time.Duration
	deadline time.Time
	closing  bool // an expiry proposal for it is under way
	// born is when the leader created the session (the time it stamped into the createSession
	// entry); zero when this node learnt of the session from a snapshot. touched is the last sign
	// of life this node knows of: the creation, then the touches it received as leader.
	born, touched time.Time
}

func newSessionTracker() *sessionTracker {
	t := &sessionTracker{}
	t.mu.sessions = make(map[int64]*liveness)
	t.mu.owners = make(map[int64]string)
	return t
}

func msDuration(ms int32) time.Duration { return time.Duration(ms) * time.Millisecond }

// created records a session the FSM just created, with a full timeout from now; born is the
// creation time the leader stamped into the entry.
func (t *sessionTracker) created(id int64, timeoutMs int32, now, born time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.mu.sessions[id]; !ok {
		d := msDuration(timeoutMs)
		// Creating its session is the client's first sign of life.
		t.mu.sessions[id] = &liveness{timeout: d, deadline: now.Add(d), born: born, touched: born}
	}
}

// closed forgets sessions the FSM just closed.
func (t *sessionTracker) closed(ids []int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range ids {
		delete(t.mu.sessions, id)
		delete(t.mu.owners, id)
	}
}

// restored replaces the table with the sessions of a restored snapshot.
func (t *sessionTracker) restored(sessions []znode.Session, now time.Time) { t.reset(sessions, now) }

// reset gives every listed session a full timeout from now and forgets any other. A new leader
// calls it once its FSM has caught up, as ZooKeeper's new leader does.
func (t *sessionTracker) reset(sessions []znode.Session, now time.Time) {
	m := make(map[int64]*liveness, len(sessions))
	for _, s := range sessions {
		d := msDuration(s.Timeout)
		m[s.ID] = &liveness{timeout: d, deadline: now.Add(d)}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, l := range m {
		if old, ok := t.mu.sessions[id]; ok {
			// A creation time, once known, stays true, and so does a sign of life heard.
			l.born, l.touched = old.born, old.touched
		}
	}
	t.mu.sessions = m
	t.mu.owners = make(map[int64]string)
}

// claim makes server the owner of session (a new session, or a reattach validated on server).
func (t *sessionTracker) claim(session int64, server string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mu.owners[session] = server
}

// owns reports whether a write for session may come through server: it may if server owns the
// session, or if no owner is known yet (then server becomes the owner).
func (t *sessionTracker) owns(session int64, server string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if o, ok := t.mu.owners[session]; ok {
		return o == server
	}
	t.mu.owners[session] = server
	return true
}

// touch extends a live session's deadline by its timeout. It reports false for sessions that are
// unknown or being expired.
func (t *sessionTracker) touch(id int64, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.mu.sessions[id]
	if !ok || s.closing {
		return false
	}
	if d := now.Add(s.timeout); d.After(s.deadline) {
		s.deadline = d
	}
	if now.After(s.touched) {
		s.touched = now
	}
	return true
}

// expire returns the sessions whose deadline passed, sorted, and marks them closing so they are
// proposed once.
func (t *sessionTracker) expire(now time.Time) []int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ids []int64
	for id, s := range t.mu.sessions {
		if !s.closing && now.After(s.deadline) {
			s.closing = true
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// unclose clears the closing mark after a failed expiry proposal, so the next round retries.
func (t *sessionTracker) unclose(ids []int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range ids {
		if s, ok := t.mu.sessions[id]; ok {
			s.closing = false
		}
	}
}

func (t *sessionTracker) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.mu.sessions)
}

// SessionActivity is what a node knows of a session besides the replicated session table: for
// introspection (the server's lock report), never for decisions.
type SessionActivity struct {
	// Created is when the leader created the session, from the time it stamped into the
	// createSession entry. Zero when unknown: the node learnt of the session from a snapshot.
	Created time.Time
	// LastTouch is when the leader last heard that the session's client was alive: its creation,
	// then any request or ping, on any server (other servers report in batches every
	// TickTime/2). Zero on a follower, and for a session a new leader learnt of from a snapshot
	// until the session's first touch reaches it.
	LastTouch time.Time
	// Server is the id of the server the session's client is attached to, as the leader records
	// it. Empty on a follower, or when the leader has not seen the session attach or write.
	Server string
}

// activity returns what the tracker knows of each session in ids, in the same order; unknown
// sessions get the zero value. Liveness and ownership are reported only when leader is set: a
// follower's copies are never fed.
func (t *sessionTracker) activity(ids []int64, leader bool) []SessionActivity {
	out := make([]SessionActivity, len(ids))
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, id := range ids {
		l, ok := t.mu.sessions[id]
		if !ok {
			continue
		}
		out[i].Created = l.born
		if leader {
			out[i].LastTouch = l.touched
			out[i].Server = t.mu.owners[id]
		}
	}
	return out
}
