package recipes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// Token identifies one grant of a lock and orders grants for fencing.
type Token struct {
	// Czxid is the zxid that created the lock node. It strictly increases across successive
	// holders of a lock (and of different locks on one ensemble), survives the parent being
	// re-created and the 32-bit sequence wrap, and is the value a protected resource should
	// compare: reject any request whose Czxid is lower than the highest it has seen.
	Czxid int64
	// Seq is the sequence number ZooKeeper appended to the node name. It orders contenders
	// only within one lifetime of the parent and wraps at 2^31; do not use it for fencing.
	Seq int32
	// Path is the full path of the lock node.
	Path string
	// SessionID is the session that owns the lock node.
	SessionID int64
}

// leaseState is shared by a Lease and the handles Reenter returns.
type leaseState struct {
	s             *Session
	token         Token
	key           string   // the recipe path, for context-scoped re-entry
	write         bool     // an RWMutex write lease (or an exclusive one)
	read          bool     // an RWMutex read lease
	rw            *RWMutex // the RWMutex of a read or write lease, for Downgrade
	prefix        string   // the unique name prefix of the node
	maxHold       limit    // the hold limit of the grant (WithMaxHold); zero if none
	done          chan struct{}
	stop          chan struct{} // closed to stop the monitor; guarded by mu
	loseOnSuspend bool
	revoke        chan struct{} // closed when a revocation is requested
	revokeOnce    sync.Once
	ctx           context.Context
	cancel        context.CancelCauseFunc
	wg            sync.WaitGroup

	mu struct {
		sync.Mutex
		holds     int   // outstanding handles (re-entry count)
		ended     bool  // done is closed
		err       error // why it ended (nil after a clean release)
		releasing bool  // the last Unlock started deleting the node
	}
}

// Lease is a held lock (or semaphore lease, or leadership). It tells the holder when the lock is
// lost (Done, Err, Context), when ownership becomes uncertain (Suspended), hands out a fencing
// Token, guards writes with Multi, and is released with Unlock. Its methods are safe for
// concurrent use.
type Lease struct {
	st *leaseState
	mu sync.Mutex
	// released is set once this handle's Unlock has run; each handle releases once.
	released bool
	result   error
}

type leaseKey struct{}

// limit is a lease's hold limit: the lease ends at deadline, d after its grant.
type limit struct {
	d        time.Duration
	deadline time.Time
}

// holdLimit returns the hold limit of a lease granted now, or the zero limit if d <= 0.
func holdLimit(d time.Duration) limit {
	if d <= 0 {
		return limit{}
	}
	return limit{d: d, deadline: time.Now().Add(d)}
}

// newLease starts monitoring a granted node and returns its first handle. The lease ends by
// itself at the deadline of hold, if it has one.
func newLease(s *Session, g *grant, key string, write, read, loseOnSuspend bool, hold limit) *Lease {
	seq, _ := strconv.ParseInt(seqSuffix(path.Base(g.node), g.prefix), 10, 32)
	st := &leaseState{
		s:       s,
		token:   Token{Czxid: g.stat.Czxid, Seq: int32(seq), Path: g.node, SessionID: g.sid},
		key:     key,
		write:   write,
		read:    read,
		maxHold: hold,
		done:    make(chan struct{}),
		stop:    make(chan struct{}),
		revoke:  make(chan struct{}),
	}
	st.mu.holds = 1
	l := &Lease{st: st}
	st.ctx, st.cancel = context.WithCancelCause(context.WithValue(context.Background(), leaseKey{}, l))
	st.loseOnSuspend = loseOnSuspend
	st.startMonitor(s.Suspended())
	return l
}

// leaseFromContext returns the lease a context from Lease.Context carries for recipe key.
func leaseFromContext(ctx context.Context, key string) *Lease {
	l, _ := ctx.Value(leaseKey{}).(*Lease)
	if l == nil || l.st.key != key {
		return nil
	}
	return l
}

// revokeData is what Curator's Revoker writes into a lock node to ask its holder to release.
var revokeData = []byte("__REVOKE__")

// RevokeRequested returns a channel that is closed when another participant asks the holder to
// give the lock up (Revoke, or Curator's Revoker), by writing "__REVOKE__" into the lock node.
// Revocation is cooperative: the holder decides to Unlock.
func (l *Lease) RevokeRequested() <-chan struct{} { return l.st.revoke }

// Revoke asks the holder of the lock node at nodePath (for example a Participant's Path or a
// Token's Path) to release it, the way Curator's Revoker does. It returns an error wrapping
// zk.ErrNoNode if the node is gone.
func Revoke(ctx context.Context, s *Session, nodePath string) error {
	for {
		if _, err := s.waitConnected(ctx); err != nil {
			return err
		}
		_, err := s.conn.Set(nodePath, revokeData, -1)
		if err == nil {
			return nil
		}
		if !isConnLoss(err) {
			return opError("revoke", nodePath, err)
		}
	}
}

// Token returns the lease's fencing token.
func (l *Lease) Token() Token { return l.st.token }

// Done returns a channel that is closed when the lease ends: the lock was lost (its node was
// deleted or its session ended), it reached its hold limit (WithMaxHold), or it was released by
// the last Unlock.
func (l *Lease) Done() <-chan struct{} { return l.st.done }

// Err returns nil while the lease is held or after a clean release, and otherwise why it ended:
// an error wrapping ErrLockLost (node deleted), ErrSessionExpired, ErrSuspended, ErrClosed, or
// ErrMaxHold together with ErrLockLost (held for the WithMaxHold limit; the node was deleted).
func (l *Lease) Err() error {
	l.st.mu.Lock()
	defer l.st.mu.Unlock()
	return l.st.mu.err
}

// Suspended returns a channel that is closed while the connection to ZooKeeper is down: the
// session may have expired on the server, so the holder must treat ownership as uncertain and
// pause work with outside effects until the connection is back (Session.Suspended again) or the
// lease ends (Done).
func (l *Lease) Suspended() <-chan struct{} { return l.st.s.Suspended() }

// Context returns a context that is cancelled, with the reason as its cause, when the lease
// ends. It also carries the lease: Mutex.Lock and RWMutex locks called with it (or a context
// derived from it) re-enter instead of deadlocking.
func (l *Lease) Context() context.Context { return l.st.ctx }

// Reenter returns another handle on the same held lock, for explicit counted re-entry: the lock
// is released when every handle has been unlocked. It fails with ErrNotHeld if the lease has
// ended or this handle was already unlocked.
func (l *Lease) Reenter() (*Lease, error) {
	l.mu.Lock()
	released := l.released
	l.mu.Unlock()
	if released {
		return nil, fmt.Errorf("recipes: reenter %s: %w", l.st.token.Path, ErrNotHeld)
	}
	return l.st.reenter()
}

// reenter adds a handle to a held lease, whichever handle asks.
func (st *leaseState) reenter() (*Lease, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.mu.ended || st.mu.releasing || st.mu.holds == 0 {
		return nil, fmt.Errorf("recipes: reenter %s: %w", st.token.Path, ErrNotHeld)
	}
	st.mu.holds++
	return &Lease{st: st}, nil
}

// Check verifies on the server that the lock node still exists and is owned by the current
// session. It returns nil if so, and an error wrapping ErrLockLost otherwise.
func (l *Lease) Check(ctx context.Context) error {
	st := l.st
	if err := ctx.Err(); err != nil {
		return err
	}
	if isClosed(st.done) {
		return st.lostErr()
	}
	_, stat, err := st.s.conn.Exists(st.token.Path)
	if err != nil {
		return opError("check", st.token.Path, err)
	}
	if stat == nil || stat.EphemeralOwner != st.token.SessionID || !st.s.alive(st.token.SessionID) {
		return fmt.Errorf("recipes: check %s: %w", st.token.Path, ErrLockLost)
	}
	return nil
}

// Multi runs ops (the *zk.CreateRequest, *zk.SetDataRequest, *zk.DeleteRequest and
// *zk.CheckVersionRequest that zk.Conn.Multi accepts) atomically, guarded by a check that the
// lock node still exists: if the lock was lost, nothing is applied and the error wraps
// ErrLockLost. This enforces the lock on state kept in the same ZooKeeper. The responses are
// those of ops, without the guard's.
func (l *Lease) Multi(ctx context.Context, ops ...any) ([]zk.MultiResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st := l.st
	all := append([]any{&zk.CheckVersionRequest{Path: st.token.Path, Version: -1}}, ops...)
	res, err := st.s.conn.Multi(all...)
	if len(res) > 0 && errors.Is(res[0].Error, zk.ErrNoNode) {
		return nil, fmt.Errorf("recipes: guarded multi on %s: %w: %w", st.token.Path, ErrLockLost, zk.ErrNoNode)
	}
	if len(res) > 0 {
		res = res[1:]
	}
	if err != nil {
		return res, opError("multi", st.token.Path, err)
	}
	return res, nil
}

// Unlock releases this handle. The last handle deletes the lock node. Unlock is idempotent: a
// handle that was already unlocked returns the same result again. It returns nil only when the
// node is confirmed gone by our deletion; an error wrapping ErrLockLost if the lock had been lost
// before the release (by any handle: a lease that ended is reported by each of its handles); and
// an error wrapping ErrReleasePending (and ctx's error) if ctx ended before the deletion was
// confirmed, in which case the node is deleted in the background while the session lives and a
// later Unlock call retries the confirmation.
func (l *Lease) Unlock(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.st
	if l.released && !errors.Is(l.result, ErrReleasePending) {
		return l.result
	}
	st.mu.Lock()
	if !l.released {
		l.released = true
		st.mu.holds--
		if st.mu.holds > 0 {
			lost := st.mu.ended && st.mu.err != nil
			st.mu.Unlock()
			l.result = nil
			if lost {
				l.result = st.lostErr()
			}
			return l.result
		}
	}
	if st.mu.ended && !st.mu.releasing {
		st.mu.Unlock()
		st.stopMonitor()
		// A lease that ended by suspension still has its node while the session lives.
		removeNode(st.s, st.token.Path, st.token.SessionID)
		l.result = st.lostErr()
		return l.result
	}
	st.mu.releasing = true
	st.mu.Unlock()
	st.stopMonitor()
	l.result = st.release(ctx)
	return l.result
}

// release deletes the lock node, retrying across connection losses until ctx ends.
func (st *leaseState) release(ctx context.Context) error {
	lost, why := st.s.lost(st.token.SessionID)
	retried := false // a connection loss hid the outcome of an earlier delete
	for {
		err := st.s.conn.Delete(st.token.Path, -1)
		switch {
		case err == nil:
			st.end(nil)
			return nil
		case errors.Is(err, zk.ErrNoNode):
			st.mu.Lock()
			pending := st.mu.ended
			st.mu.Unlock()
			if pending || retried {
				// Our own earlier delete (whose reply was lost, or the background one queued by
				// an earlier Unlock) removed it.
				st.end(nil)
				return nil
			}
			st.end(fmt.Errorf("recipes: unlock %s: node already deleted: %w", st.token.Path, ErrLockLost))
			return st.lostErr()
		case isSessionGone(err) || isClosed(lost):
			cause := why()
			if cause == nil {
				cause = err
			}
			st.end(fmt.Errorf("recipes: unlock %s: %w: %w", st.token.Path, ErrLockLost, cause))
			return st.lostErr()
		case isConnLoss(err):
			retried = true
			if _, werr := st.s.waitConnected(ctx); werr != nil {
				st.s.deleteLater(pendingKey{sid: st.token.SessionID, path: st.token.Path})
				st.end(nil)
				return fmt.Errorf("recipes: unlock %s: %w: %w", st.token.Path, ErrReleasePending, werr)
			}
		default:
			st.s.deleteLater(pendingKey{sid: st.token.SessionID, path: st.token.Path})
			st.end(nil)
			return fmt.Errorf("recipes: unlock %s: %w: %w", st.token.Path, ErrReleasePending, err)
		}
	}
}

// lostErr returns the lease's end error wrapped as ErrLockLost.
func (st *leaseState) lostErr() error {
	st.mu.Lock()
	err := st.mu.err
	st.mu.Unlock()
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrLockLost) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrLockLost, err)
}

// end closes done once with err as the reason.
func (st *leaseState) end(err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.endLocked(err)
}

// endLocked is end with st.mu held.
func (st *leaseState) endLocked(err error) {
	if st.mu.ended {
		return
	}
	st.mu.ended = true
	st.mu.err = err
	close(st.done)
	cause := err
	if cause == nil {
		cause = ErrNotHeld
	}
	st.cancel(cause)
}

// stopMonitor stops the monitor goroutine and waits for it to return.
func (st *leaseState) stopMonitor() {
	st.mu.Lock()
	if !isClosed(st.stop) {
		close(st.stop)
	}
	st.mu.Unlock()
	st.wg.Wait()
}

// startMonitor starts (or, after stopMonitor, restarts) the monitor goroutine.
func (st *leaseState) startMonitor(suspended <-chan struct{}) {
	st.mu.Lock()
	if isClosed(st.stop) {
		st.stop = make(chan struct{})
	}
	stop := st.stop
	st.mu.Unlock()
	st.wg.Go(func() { st.monitor(st.loseOnSuspend, suspended, stop) })
}

// monitor watches the lease's own node and session and ends the lease when either goes, or
// when the hold limit is reached. It stops at Unlock or at the end of the lease. suspended is
// the session's suspension channel as it was when the lock was granted, so a disconnection in
// between is not missed.
func (st *leaseState) monitor(loseOnSuspend bool, suspended <-chan struct{}, stop <-chan struct{}) {
	lost, why := st.s.lost(st.token.SessionID)
	var expired <-chan time.Time // the hold limit; nil (never ready) without one
	if !st.maxHold.deadline.IsZero() {
		// Armed per run of the monitor, from the fixed deadline, so a monitor restarted after
		// a failed Downgrade still fires, at once if the deadline has passed.
		t := time.NewTimer(time.Until(st.maxHold.deadline))
		defer t.Stop()
		expired = t.C
	}
	var ch <-chan zk.Event
	for {
		if isClosed(suspended) {
			if loseOnSuspend {
				st.end(ErrSuspended)
				// Give the lock up for good: the node goes as soon as the connection is back.
				st.s.deleteLater(pendingKey{sid: st.token.SessionID, path: st.token.Path})
				return
			}
			connected, cur, resumed := st.s.status()
			if connected {
				suspended = cur
				continue
			}
			select {
			case ev := <-ch:
				if st.onEvent(ev) {
					return
				}
				ch = nil
			case <-resumed:
			case <-lost:
				st.endLost(why())
				return
			case <-expired:
				st.expire()
				return
			case <-stop:
				return
			}
			continue
		}
		if ch == nil {
			data, _, c, err := st.s.conn.GetW(st.token.Path)
			if err == nil && bytes.Equal(data, revokeData) {
				st.revokeOnce.Do(func() { close(st.revoke) })
			}
			switch {
			case errors.Is(err, zk.ErrNoNode):
				st.end(fmt.Errorf("recipes: %s deleted: %w", st.token.Path, ErrLockLost))
				return
			case errors.Is(err, zk.ErrSessionExpired):
				st.end(fmt.Errorf("%w: %w", ErrSessionExpired, zk.ErrSessionExpired))
				return
			case errors.Is(err, zk.ErrClosing):
				st.end(ErrClosed)
				return
			case err != nil:
				// A connection loss: wait for the suspension to show, then for the reconnect.
				select {
				case <-suspended:
				case <-lost:
				case <-expired:
					st.expire()
					return
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
				continue
			}
			ch = c
		}
		select {
		case ev := <-ch:
			if st.onEvent(ev) {
				return
			}
			ch = nil
		case <-lost:
			st.endLost(why())
			return
		case <-expired:
			st.expire()
			return
		case <-stop:
			return
		case <-suspended:
		}
	}
}

// expire ends a lease that reached its hold limit, with an error wrapping ErrMaxHold and
// ErrLockLost, and deletes its node so the next contender is granted the lock. It does nothing
// if the lease already ended or a release (Unlock, Downgrade) has begun. The monitor calls it
// and then returns, so an Unlock of the expired lease waits (in stopMonitor) for the deletion.
func (st *leaseState) expire() {
	st.mu.Lock()
	if st.mu.ended || st.mu.releasing {
		st.mu.Unlock()
		return
	}
	st.endLocked(fmt.Errorf("recipes: %s held for %v: %w: %w", st.token.Path, st.maxHold.d, ErrMaxHold, ErrLockLost))
	st.mu.Unlock()
	removeNode(st.s, st.token.Path, st.token.SessionID)
}

// endLost ends the lease because its session is (believed) gone. If the server kept the session
// after all (a reconnect just past the timeout), the background deleter removes the node.
func (st *leaseState) endLost(err error) {
	st.end(err)
	st.s.deleteLater(pendingKey{sid: st.token.SessionID, path: st.token.Path})
}

// onEvent handles a watch event on the lease's own node and reports whether the lease ended.
// Any other event (a data change) only means the watch must be set again.
func (st *leaseState) onEvent(ev zk.Event) bool {
	switch {
	case ev.Type == zk.EventNodeDeleted:
		st.end(fmt.Errorf("recipes: %s deleted: %w", st.token.Path, ErrLockLost))
		return true
	case ev.Type == zk.EventNotWatching && errors.Is(ev.Err, zk.ErrSessionExpired):
		st.end(fmt.Errorf("%w: %w", ErrSessionExpired, zk.ErrSessionExpired))
		return true
	case ev.Type == zk.EventNotWatching:
		st.end(ErrClosed)
		return true
	}
	return false
}
