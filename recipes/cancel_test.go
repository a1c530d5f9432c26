package recipes

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zkd-io/zkd/internal/testkit"
)

// TestMutexCancelDuringCreate cancels while the create request is in flight: the node is created
// after the caller gave up, and must still be removed.
func TestMutexCancelDuringCreate(t *testing.T) {
	p := testPath(t)
	ctx := testCtx(t, 30*time.Second)
	f := &faults{}
	s := newTestSession(t, f)
	other := newTestSession(t, nil)
	holder, err := NewMutex(other, p).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	holding, release := f.holdNext(opCreate, "lock-")
	defer release()
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := NewMutex(s, p).Lock(lctx)
		done <- err
	}()
	<-holding
	cancel()
	release()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock = %v; want context.Canceled", err)
	}
	testkit.Eventually(t, 10*time.Second, "cleanup", func() bool { return len(children(t, other, p)) == 1 })
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestMutexCancelDuringGhostRecovery loses the create reply, keeps the client cut off and
// cancels: the node (created on the server) must be found by its prefix and deleted in the
// background once the client reconnects.
func TestMutexCancelDuringGhostRecovery(t *testing.T) {
	p := testPath(t)
	ctx := testCtx(t, 30*time.Second)
	f := &faults{}
	s := newTestSession(t, f)
	other := newTestSession(t, nil)
	if err := ensurePath(ctx, s, p); err != nil {
		t.Fatal(err)
	}
	dropped := f.dropNextReply(opCreate)
	f.mu.Lock()
	f.partitioned = true
	f.mu.Unlock()
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := NewMutex(s, p).Lock(lctx)
		done <- err
	}()
	<-dropped
	if c := children(t, other, p); len(c) != 1 {
		t.Fatalf("children = %v; want the ghost node", c)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock = %v; want context.Canceled", err)
	}
	if s.pendingDeletes() == 0 {
		t.Fatal("no background deletion queued for the ghost")
	}
	f.heal()
	testkit.Eventually(t, 15*time.Second, "ghost removed", func() bool { return len(children(t, other, p)) == 0 })
	testkit.Eventually(t, 5*time.Second, "queue drained", func() bool { return s.pendingDeletes() == 0 })
}

// TestUnlockWhileCutOff: Unlock cannot confirm the deletion before its ctx ends, so it must say
// so (ErrReleasePending), and the node must go once the connection is back.
func TestUnlockWhileCutOff(t *testing.T) {
	p := testPath(t)
	ctx := testCtx(t, 30*time.Second)
	f := &faults{}
	s := newTestSession(t, f)
	other := newTestSession(t, nil)
	l, err := NewMutex(s, p).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f.partition()
	uctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	err = l.Unlock(uctx)
	if !errors.Is(err, ErrReleasePending) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Unlock while cut off = %v; want ErrReleasePending and DeadlineExceeded", err)
	}
	if c := children(t, other, p); len(c) != 1 {
		t.Fatalf("children = %v; the node is still there while cut off", c)
	}
	f.heal()
	testkit.Eventually(t, 15*time.Second, "background release", func() bool { return len(children(t, other, p)) == 0 })
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("second Unlock after the background release = %v; want nil", err)
	}
}

// A release whose delete was applied but whose reply was lost with the connection (the lock is
// re-entered, so only the last handle deletes) still ends cleanly: Unlock retries, finds its own
// delete done and returns nil, and the lock is free for the next contender at once.
func TestReenteredUnlockReplyLost(t *testing.T) {
	p := testPath(t)
	ctx := testCtx(t, 30*time.Second)
	f := &faults{}
	s := newTestSession(t, f)
	l, err := NewMutex(s, p).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	again, err := l.Reenter()
	if err != nil {
		t.Fatal(err)
	}
	dropped := f.dropNextReply(opDelete)
	if err := again.Unlock(ctx); err != nil {
		t.Fatalf("Unlock of the re-entered handle = %v; want nil", err)
	}
	if f.sentOps(opDelete) != 0 {
		t.Fatal("a handle that was not the last deleted the node")
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock whose delete reply was lost = %v; want nil", err)
	}
	select {
	case <-dropped:
	default:
		t.Fatal("the delete's reply was not dropped; the test did not lose the connection mid-delete")
	}
	if err := l.Err(); err != nil {
		t.Fatalf("Err after the release = %v; want nil", err)
	}
	next, err := NewMutex(newTestSession(t, nil), p).TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock after the release = %v; the lock was left unusable", err)
	}
	_ = next.Unlock(ctx)
}

// A lease survives a connection loss shorter than the session timeout: it is suspended, not lost,
// Reenter works once the connection is back, and releasing every handle frees the lock.
func TestReenterAcrossConnectionLoss(t *testing.T) {
	p := testPath(t)
	ctx := testCtx(t, 30*time.Second)
	f := &faults{}
	s := newTestSession(t, f)
	l, err := NewMutex(s, p).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f.partition()
	select {
	case <-l.Suspended():
	case <-ctx.Done():
		t.Fatal("the lease was not suspended by the connection loss")
	}
	f.heal()
	if _, err := s.waitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := l.Reenter()
	if err != nil {
		t.Fatalf("Reenter after the reconnect = %v", err)
	}
	if err := l.Check(ctx); err != nil {
		t.Fatalf("Check after the reconnect = %v; the lease should have survived", err)
	}
	if err := again.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	next, err := NewMutex(newTestSession(t, nil), p).TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock after both handles were released = %v", err)
	}
	_ = next.Unlock(ctx)
}
