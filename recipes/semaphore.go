package recipes

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"

	"github.com/go-zookeeper/zk"
)

// Semaphore hands out at most Max leases at a time on a path (Curator's InterProcessSemaphoreV2
// layout: an internal Mutex at <path>/locks and lease nodes at <path>/leases). Only the holder of
// the internal mutex watches the leases, so a returned lease wakes one waiter, and waiters are
// served in the internal mutex's FIFO order.
//
// Every lease is an ephemeral node with a unique name, found again after a lost create reply,
// and deleted on any failure or cancellation (or queued for deletion while its session lives), so
// no lease is orphaned. A Semaphore is safe for concurrent use.
type Semaphore struct {
	s      *Session
	max    int
	mutex  *Mutex
	leases queue
	err    error

	// waiting, if set (by tests), is called each time a contender finds every lease taken and
	// waits for one to be returned.
	waiting func()
}

// NewSemaphore returns a Semaphore with max leases on path. All participants must use the same
// max.
func NewSemaphore(s *Session, p string, max int, opts ...Option) *Semaphore {
	q, err := newQueue(s, path.Join(p, "leases"), opts)
	if err == nil && max < 1 {
		err = fmt.Errorf("recipes: semaphore max %d: %w", max, ErrBadArgument)
	}
	if err == nil && path.Clean(p) != p {
		err = fmt.Errorf("recipes: path %q: %w", p, ErrBadArgument)
	}
	// The hold limit is for the leases: the internal mutex is held while waiting for one.
	return &Semaphore{s: s, max: max, leases: q, mutex: NewMutex(s, path.Join(p, "locks"), append(slices.Clip(opts), WithMaxHold(0))...), err: err}
}

// Acquire waits until a lease is free, or ctx ends, and returns it. Unlock returns the lease.
func (sm *Semaphore) Acquire(ctx context.Context) (*Lease, error) { return sm.acquire(ctx, false) }

// TryAcquire returns a lease if one is free now, else an error wrapping ErrLocked. It may wait
// briefly for the internal mutex, bounded by ctx.
func (sm *Semaphore) TryAcquire(ctx context.Context) (*Lease, error) { return sm.acquire(ctx, true) }

// AcquireN acquires n leases, all or nothing: on any error the leases already obtained are
// returned before it reports the error.
func (sm *Semaphore) AcquireN(ctx context.Context, n int) ([]*Lease, error) {
	if n < 1 || n > sm.max {
		return nil, fmt.Errorf("recipes: acquire %d of %d leases: %w", n, sm.max, ErrBadArgument)
	}
	var got []*Lease
	for range n {
		l, err := sm.Acquire(ctx)
		if err != nil {
			cleanup := context.WithoutCancel(ctx)
			for _, g := range got {
				_ = g.Unlock(cleanup)
			}
			return nil, err
		}
		got = append(got, l)
	}
	return got, nil
}

func (sm *Semaphore) acquire(ctx context.Context, try bool) (*Lease, error) {
	if sm.err != nil {
		return nil, sm.err
	}
	if err := sm.leases.ensure(ctx); err != nil {
		return nil, err
	}
	lk, err := sm.mutex.Lock(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = lk.Unlock(context.WithoutCancel(ctx)) }()
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		g, err := sm.leases.create(ctx, roleExclusive, zk.FlagEphemeral|zk.FlagSequence, "")
		if errors.Is(err, errRestart) {
			if isClosed(lk.Done()) {
				return sm.acquire(ctx, try) // the internal mutex went with the old session
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		err = sm.wait(ctx, g, lk, try)
		if errors.Is(err, errRestart) {
			sm.s.deleteLater(pendingKey{sid: g.sid, path: g.node})
			if isClosed(lk.Done()) {
				return sm.acquire(ctx, try)
			}
			continue
		}
		if err != nil {
			sm.leases.remove(g)
			return nil, err
		}
		return newLease(sm.s, g, sm.leases.path, false, false, sm.leases.opts.loseOnSuspend, holdLimit(sm.leases.opts.maxHold)), nil
	}
}

// wait blocks until at most max lease nodes exist, ours included.
func (sm *Semaphore) wait(ctx context.Context, g *grant, lk *Lease, try bool) error {
	q := &sm.leases
	lost, why := sm.s.lost(g.sid)
	own := path.Base(g.node)
	for {
		kids, _, ch, err := sm.s.conn.ChildrenW(q.path)
		if err != nil {
			if err := q.retryable(ctx, err, g.sid, lost, why); err != nil {
				return err
			}
			continue
		}
		if !slices.Contains(kids, own) {
			return q.vanished(g, why)
		}
		if len(kids) <= sm.max {
			_, st, err := sm.s.conn.Exists(g.node)
			if err != nil {
				if err := q.retryable(ctx, err, g.sid, lost, why); err != nil {
					return err
				}
				continue
			}
			if st == nil {
				return q.vanished(g, why)
			}
			if st.EphemeralOwner != g.sid || !sm.s.alive(g.sid) {
				return q.vanished(g, why)
			}
			g.stat = st
			return nil
		}
		if try {
			return fmt.Errorf("recipes: semaphore %s: %w", path.Dir(q.path), ErrLocked)
		}
		if sm.waiting != nil {
			sm.waiting()
		}
		select {
		case ev := <-ch:
			if ev.Type == zk.EventNotWatching && errors.Is(ev.Err, zk.ErrClosing) {
				return ErrClosed
			}
		case <-lost:
			return q.sessionEnded(why)
		case <-lk.Done():
			return fmt.Errorf("recipes: semaphore mutex: %w", lk.Err())
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
