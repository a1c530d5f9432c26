package recipes

import (
	"context"
	"errors"
	"path"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkd-io/zkd/internal/testkit"
)

// exclusionChecker fails on any overlap of critical sections and on any fencing token that does
// not strictly increase across successive holders.
type exclusionChecker struct {
	holders   atomic.Int32
	overlaps  atomic.Int32
	mu        sync.Mutex
	lastToken int64
	badTokens []int64
	entries   int
}

func (c *exclusionChecker) enter(tok Token) {
	if c.holders.Add(1) != 1 {
		c.overlaps.Add(1)
	}
	c.mu.Lock()
	if tok.Czxid <= c.lastToken {
		c.badTokens = append(c.badTokens, tok.Czxid)
	}
	c.lastToken = tok.Czxid
	c.entries++
	c.mu.Unlock()
}

func (c *exclusionChecker) leave() { c.holders.Add(-1) }

func (c *exclusionChecker) verify(t *testing.T, want int) {
	t.Helper()
	if n := c.overlaps.Load(); n != 0 {
		t.Errorf("%d overlapping critical sections", n)
	}
	if len(c.badTokens) != 0 {
		t.Errorf("fencing tokens not strictly increasing: %v", c.badTokens)
	}
	if c.entries != want {
		t.Errorf("entries = %d; want %d", c.entries, want)
	}
}

func TestMutexExclusionUnderContention(t *testing.T) {
	const sessions, goroutines, rounds = 4, 4, 4
	p := testPath(t)
	ctx := testCtx(t, 90*time.Second)
	var chk exclusionChecker
	lg := newLedger(t, newTestSession(t, nil), p+"-ledger")
	var wg sync.WaitGroup
	errs := make(chan error, sessions*goroutines)
	for range sessions {
		s := newTestSession(t, nil)
		m := NewMutex(s, p)
		for range goroutines {
			wg.Go(func() {
				for range rounds {
					l, err := m.Lock(ctx)
					if err != nil {
						errs <- err
						return
					}
					chk.enter(l.Token())
					// The critical section's work: a check-and-set on the server, across two
					// round trips, so overlaps would show (in chk and in the ledger).
					err = lg.advance(ctx, s, l.Token().Path)
					chk.leave()
					if err != nil {
						errs <- err
						_ = l.Unlock(ctx)
						return
					}
					if err := l.Unlock(ctx); err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	chk.verify(t, sessions*goroutines*rounds)
	s := newTestSession(t, nil)
	lg.verify(t, s, sessions*goroutines*rounds)
	if c := children(t, s, p); len(c) != 0 {
		t.Errorf("nodes left behind: %v", c)
	}
}

func TestMutexFIFO(t *testing.T) {
	const waiters = 6
	p := testPath(t)
	ctx := testCtx(t, 60*time.Second)
	s := newTestSession(t, nil)
	holder, err := NewMutex(s, p).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range waiters {
		ws := newTestSession(t, nil)
		wg.Go(func() {
			l, err := NewMutex(ws, p).Lock(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			if err := l.Unlock(ctx); err != nil {
				t.Error(err)
			}
		})
		// Enqueue strictly one after another: wait until waiter i's node exists.
		testkit.Eventually(t, 10*time.Second, "waiter node", func() bool { return len(children(t, s, p)) == i+2 })
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if want := []int{0, 1, 2, 3, 4, 5}; !slices.Equal(order, want) {
		t.Fatalf("grant order = %v; want %v", order, want)
	}
}

// TestMutexNoHerd counts the watch notifications each waiter's connection receives: a release
// must wake exactly the next waiter, never the others.
func TestMutexNoHerd(t *testing.T) {
	const waiters = 5
	p := testPath(t)
	ctx := testCtx(t, 60*time.Second)
	s := newTestSession(t, nil)
	holder, err := NewMutex(s, p).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type waiter struct {
		f     *faults
		lease chan *Lease
	}
	ws := make([]waiter, waiters)
	for i := range ws {
		ws[i] = waiter{f: &faults{}, lease: make(chan *Lease, 1)}
		sess := newTestSession(t, ws[i].f)
		go func() {
			l, err := NewMutex(sess, p).Lock(ctx)
			if err != nil {
				t.Error(err)
				close(ws[i].lease)
				return
			}
			ws[i].lease <- l
		}()
		testkit.Eventually(t, 10*time.Second, "waiter node", func() bool { return len(children(t, s, p)) == i+2 })
	}
	release := holder
	for i := range ws {
		before := make([]int64, waiters)
		for j := range ws {
			before[j] = ws[j].f.notifications.Load()
		}
		if err := release.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		var l *Lease
		select {
		case l = <-ws[i].lease:
		case <-ctx.Done():
			t.Fatal("next waiter never acquired")
		}
		if l == nil {
			t.FailNow()
		}
		for j := i + 1; j < waiters; j++ {
			if d := ws[j].f.notifications.Load() - before[j]; d != 0 {
				t.Errorf("release %d woke waiter %d (%d notifications); only waiter %d should wake", i, j, d, i)
			}
		}
		if d := ws[i].f.notifications.Load() - before[i]; d != 1 {
			t.Errorf("release %d: next waiter got %d notifications; want 1", i, d)
		}
		release = l
	}
	if err := release.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestMutexTryLock(t *testing.T) {
	p := testPath(t)
	ctx := testCtx(t, 30*time.Second)
	s1, s2 := newTestSession(t, nil), newTestSession(t, nil)
	l, err := NewMutex(s1, p).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewMutex(s2, p).TryLock(ctx); !errors.Is(err, ErrLocked) {
		t.Fatalf("TryLock on a held lock = %v; want ErrLocked", err)
	}
	if c := children(t, s1, p); len(c) != 1 {
		t.Fatalf("children after a failed TryLock = %v; want only the holder", c)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l2, err := NewMutex(s2, p).TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock on a free lock: %v", err)
	}
	_ = l2.Unlock(ctx)
}

func TestMutexCancelLeavesNothing(t *testing.T) {
	p := testPath(t)
	ctx := testCtx(t, 30*time.Second)
	s1, s2 := newTestSession(t, nil), newTestSession(t, nil)
	holder, err := NewMutex(s1, p).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Cancel while queued.
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := NewMutex(s2, p).Lock(wctx)
		done <- err
	}()
	testkit.Eventually(t, 10*time.Second, "waiter node", func() bool { return len(children(t, s1, p)) == 2 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock after cancel = %v; want context.Canceled", err)
	}
	if c := children(t, s1, p); len(c) != 1 {
		t.Fatalf("children after cancel = %v; want only the holder", c)
	}
	// A deadline that passes while queued.
	dctx, dcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer dcancel()
	if _, err := NewMutex(s2, p).Lock(dctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock past deadline = %v; want DeadlineExceeded", err)
	}
	if c := children(t, s1, p); len(c) != 1 {
		t.Fatalf("children after deadline = %v; want only the holder", c)
	}
	// Already cancelled: nothing is created at all.
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	if _, err := NewMutex(s2, p).Lock(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock with a cancelled ctx = %v", err)
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if c := children(t, s1, p); len(c) != 0 {
		t.Fatalf("children at the end = %v", c)
	}
}

// TestMutexGhostNode loses the reply to the create (the connection drops after the server
// committed it): Lock must find and adopt its own node, leaving no orphan.
func TestMutexGhostNode(t *testing.T) {
	p := testPath(t)
	ctx := testCtx(t, 30*time.Second)
	f := &faults{}
	s := newTestSession(t, f)
	other := newTestSession(t, nil)
	if err := ensurePath(ctx, s, p); err != nil {
		t.Fatal(err)
	}
	dropped := f.dropNextReply(opCreate)
	l, err := NewMutex(s, p).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-dropped:
	default:
		t.Fatal("the create reply was never dropped")
	}
	c := children(t, other, p)
	if len(c) != 1 || p+"/"+c[0] != l.Token().Path {
		t.Fatalf("children = %v; want exactly the adopted node %s", c, l.Token().Path)
	}
	if err := l.Check(ctx); err != nil {
		t.Fatal(err)
	}
	// The lock still excludes others.
	if _, err := NewMutex(other, p).TryLock(ctx); !errors.Is(err, ErrLocked) {
		t.Fatalf("TryLock = %v; want ErrLocked", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if c := children(t, other, p); len(c) != 0 {
		t.Fatalf("children after unlock = %v", c)
	}
}

func TestMutexSessionExpiryWhileHolding(t *testing.T) {
	p := testPath(t)
	ctx := testCtx(t, 60*time.Second)
	f := &faults{}
	s := newTestSession(t, f)
	other := newTestSession(t, nil)
	l, err := NewMutex(s, p).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lctx := l.Context()
	sid, pw := f.credentials()
	if sid != l.Token().SessionID {
		t.Fatalf("captured session 0x%x, lease session 0x%x", sid, l.Token().SessionID)
	}
	got := make(chan *Lease, 1)
	go func() {
		l2, err := NewMutex(other, p).Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l2
	}()
	expireSession(t, sid, pw)
	select {
	case <-l.Done():
	case <-ctx.Done():
		t.Fatal("lease never reported the expiry")
	}
	if err := l.Err(); !endedWithSession(t, err) {
		t.Fatalf("Err = %v; want ErrSessionExpired", err)
	}
	if lctx.Err() == nil || !endedWithSession(t, context.Cause(lctx)) {
		t.Fatalf("lease context: err %v cause %v", lctx.Err(), context.Cause(lctx))
	}
	l2 := <-got
	if l2 == nil {
		t.FailNow()
	}
	if l2.Token().Czxid <= l.Token().Czxid {
		t.Fatalf("token %d after %d; want strictly greater", l2.Token().Czxid, l.Token().Czxid)
	}
	if err := l.Unlock(ctx); !errors.Is(err, ErrLockLost) {
		t.Fatalf("Unlock of a lost lease = %v; want ErrLockLost", err)
	}
	if err := l.Unlock(ctx); !errors.Is(err, ErrLockLost) {
		t.Fatalf("second Unlock of a lost lease = %v; want ErrLockLost again", err)
	}
	if err := l2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestMutexSessionExpiryWhileWaiting(t *testing.T) {
	p := testPath(t)
	ctx := testCtx(t, 60*time.Second)
	s := newTestSession(t, nil)
	f := &faults{}
	ws := newTestSession(t, f)
	holder, err := NewMutex(s, p).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *Lease, 1)
	go func() {
		l, err := NewMutex(ws, p).Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	testkit.Eventually(t, 10*time.Second, "waiter node", func() bool { return len(children(t, s, p)) == 2 })
	sid, pw := f.credentials()
	expireSession(t, sid, pw)
	// The waiter re-queues under its new session: a second node appears again.
	testkit.Eventually(t, 20*time.Second, "re-queued waiter", func() bool {
		return ws.ID() != sid && len(children(t, s, p)) == 2
	})
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-got
	if l == nil {
		t.FailNow()
	}
	if l.Token().SessionID == sid {
		t.Fatalf("lease owned by the expired session 0x%x", sid)
	}
	if err := l.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestMutexNodeDeletedEndsLease(t *testing.T) {
	p := testPath(t)
	ctx := testCtx(t, 30*time.Second)
	s, admin := newTestSession(t, nil), newTestSession(t, nil)
	l, err := NewMutex(s, p).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Multi(ctx, &zk.CreateRequest{Path: p + "-data", Data: []byte("v1"), Acl: zk.WorldACL(zk.PermAll)}); err != nil {
		t.Fatalf("guarded write while held: %v", err)
	}
	if err := admin.Conn().Delete(l.Token().Path, -1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	case <-ctx.Done():
		t.Fatal("lease never noticed its node was deleted")
	}
	if !errors.Is(l.Err(), ErrLockLost) {
		t.Fatalf("Err = %v; want ErrLockLost", l.Err())
	}
	_, err = l.Multi(ctx, &zk.SetDataRequest{Path: p + "-data", Data: []byte("v2"), Version: -1})
	if !errors.Is(err, ErrLockLost) {
		t.Fatalf("guarded write after loss = %v; want ErrLockLost", err)
	}
	data, _, err := admin.Conn().Get(p + "-data")
	if err != nil || string(data) != "v1" {
		t.Fatalf("data = %q, %v; the guarded write must not apply", data, err)
	}
	if err := l.Check(ctx); !errors.Is(err, ErrLockLost) {
		t.Fatalf("Check = %v; want ErrLockLost", err)
	}
	if err := l.Unlock(ctx); !errors.Is(err, ErrLockLost) {
		t.Fatalf("Unlock = %v; want ErrLockLost", err)
	}
}

func TestMutexUnlockIdempotent(t *testing.T) {
	p := testPath(t)
	ctx := testCtx(t, 30*time.Second)
	s := newTestSession(t, nil)
	l, err := NewMutex(s, p).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("Unlock #%d: %v", i, err)
		}
	}
	select {
	case <-l.Done():
	default:
		t.Fatal("Done not closed after Unlock")
	}
	if l.Err() != nil {
		t.Fatalf("Err after a clean release = %v", l.Err())
	}
	if _, err := l.Reenter(); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Reenter after Unlock = %v; want ErrNotHeld", err)
	}
}

func TestMutexReentry(t *testing.T) {
	p := testPath(t)
	ctx := testCtx(t, 30*time.Second)
	s, other := newTestSession(t, nil), newTestSession(t, nil)
	m := NewMutex(s, p)
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := l.Reenter()
	if err != nil {
		t.Fatal(err)
	}
	viaCtx, err := m.Lock(l.Context())
	if err != nil {
		t.Fatal(err)
	}
	if viaCtx.Token() != l.Token() || len(children(t, s, p)) != 1 {
		t.Fatal("context re-entry created a second node")
	}
	for _, h := range []*Lease{inner, viaCtx} {
		if err := h.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := NewMutex(other, p).TryLock(ctx); !errors.Is(err, ErrLocked) {
			t.Fatalf("lock free while a handle is still held: %v", err)
		}
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l2, err := NewMutex(other, p).TryLock(ctx)
	if err != nil {
		t.Fatalf("lock not free after the last handle: %v", err)
	}
	_ = l2.Unlock(ctx)
}

// TestMutexPredecessorGoneBeforeGetData deletes the predecessor between the waiter's
// getChildren and its getData: the waiter must see NoNode and re-list, not hang.
func TestMutexPredecessorGoneBeforeGetData(t *testing.T) {
	p := testPath(t)
	ctx := testCtx(t, 30*time.Second)
	s := newTestSession(t, nil)
	f := &faults{}
	ws := newTestSession(t, f)
	holder, err := NewMutex(s, p).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	holding, release := f.holdNext(opGetData, path.Base(holder.Token().Path))
	defer release()
	got := make(chan error, 1)
	go func() {
		l, err := NewMutex(ws, p).Lock(ctx)
		if err == nil {
			err = l.Unlock(ctx)
		}
		got <- err
	}()
	select {
	case <-holding:
	case <-ctx.Done():
		t.Fatal("waiter never asked for its predecessor")
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	release()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

// TestMutexIgnoresForeignChildren puts non-lock children under the lock path.
func TestMutexIgnoresForeignChildren(t *testing.T) {
	p := testPath(t)
	ctx := testCtx(t, 30*time.Second)
	s := newTestSession(t, nil)
	if err := ensurePath(ctx, s, p); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"config", "x-lock-abc", "_c_zz-lock-notanumber", "0000000000"} {
		if _, err := s.Conn().Create(p+"/"+name, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	l, err := NewMutex(s, p).TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock with foreign children: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestMutexSuspension(t *testing.T) {
	p := testPath(t)
	ctx := testCtx(t, 30*time.Second)
	f := &faults{}
	s := newTestSession(t, f)
	l, err := NewMutex(s, p).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	strict, err := NewMutex(s, p+"-strict", WithLoseOnSuspend()).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	suspended := l.Suspended()
	f.breakConnections()
	select {
	case <-suspended:
	case <-ctx.Done():
		t.Fatal("no suspension reported")
	}
	select {
	case <-strict.Done():
	case <-ctx.Done():
		t.Fatal("the LoseOnSuspend lease did not end")
	}
	if !errors.Is(strict.Err(), ErrSuspended) {
		t.Fatalf("strict Err = %v; want ErrSuspended", strict.Err())
	}
	if _, err := s.waitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Check(ctx); err != nil {
		t.Fatalf("lease after a reconnect within the session: %v", err)
	}
	select {
	case <-l.Done():
		t.Fatalf("lease ended on a mere suspension: %v", l.Err())
	default:
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// The strict lease's node is still there (the session lives); Unlock removes it and reports
	// the earlier loss.
	if err := strict.Unlock(ctx); !errors.Is(err, ErrLockLost) {
		t.Fatalf("strict Unlock = %v; want ErrLockLost", err)
	}
}

// TestMutexGhostNodeAcrossExpiry loses the create reply and then the session itself before the
// client can look: the ghost belongs to a dead session, so Lock must not adopt it, and must
// acquire with a new node in the new session.
func TestMutexGhostNodeAcrossExpiry(t *testing.T) {
	p := testPath(t)
	ctx := testCtx(t, 60*time.Second)
	f := &faults{}
	s := newTestSession(t, f)
	other := newTestSession(t, nil)
	if err := ensurePath(ctx, s, p); err != nil {
		t.Fatal(err)
	}
	sid, pw := f.credentials()
	dropped := f.dropNextReply(opCreate)
	f.mu.Lock()
	f.partitioned = true // the reconnect after the dropped reply fails until healed
	f.mu.Unlock()
	got := make(chan *Lease, 1)
	go func() {
		l, err := NewMutex(s, p).Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	select {
	case <-dropped:
	case <-ctx.Done():
		t.Fatal("create reply never dropped")
	}
	expireSession(t, sid, pw)
	f.heal()
	l := <-got
	if l == nil {
		t.FailNow()
	}
	if l.Token().SessionID == sid {
		t.Fatalf("adopted a node of the expired session 0x%x", sid)
	}
	if c := children(t, other, p); len(c) != 1 || p+"/"+c[0] != l.Token().Path {
		t.Fatalf("children = %v; want only %s", c, l.Token().Path)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestMutexSimulatedExpiry keeps the client cut off for longer than the session timeout: the
// lease must end with ErrSessionExpired even though go-zookeeper reports nothing while
// disconnected.
func TestMutexSimulatedExpiry(t *testing.T) {
	p := testPath(t)
	ctx := testCtx(t, 60*time.Second)
	f := &faults{}
	s := newTestSession(t, f)
	l, err := NewMutex(s, p).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	f.partition()
	select {
	case <-l.Done():
	case <-ctx.Done():
		t.Fatal("lease never ended while cut off")
	}
	if !errors.Is(l.Err(), ErrSessionExpired) {
		t.Fatalf("Err = %v; want ErrSessionExpired", l.Err())
	}
	if d := time.Since(start); d < testTimeout {
		t.Fatalf("lease ended after %v, before the session timeout %v", d, testTimeout)
	}
	f.heal()
	if _, err := s.waitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); !errors.Is(err, ErrLockLost) {
		t.Fatalf("Unlock = %v; want ErrLockLost", err)
	}
	// A fresh lock works on the new session.
	l2, err := NewMutex(s, p).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = l2.Unlock(ctx)
}

// TestMutexContainerParents creates the lock path with createContainer requests (a client
// cannot tell a container from its Stat, so the requests on the wire are counted) and keeps
// working when the server removes the path.
func TestMutexContainerParents(t *testing.T) {
	p := testPath(t) + "/inner"
	ctx := testCtx(t, 30*time.Second)
	f := &faults{}
	s := newTestSession(t, f)
	m := NewMutex(s, p, WithContainerParents(), WithProtocol(Curator))
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := f.sentOps(opCreateContainer); n < 2 {
		t.Fatalf("%d createContainer requests; want one per missing level (2)", n)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// Stand in for the server's container reaper.
	if err := s.Conn().Delete(p, -1); err != nil {
		t.Fatal(err)
	}
	l, err = m.Lock(ctx)
	if err != nil {
		t.Fatalf("Lock after the path was reaped: %v", err)
	}
	_ = l.Unlock(ctx)
}
