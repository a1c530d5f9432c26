package recipes

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"

	"github.com/zkd-io/zkd/internal/testkit"
)

// TestSessionCloseStopsEverything: after Close, every goroutine the package started (deleter,
// lease monitors) has stopped, and a held lease reports ErrClosed.
func TestSessionCloseStopsEverything(t *testing.T) {
	addrs := testServer(t)
	ignore := goleak.IgnoreCurrent()
	ctx := testCtx(t, 30*time.Second)
	s, err := Connect(addrs, testTimeout, zk.WithLogger(quietLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	p := testPath(t)
	l, err := NewMutex(s, p).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	select {
	case <-l.Done():
	case <-ctx.Done():
		t.Fatal("lease did not end at Close")
	}
	if !errors.Is(l.Err(), ErrClosed) {
		t.Fatalf("Err = %v; want ErrClosed", l.Err())
	}
	if _, err := NewMutex(s, p).Lock(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Lock on a closed session = %v; want ErrClosed", err)
	}
	// go-zookeeper's own goroutines wind down shortly after Close.
	testkit.EventuallyNil(t, 10*time.Second, "go-zookeeper's goroutines to end", func() error {
		return goleak.Find(ignore)
	})
}

// TestNativeAndCuratorAgree: Native and Curator nodes have the same shape, so Go processes using
// either protocol exclude each other on one path (below the sequence wrap).
func TestNativeAndCuratorAgree(t *testing.T) {
	p := testPath(t)
	ctx := testCtx(t, 60*time.Second)
	var holders, overlaps atomic.Int32
	lg := newLedger(t, newTestSession(t, nil), p+"-ledger")
	var wg sync.WaitGroup
	for i := range 4 {
		s := newTestSession(t, nil)
		proto := Native
		if i%2 == 1 {
			proto = Curator
		}
		m := NewMutex(s, p, WithProtocol(proto))
		wg.Go(func() {
			for range 5 {
				l, err := m.Lock(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				if holders.Add(1) != 1 {
					overlaps.Add(1)
				}
				// The lock's work: a check-and-set on the server, across two round trips, so an
				// overlap would show (in holders and in the ledger).
				err = lg.advance(ctx, s, l.Token().Path)
				holders.Add(-1)
				if err != nil {
					t.Error(err)
					_ = l.Unlock(ctx)
					return
				}
				if err := l.Unlock(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if overlaps.Load() != 0 {
		t.Fatalf("%d overlaps between Native and Curator contenders", overlaps.Load())
	}
	lg.verify(t, newTestSession(t, nil), 4*5)
}

// TestNewSessionAdoptsConn drives a Session from a connection and event channel the caller
// created, and checks that it follows an expiry through that channel.
func TestNewSessionAdoptsConn(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	f, conn, events := faultyConn(t)
	s := NewSession(conn, events, testTimeout)
	defer s.Close()
	p := testPath(t)
	l, err := NewMutex(s, p).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sid, pw := f.credentials()
	expireSession(t, sid, pw)
	select {
	case <-l.Done():
	case <-ctx.Done():
		t.Fatal("expiry not seen through the event channel")
	}
	if !endedWithSession(t, l.Err()) {
		t.Fatalf("Err = %v; want ErrSessionExpired", l.Err())
	}
	l2, err := NewMutex(s, p).TryLock(ctx)
	if err != nil {
		t.Fatalf("lock on the new session: %v (connection %v, session 0x%x, recipe session 0x%x)", err, conn.State(), conn.SessionID(), s.ID())
	}
	if l2.Token().SessionID == sid {
		t.Fatal("new lease on the expired session")
	}
	_ = l2.Unlock(ctx)
}

// TestNewSessionOnLiveConnSuspends adopts a connection that already has its session, so the
// Session starts connected, and checks that a disconnection then closes Suspended once and a
// reconnection resumes it.
func TestNewSessionOnLiveConnSuspends(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	f, conn, events := faultyConn(t)
	for conn.State() != zk.StateHasSession {
		select {
		case <-events:
		case <-ctx.Done():
			t.Fatal("no session")
		}
	}
	s := NewSession(conn, events, testTimeout)
	defer s.Close()
	suspended := s.Suspended()
	if isClosed(suspended) {
		t.Fatal("Suspended is closed on a connected session")
	}
	f.partition()
	select {
	case <-suspended:
	case <-ctx.Done():
		t.Fatal("disconnection not seen")
	}
	f.heal()
	for isClosed(s.Suspended()) {
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal("no reconnection")
		}
	}
	if s.ID() != conn.SessionID() {
		t.Fatalf("ID = %#x; want %#x", s.ID(), conn.SessionID())
	}
}

// faultyConn connects go-zookeeper to a test server through a faults dialer. The caller owns
// the event channel; the connection is closed when the test ends.
func faultyConn(t *testing.T) (*faults, *zk.Conn, <-chan zk.Event) {
	t.Helper()
	f := &faults{}
	conn, events, err := zk.Connect(testServer(t), testTimeout, zk.WithLogger(quietLogger{}), zk.WithDialer(f.dial))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return f, conn, events
}
