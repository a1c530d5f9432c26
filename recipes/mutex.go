package recipes

import (
	"context"
)

// Mutex is a fair (FIFO) distributed mutual-exclusion lock on a ZooKeeper path. Each Lock call
// queues an ephemeral-sequential node under the path and waits, watching only the node
// immediately ahead of it, so a release wakes exactly one waiter.
//
// A Mutex is safe for concurrent use: every Lock call is an independent contender with its own
// node, so two goroutines of one process exclude each other like two processes do. Go has no
// goroutine identity, so re-entry is explicit: Lease.Reenter, or calling Lock with a context from
// Lease.Context.
type Mutex struct {
	q   queue
	err error
}

// NewMutex returns a Mutex on path (an absolute ZooKeeper path, created if missing) using the
// session s. Errors in the arguments are reported by Lock and TryLock.
func NewMutex(s *Session, path string, opts ...Option) *Mutex {
	q, err := newQueue(s, path, opts)
	return &Mutex{q: q, err: err}
}

// Lock blocks until the lock is held, ctx ends, or an error occurs, and returns the Lease.
//
// ctx bounds waiting only. When Lock returns an error its node has been deleted or, if the
// connection is down, queued for deletion in the background while the session lives; it never
// leaves a node that would block others. If ctx carries a Lease of this Mutex (from
// Lease.Context), Lock re-enters it and returns a new handle without touching ZooKeeper.
//
// If the session expires while waiting, Lock starts again with a new node in the new session
// (losing its place in the queue). Before returning, it checks that its node exists and is owned
// by the current session.
func (m *Mutex) Lock(ctx context.Context) (*Lease, error) {
	return m.lock(ctx, false)
}

// TryLock acquires the lock only if it is free now; otherwise it deletes its node and returns
// an error wrapping ErrLocked.
func (m *Mutex) TryLock(ctx context.Context) (*Lease, error) {
	return m.lock(ctx, true)
}

func (m *Mutex) lock(ctx context.Context, try bool) (*Lease, error) {
	if m.err != nil {
		return nil, m.err
	}
	if l := leaseFromContext(ctx, m.q.path); l != nil && !l.st.read {
		return l.st.reenter()
	}
	g, err := m.q.acquire(ctx, roleExclusive, try)
	if err != nil {
		return nil, err
	}
	return newLease(m.q.s, g, m.q.path, true, false, m.q.opts.loseOnSuspend, holdLimit(m.q.opts.maxHold)), nil
}
