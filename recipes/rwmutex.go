package recipes

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/go-zookeeper/zk"
)

// RWMutex is a fair distributed reader/writer lock (the ZooKeeper "shared lock" recipe). Readers
// share the lock; a writer excludes everyone. Grants follow queue order: a reader waits only for
// the nearest writer queued before it, a writer waits for its immediate predecessor, so readers
// that arrive after a waiting writer queue behind it and writers cannot starve.
//
// A write lease may be downgraded to a read lease atomically (Lease.Downgrade). Upgrading is
// refused: taking the write lock with a context that carries a read lease of the same RWMutex
// returns ErrUpgrade instead of deadlocking. An RWMutex is safe for concurrent use; each call is an
// independent contender.
type RWMutex struct {
	q   queue
	err error
}

// NewRWMutex returns an RWMutex on path using the session s.
func NewRWMutex(s *Session, path string, opts ...Option) *RWMutex {
	q, err := newQueue(s, path, opts)
	return &RWMutex{q: q, err: err}
}

// Lock takes the write lock, waiting until ctx ends. It behaves like Mutex.Lock. If ctx carries
// a write lease of this RWMutex it re-enters it; if it carries a read lease it returns
// ErrUpgrade.
func (m *RWMutex) Lock(ctx context.Context) (*Lease, error) { return m.lock(ctx, roleWrite, false) }

// TryLock takes the write lock only if it is free now, else returns an error wrapping ErrLocked.
func (m *RWMutex) TryLock(ctx context.Context) (*Lease, error) { return m.lock(ctx, roleWrite, true) }

// RLock takes a read lock, waiting until ctx ends. If ctx carries a lease of this RWMutex (read
// or write) it re-enters that lease, since a write hold covers reading.
func (m *RWMutex) RLock(ctx context.Context) (*Lease, error) { return m.lock(ctx, roleRead, false) }

// TryRLock takes a read lock only if no writer holds or waits ahead, else returns an error
// wrapping ErrLocked.
func (m *RWMutex) TryRLock(ctx context.Context) (*Lease, error) { return m.lock(ctx, roleRead, true) }

func (m *RWMutex) lock(ctx context.Context, r role, try bool) (*Lease, error) {
	if m.err != nil {
		return nil, m.err
	}
	if l := leaseFromContext(ctx, m.q.path); l != nil {
		if r == roleWrite && l.st.read {
			return nil, fmt.Errorf("recipes: %s: %w", m.q.path, ErrUpgrade)
		}
		return l.st.reenter()
	}
	g, err := m.q.acquire(ctx, r, try)
	if err != nil {
		return nil, err
	}
	l := newLease(m.q.s, g, m.q.path, r == roleWrite, r == roleRead, m.q.opts.loseOnSuspend, holdLimit(m.q.opts.maxHold))
	l.st.rw = m
	l.st.prefix = g.prefix
	return l, nil
}

// Downgrade atomically turns a held write lease of an RWMutex into a read lease: in one multi it
// creates a read node at the writer's place in the queue and deletes the writer's node, so no
// writer queued behind can slip in between. The write lease ends (cleanly) and the read lease is
// returned; its Token keeps the write grant's Czxid, and it keeps the write grant's hold limit
// (WithMaxHold), counted from the write grant. It fails with ErrNotHeld if the lease is not a held write lease with a single handle.
func (l *Lease) Downgrade(ctx context.Context) (*Lease, error) {
	st := l.st
	m := st.rw
	st.mu.Lock()
	ok := m != nil && st.write && !st.mu.ended && !st.mu.releasing && st.mu.holds == 1
	if ok {
		st.mu.releasing = true
	}
	st.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("recipes: downgrade %s: %w", st.token.Path, ErrNotHeld)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	base := path.Base(st.token.Path)
	seq := strings.TrimPrefix(base, st.prefix)
	writeMark := m.q.opts.proto.marker(roleWrite)
	readPrefix := strings.TrimSuffix(st.prefix, writeMark) + m.q.opts.proto.marker(roleRead)
	readNode := path.Dir(st.token.Path) + "/" + readPrefix + seq
	sid := st.token.SessionID
	st.stopMonitor() // the multi deletes the node; that is no loss
	restart := func() {
		st.mu.Lock()
		st.mu.releasing = false
		st.mu.Unlock()
		st.startMonitor(st.s.Suspended())
	}
	for {
		_, err := m.q.s.conn.Multi(
			&zk.CreateRequest{Path: readNode, Data: m.q.opts.data, Acl: m.q.opts.acl, Flags: zk.FlagEphemeral},
			&zk.DeleteRequest{Path: st.token.Path, Version: -1},
		)
		if err == nil {
			break
		}
		if !isConnLoss(err) {
			restart()
			return nil, opError("downgrade", st.token.Path, err)
		}
		if _, werr := m.q.s.waitConnected(ctx); werr != nil {
			// Unknown outcome: keep the write lease (its monitor tells if it went).
			restart()
			return nil, opError("downgrade", st.token.Path, werr)
		}
		_, rst, rerr := m.q.s.conn.Exists(readNode)
		if rerr == nil && rst != nil && rst.EphemeralOwner == sid {
			break // the multi committed before the connection dropped
		}
	}
	st.end(nil)
	l.released = true
	_, rst, err := m.q.s.conn.Exists(readNode)
	if err != nil || rst == nil {
		if err == nil {
			err = zk.ErrNoNode
		}
		return nil, fmt.Errorf("recipes: downgrade %s: %w: %w", readNode, ErrLockLost, err)
	}
	g := &grant{node: readNode, prefix: readPrefix, sid: sid, stat: rst}
	if rst.EphemeralOwner != sid || !m.q.s.alive(sid) {
		removeNode(m.q.s, readNode, sid)
		return nil, fmt.Errorf("recipes: downgrade %s: %w", readNode, ErrLockLost)
	}
	// The read lease continues the write grant: it keeps the writer's Czxid, which is lower than
	// that of any writer queued behind, so fencing order still matches grant order.
	rst2 := *rst
	rst2.Czxid = st.token.Czxid
	g.stat = &rst2
	nl := newLease(m.q.s, g, m.q.path, false, true, m.q.opts.loseOnSuspend, st.maxHold)
	nl.st.rw = m
	nl.st.prefix = readPrefix
	return nl, nil
}
