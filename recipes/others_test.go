package recipes

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkd-io/zkd/internal/testkit"
)

func TestSemaphoreBoundsHolders(t *testing.T) {
	const max, sessions, workers, rounds = 3, 3, 3, 3
	p := testPath(t)
	ctx := testCtx(t, 90*time.Second)
	var inside, peak, bad atomic.Int32
	// Holders sign in on the server too: each creates a node under roster while inside and
	// counts the roster, so more holders than allowed show there as well.
	roster := p + "-inside"
	if err := ensurePath(ctx, newTestSession(t, nil), roster); err != nil {
		t.Fatal(err)
	}
	// A holder stays inside until a contender has been turned away while it was there (the
	// semaphore full and refusing: a semaphore that admits one too many admits that contender
	// instead, while the holders are still inside), or until no other worker can come.
	cr := newCrowd(ctx, sessions*workers)
	var wg sync.WaitGroup
	for range sessions {
		s := newTestSession(t, nil)
		sm := NewSemaphore(s, p, max)
		sm.waiting = cr.turnAway
		for range workers {
			wg.Go(func() {
				for i := range rounds {
					l, err := sm.Acquire(ctx)
					if err != nil {
						t.Error(err)
						cr.arrive() // it will not come again
						return
					}
					seen := cr.arrive()
					n := inside.Add(1)
					if n > max {
						bad.Add(1)
					}
					for {
						old := peak.Load()
						if n <= old || peak.CompareAndSwap(old, n) {
							break
						}
					}
					// The section's work: sign in on the server, hold until the semaphore has
					// turned someone away (or no one else can come), count who is inside, sign
					// out.
					err = func() error {
						node, err := s.Conn().Create(roster+"/h-", nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
						if err != nil {
							return err
						}
						cr.hold(seen)
						kids, _, err := s.Conn().Children(roster)
						if err != nil {
							return err
						}
						if len(kids) > max {
							bad.Add(1)
						}
						return s.Conn().Delete(node, -1)
					}()
					inside.Add(-1)
					if err != nil {
						t.Error(err)
						_ = l.Unlock(ctx)
						return
					}
					if err := l.Unlock(ctx); err != nil {
						t.Error(err)
						return
					}
					if i < rounds-1 {
						cr.leave()
					}
				}
			})
		}
	}
	wg.Wait()
	if bad.Load() != 0 {
		t.Fatalf("more than %d holders at once (%d times)", max, bad.Load())
	}
	t.Logf("peak concurrent holders: %d of %d; contenders turned away %d times", peak.Load(), max, cr.turnedAway)
	s := newTestSession(t, nil)
	if c := children(t, s, p+"/leases"); len(c) != 0 {
		t.Fatalf("orphaned leases: %v", c)
	}
}

// crowd is what the holders of TestSemaphoreBoundsHolders wait on: how many times a contender
// was turned away, and how many workers may still come (they are not inside and have rounds
// left).
type crowd struct {
	ctx        context.Context
	mu         sync.Mutex
	cond       *sync.Cond
	turnedAway int
	coming     int
}

func newCrowd(ctx context.Context, workers int) *crowd {
	cr := &crowd{ctx: ctx, coming: workers}
	cr.cond = sync.NewCond(&cr.mu)
	context.AfterFunc(ctx, func() { cr.update(func() {}) }) // no holder waits past the test's end
	return cr
}

func (cr *crowd) update(f func()) {
	cr.mu.Lock()
	f()
	cr.mu.Unlock()
	cr.cond.Broadcast()
}

// turnAway is the semaphore's waiting hook: a contender found every lease taken.
func (cr *crowd) turnAway() { cr.update(func() { cr.turnedAway++ }) }

// arrive marks a worker that is no longer coming (it is inside) and returns the turn-aways so
// far.
func (cr *crowd) arrive() (seen int) {
	cr.update(func() { cr.coming--; seen = cr.turnedAway })
	return seen
}

// leave marks a worker that left and will come again.
func (cr *crowd) leave() { cr.update(func() { cr.coming++ }) }

// hold waits until a contender was turned away since seen, or no worker is coming.
func (cr *crowd) hold(seen int) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	for cr.turnedAway == seen && cr.coming > 0 && cr.ctx.Err() == nil {
		cr.cond.Wait()
	}
}

func TestSemaphoreTryAndCancelLeaveNoLease(t *testing.T) {
	p := testPath(t)
	ctx := testCtx(t, 30*time.Second)
	s1, s2 := newTestSession(t, nil), newTestSession(t, nil)
	ls, err := NewSemaphore(s1, p, 2).AcquireN(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewSemaphore(s2, p, 2).TryAcquire(ctx); !errors.Is(err, ErrLocked) {
		t.Fatalf("TryAcquire on a full semaphore = %v; want ErrLocked", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := NewSemaphore(s2, p, 2).Acquire(cctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire past deadline = %v", err)
	}
	if c := children(t, s1, p+"/leases"); len(c) != 2 {
		t.Fatalf("leases = %v; want only the two held", c)
	}
	if c := children(t, s1, p+"/locks"); len(c) != 0 {
		t.Fatalf("internal mutex nodes left: %v", c)
	}
	got := make(chan *Lease, 1)
	go func() {
		l, err := NewSemaphore(s2, p, 2).Acquire(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	testkit.Eventually(t, 10*time.Second, "waiting lease", func() bool { return len(children(t, s1, p+"/leases")) == 3 })
	if err := ls[0].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-got
	if l == nil {
		t.FailNow()
	}
	for _, x := range []*Lease{ls[1], l} {
		if err := x.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := NewSemaphore(s1, p, 0).Acquire(ctx); !errors.Is(err, ErrBadArgument) {
		t.Fatalf("max 0 = %v; want ErrBadArgument", err)
	}
}

func TestElection(t *testing.T) {
	p := testPath(t)
	ctx := testCtx(t, 30*time.Second)
	s1, s2, obs := newTestSession(t, nil), newTestSession(t, nil), newTestSession(t, nil)
	e1 := NewElection(s1, p, WithData([]byte("one")))
	e2 := NewElection(s2, p, WithData([]byte("two")))
	octx, ocancel := context.WithCancel(ctx)
	defer ocancel()
	observed := NewElection(obs, p).Observe(octx)
	if first := <-observed; first.Path != "" {
		t.Fatalf("first observation = %+v; want no leader", first)
	}
	lead1, err := e1.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := <-observed; !ok || string(got.Data) != "one" || got.Czxid != lead1.Token().Czxid {
		t.Fatalf("observed %+v; want candidate one", got)
	}
	got2 := make(chan *Lease, 1)
	go func() {
		l, err := e2.Campaign(ctx)
		if err != nil {
			t.Error(err)
		}
		got2 <- l
	}()
	testkit.Eventually(t, 10*time.Second, "second candidate", func() bool { return len(children(t, obs, p)) == 2 })
	leader, err := NewElection(obs, p).Leader(ctx)
	if err != nil || string(leader.Data) != "one" {
		t.Fatalf("Leader = %+v, %v; want one", leader, err)
	}
	if err := lead1.Unlock(ctx); err != nil { // resign
		t.Fatal(err)
	}
	lead2 := <-got2
	if lead2 == nil {
		t.FailNow()
	}
	if lead2.Token().Czxid <= lead1.Token().Czxid {
		t.Fatal("leadership token did not increase")
	}
	if got := <-observed; string(got.Data) != "two" {
		t.Fatalf("observed %+v; want candidate two", got)
	}
	if err := lead2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if got := <-observed; got.Path != "" {
		t.Fatalf("observed %+v; want no leader", got)
	}
	if _, err := NewElection(obs, p).Leader(ctx); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("Leader = %v; want ErrNoLeader", err)
	}
	ocancel()
	for range observed {
	}
}

func TestElectionLeadershipLostOnExpiry(t *testing.T) {
	p := testPath(t)
	ctx := testCtx(t, 30*time.Second)
	f := &faults{}
	s := newTestSession(t, f)
	lead, err := NewElection(s, p).Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sid, pw := f.credentials()
	expireSession(t, sid, pw)
	select {
	case <-lead.Context().Done():
	case <-ctx.Done():
		t.Fatal("leadership loss not signalled")
	}
	if !endedWithSession(t, context.Cause(lead.Context())) {
		t.Fatalf("cause = %v", context.Cause(lead.Context()))
	}
}

func TestBarrier(t *testing.T) {
	p := testPath(t)
	ctx := testCtx(t, 30*time.Second)
	s1, s2 := newTestSession(t, nil), newTestSession(t, nil)
	coord := NewBarrier(s1, p)
	if err := NewBarrier(s2, p).Wait(ctx); err != nil {
		t.Fatalf("Wait on a lowered barrier: %v", err)
	}
	if err := coord.Hold(ctx); err != nil {
		t.Fatal(err)
	}
	// On a cluster s2's server may not have applied s1's create yet; ZooKeeper orders one
	// session's view only, so s2 syncs first, as a waiter told of the barrier out of band would.
	if _, err := s2.Conn().Sync(p); err != nil {
		t.Fatal(err)
	}
	var released atomic.Bool
	done := make(chan error, 3)
	for range 3 {
		go func() {
			err := NewBarrier(s2, p).Wait(ctx)
			if err == nil && !released.Load() {
				err = errors.New("passed a raised barrier")
			}
			done <- err
		}()
	}
	sctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := NewBarrier(s2, p).Wait(sctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait on a raised barrier = %v; want DeadlineExceeded", err)
	}
	released.Store(true)
	if err := coord.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func TestDoubleBarrier(t *testing.T) {
	const n = 4
	p := testPath(t)
	ctx := testCtx(t, 60*time.Second)
	for round := range 2 { // the path is reusable
		var arrived, entered, leaving, left atomic.Int32
		errs := make(chan error, 2*n)
		var wg sync.WaitGroup
		for range n {
			s := newTestSession(t, nil)
			wg.Go(func() {
				b := NewDoubleBarrier(s, p, n)
				arrived.Add(1)
				if err := b.Enter(ctx); err != nil {
					errs <- err
					return
				}
				if a := arrived.Load(); a != n {
					errs <- fmt.Errorf("Enter returned with %d of %d arrived", a, n)
				}
				if entered.Add(1); entered.Load() > n {
					errs <- errors.New("too many entered")
				}
				if left.Load() != 0 {
					errs <- errors.New("entered after someone left")
				}
				leaving.Add(1)
				if err := b.Leave(ctx); err != nil {
					errs <- err
					return
				}
				if l := leaving.Load(); l != n {
					errs <- fmt.Errorf("Leave returned with %d of %d leaving", l, n)
				}
				left.Add(1)
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", round, err)
		}
		s := newTestSession(t, nil)
		if c := children(t, s, p); len(c) != 0 {
			t.Fatalf("round %d left %v", round, c)
		}
	}
}

// TestSemaphoreLeaseEndsWithSession: a holder's session expires, its lease reports it, and the
// freed lease goes to a waiter.
func TestSemaphoreLeaseEndsWithSession(t *testing.T) {
	p := testPath(t)
	ctx := testCtx(t, 30*time.Second)
	f := &faults{}
	s1, s2 := newTestSession(t, f), newTestSession(t, nil)
	held, err := NewSemaphore(s1, p, 1).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *Lease, 1)
	go func() {
		l, err := NewSemaphore(s2, p, 1).Acquire(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	testkit.Eventually(t, 10*time.Second, "waiting lease", func() bool { return len(children(t, s2, p+"/leases")) == 2 })
	sid, pw := f.credentials()
	expireSession(t, sid, pw)
	select {
	case <-held.Done():
	case <-ctx.Done():
		t.Fatal("lease did not end with its session")
	}
	if !endedWithSession(t, held.Err()) {
		t.Fatalf("Err = %v; want ErrSessionExpired", held.Err())
	}
	l := <-got
	if l == nil {
		t.FailNow()
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if c := children(t, s2, p+"/leases"); len(c) != 0 {
		t.Fatalf("orphaned leases: %v", c)
	}
}

func TestRevoke(t *testing.T) {
	p := testPath(t)
	ctx := testCtx(t, 30*time.Second)
	s1, s2 := newTestSession(t, nil), newTestSession(t, nil)
	l, err := NewMutex(s1, p).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.RevokeRequested():
		t.Fatal("revocation reported before any request")
	default:
	}
	if err := Revoke(ctx, s2, l.Token().Path); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.RevokeRequested():
	case <-ctx.Done():
		t.Fatal("revocation request not seen")
	}
	if l.Err() != nil || isClosed(l.Done()) {
		t.Fatal("a revocation request must not end the lease by itself")
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := Revoke(ctx, s2, l.Token().Path); !errors.Is(err, zk.ErrNoNode) {
		t.Fatalf("Revoke of a released lock = %v; want ErrNoNode", err)
	}
}
