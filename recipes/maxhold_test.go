package recipes

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkd-io/zkd/internal/testkit"
)

// waitLeaseDone fails the test unless l ends within a generous bound.
func waitLeaseDone(t *testing.T, l *Lease, what string) {
	t.Helper()
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: lease did not end", what)
	}
}

type lockResult struct {
	l   *Lease
	err error
}

// lockAsync starts a contender and returns where its result arrives.
func lockAsync(ctx context.Context, lock func(context.Context) (*Lease, error)) <-chan lockResult {
	ch := make(chan lockResult, 1)
	go func() {
		l, err := lock(ctx)
		ch <- lockResult{l, err}
	}()
	return ch
}

// waitLock fails the test unless the contender is granted the lock within a generous bound.
func waitLock(t *testing.T, ch <-chan lockResult, what string) *Lease {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("%s: %v", what, r.err)
		}
		return r.l
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not granted", what)
		return nil
	}
}

// checkMaxHoldErr fails unless err reports the hold limit and wraps ErrLockLost.
func checkMaxHoldErr(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ErrMaxHold) || !errors.Is(err, ErrLockLost) {
		t.Fatalf("%s = %v; want ErrMaxHold and ErrLockLost", what, err)
	}
}

// TestMutexMaxHoldExpires: a lease held for its limit ends by itself, its node is deleted so a
// waiting contender gets the lock, and Unlock reports the expiry.
func TestMutexMaxHoldExpires(t *testing.T) {
	p := testPath(t)
	ctx := testCtx(t, 30*time.Second)
	s, other := newTestSession(t, nil), newTestSession(t, nil)
	const limit = 300 * time.Millisecond
	granted := time.Now()
	l, err := NewMutex(s, p, WithMaxHold(limit)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	next := lockAsync(ctx, NewMutex(other, p).Lock)
	waitLeaseDone(t, l, "held past WithMaxHold")
	if held := time.Since(granted); held < limit {
		t.Fatalf("lease ended after %v, before its limit %v", held, limit)
	}
	checkMaxHoldErr(t, "Err", l.Err())
	if cause := context.Cause(l.Context()); !errors.Is(cause, ErrMaxHold) {
		t.Fatalf("Context cause = %v; want ErrMaxHold", cause)
	}
	l2 := waitLock(t, next, "second contender")
	if kids := children(t, s, p); len(kids) != 1 {
		t.Fatalf("children = %v; want only the second contender's node", kids)
	}
	uerr := l.Unlock(ctx)
	checkMaxHoldErr(t, "Unlock", uerr)
	if uerr != l.Err() {
		t.Fatalf("Unlock = %v; want Err's %v", uerr, l.Err())
	}
	if again := l.Unlock(ctx); again != uerr {
		t.Fatalf("second Unlock = %v; want %v", again, uerr)
	}
	if _, err := l.Reenter(); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Reenter after expiry = %v; want ErrNotHeld", err)
	}
	if err := l2.Check(ctx); err != nil {
		t.Fatalf("second contender's lease: %v", err)
	}
	if err := l2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestMutexMaxHoldUnlockedEarly: a lease released before its limit is released cleanly, nothing
// fires later (neither on it nor on the next holder's lease) and no goroutine is left running.
func TestMutexMaxHoldUnlockedEarly(t *testing.T) {
	p := testPath(t)
	ctx := testCtx(t, 30*time.Second)
	s, other := newTestSession(t, nil), newTestSession(t, nil)
	const limit = 2 * time.Second
	m := NewMutex(s, p, WithMaxHold(limit))
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(limit)
	next := lockAsync(ctx, NewMutex(other, p).Lock)
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock before the limit: %v", err)
	}
	l2 := waitLock(t, next, "second contender")
	// Let the first lease's limit pass: it must not fire on the released lease, nor delete the
	// node of the next holder.
	time.Sleep(time.Until(deadline) + 500*time.Millisecond)
	if l.Err() != nil {
		t.Fatalf("Err of a lease released before its limit = %v", l.Err())
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock again = %v", err)
	}
	select {
	case <-l2.Done():
		t.Fatalf("next holder's lease ended: %v", l2.Err())
	default:
	}
	if err := l2.Check(ctx); err != nil {
		t.Fatalf("next holder's lease: %v", err)
	}
	if err := l2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyNil(t, 10*time.Second, "lease goroutines to end", leaseGoroutines)
}

// leaseGoroutines reports the goroutines still running lease code (monitors). It looks at lease
// code only: the sessions and the in-process server have goroutines of their own.
func leaseGoroutines() error {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var found []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "recipes.(*leaseState)") {
			found = append(found, g)
		}
	}
	if len(found) > 0 {
		return fmt.Errorf("%d lease goroutines running:\n%s", len(found), strings.Join(found, "\n\n"))
	}
	return nil
}

// TestMutexMaxHoldReenter: re-entered handles share the one limit of the grant. Unlocking one
// handle neither ends nor resets it, and the expiry ends every handle.
func TestMutexMaxHoldReenter(t *testing.T) {
	p := testPath(t)
	ctx := testCtx(t, 30*time.Second)
	s, other := newTestSession(t, nil), newTestSession(t, nil)
	const limit = 500 * time.Millisecond
	m := NewMutex(s, p, WithMaxHold(limit))
	granted := time.Now()
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
	if err := viaCtx.Unlock(ctx); err != nil {
		t.Fatalf("Unlock of one handle before the limit: %v", err)
	}
	next := lockAsync(ctx, NewMutex(other, p).Lock)
	waitLeaseDone(t, inner, "re-entered handle")
	if held := time.Since(granted); held < limit {
		t.Fatalf("lease ended after %v, before its limit %v", held, limit)
	}
	select {
	case <-l.Done():
	default:
		t.Fatal("the handles ended separately")
	}
	checkMaxHoldErr(t, "inner Err", inner.Err())
	checkMaxHoldErr(t, "outer Err", l.Err())
	for name, h := range map[string]*Lease{"inner": inner, "outer": l} {
		checkMaxHoldErr(t, name+" Unlock", h.Unlock(ctx))
	}
	if err := viaCtx.Unlock(ctx); err != nil {
		t.Fatalf("Unlock of the handle released before the limit changed to %v", err)
	}
	l2 := waitLock(t, next, "second contender")
	if err := l2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestMutexMaxHoldConcurrentUnlock: Unlock racing the expiry returns either nil (the release
// won) or the expiry error, never hangs, and leaves no node.
func TestMutexMaxHoldConcurrentUnlock(t *testing.T) {
	p := testPath(t)
	ctx := testCtx(t, 30*time.Second)
	s := newTestSession(t, nil)
	m := NewMutex(s, p, WithMaxHold(time.Millisecond))
	for range 5 {
		l, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		h, err := l.Reenter()
		if err != nil && !errors.Is(err, ErrNotHeld) {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for _, x := range []*Lease{l, h} {
			if x == nil {
				continue
			}
			wg.Go(func() {
				if err := x.Unlock(ctx); err != nil && !errors.Is(err, ErrMaxHold) {
					t.Errorf("Unlock = %v; want nil or ErrMaxHold", err)
				}
			})
		}
		wg.Wait()
		waitLeaseDone(t, l, "unlocked or expired")
	}
	if kids := children(t, s, p); len(kids) != 0 {
		t.Fatalf("children = %v; want none", kids)
	}
}

// TestRWMutexMaxHoldReadLease: the limit applies to read leases too, and the writer queued behind
// is granted the lock when the reader's limit passes.
func TestRWMutexMaxHoldReadLease(t *testing.T) {
	p := testPath(t)
	ctx := testCtx(t, 30*time.Second)
	s, other := newTestSession(t, nil), newTestSession(t, nil)
	r, err := NewRWMutex(s, p, WithMaxHold(300*time.Millisecond)).RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	next := lockAsync(ctx, NewRWMutex(other, p).Lock)
	waitLeaseDone(t, r, "read lease")
	checkMaxHoldErr(t, "Err", r.Err())
	w := waitLock(t, next, "writer")
	checkMaxHoldErr(t, "Unlock", r.Unlock(ctx))
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSemaphoreMaxHold: the limit ends a semaphore lease, and does not apply to the internal
// mutex a contender holds while it waits for a lease.
func TestSemaphoreMaxHold(t *testing.T) {
	p := testPath(t)
	ctx := testCtx(t, 30*time.Second)
	s1, s2 := newTestSession(t, nil), newTestSession(t, nil)
	const limit = 300 * time.Millisecond
	first, err := NewSemaphore(s1, p, 1).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sm := NewSemaphore(s2, p, 1, WithMaxHold(limit))
	waiting := make(chan struct{})
	var once sync.Once
	sm.waiting = func() { once.Do(func() { close(waiting) }) }
	next := lockAsync(ctx, sm.Acquire)
	select {
	case <-waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("contender never waited")
	}
	// Keep the contender waiting, holding the internal mutex, for longer than the limit.
	time.Sleep(3 * limit)
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l := waitLock(t, next, "waiting contender")
	waitLeaseDone(t, l, "semaphore lease")
	checkMaxHoldErr(t, "Err", l.Err())
	// Unlock returns once the expired lease's node is gone.
	checkMaxHoldErr(t, "Unlock", l.Unlock(ctx))
	if kids := children(t, s1, p+"/leases"); len(kids) != 0 {
		t.Fatalf("leases = %v; want none", kids)
	}
}
