package consensus

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zkd-io/zkd/jute"
)

// toucher pings sessions through a node every interval until stopped, as a server does for its
// connected clients.
func toucher(t *testing.T, n func() *Node, ids []int64, every time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tk := time.NewTicker(every)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
				if node := n(); node != nil {
					node.Touch(ids...)
				}
			}
		}
	})
	var once sync.Once
	stop = func() { once.Do(func() { close(done); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

func TestCreateSessionIDs(t *testing.T) { synctest.Test(t, testCreateSessionIDs) }

func testCreateSessionIDs(t *testing.T) {
	c := newBubbleCluster(t, 3, true, nil)
	c.leader()
	ctx := ctxT(t, 10*time.Second)
	seen := map[int64]bool{}
	for _, n := range c.running() {
		for range 5 {
			s, _, err := n.CreateSession(ctx, 4000)
			if err != nil {
				t.Fatalf("create session via %s: %v", n.ID(), err)
			}
			if s.ID <= 0 || seen[s.ID] || len(s.Passwd) != 16 || s.Timeout != 4000 || s.ID>>56 == 0 {
				t.Fatalf("session %#x passwd %d bytes timeout %d: want a new positive id with a server byte, 16 bytes, 4000", s.ID, len(s.Passwd), s.Timeout)
			}
			seen[s.ID] = true
			// Visible on the creating node as soon as the call returns.
			if got, ok := n.View().Session(s.ID); !ok || string(got.Passwd) != string(s.Passwd) {
				t.Fatalf("session %#x not in %s's view after create", s.ID, n.ID())
			}
		}
	}
}

func TestSessionExpiryDeletesEphemeralsOnce(t *testing.T) {
	synctest.Test(t, testSessionExpiryDeletesEphemeralsOnce)
}

func testSessionExpiryDeletesEphemeralsOnce(t *testing.T) {
	c := newBubbleCluster(t, 3, true, func(cfg *Config) { cfg.TickTime = 100 * time.Millisecond })
	leader := c.leader()
	f := c.followers()[0]
	ctx := ctxT(t, 20*time.Second)
	s, _, err := f.CreateSession(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	keep, _, err := f.CreateSession(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/e1", "/e2"} {
		p := createReq(path, nil, jute.ModeEphemeral)
		p.Session = s.ID
		if res, err := f.Propose(ctx, p); err != nil || res.Err != nil {
			t.Fatalf("create ephemeral %s: %v %v", path, err, res.Err)
		}
	}
	stopKeep := toucher(t, func() *Node { return f }, []int64{keep.ID}, 50*time.Millisecond)
	stop := toucher(t, func() *Node { return f }, []int64{s.ID}, 50*time.Millisecond)
	// Three timeouts of pings keep it alive.
	deadline := time.Now().Add(2500 * time.Millisecond)
	for time.Now().Before(deadline) {
		if _, ok := leader.View().Session(s.ID); !ok {
			t.Fatalf("session expired although its client kept pinging")
		}
		time.Sleep(50 * time.Millisecond) // fake clock (synctest)
	}
	if ok, _, err := f.ValidateSession(ctx, s.ID); err != nil || !ok {
		t.Fatalf("ValidateSession(live) = %v, %v", ok, err)
	}
	stop()
	eventually(t, 5*time.Second, "the silent session to expire everywhere", func() bool {
		for _, n := range c.running() {
			if _, ok := n.View().Session(s.ID); ok {
				return false
			}
		}
		return true
	})
	c.converge()
	// Let a few more expiry rounds pass: nothing may be deleted twice.
	time.Sleep(500 * time.Millisecond) // fake clock (synctest)
	c.converge()
	for _, n := range c.running() {
		for _, path := range []string{"/e1", "/e2"} {
			if _, _, ok := getData(t, n, path); ok {
				t.Fatalf("%s still exists on %s", path, n.ID())
			}
			if got := c.recs[n.ID()].count(jute.EventNodeDeleted, path); got != 1 {
				t.Fatalf("%s deleted %d times on %s; want 1", path, got, n.ID())
			}
		}
		if _, ok := n.View().Session(keep.ID); !ok {
			t.Fatalf("pinged session %#x expired on %s", keep.ID, n.ID())
		}
	}
	if ok, _, err := f.ValidateSession(ctx, s.ID); err != nil || ok {
		t.Fatalf("ValidateSession(expired) = %v, %v; want false", ok, err)
	}
	stopKeep()
}

func TestPingingSessionSurvivesLeaderChange(t *testing.T) {
	synctest.Test(t, testPingingSessionSurvivesLeaderChange)
}

func testPingingSessionSurvivesLeaderChange(t *testing.T) {
	c := newBubbleCluster(t, 3, true, func(cfg *Config) { cfg.TickTime = 100 * time.Millisecond })
	old := c.leader()
	f := c.followers()[0]
	ctx := ctxT(t, 20*time.Second)
	s, _, err := f.CreateSession(ctx, 2000)
	if err != nil {
		t.Fatal(err)
	}
	p := createReq("/owned", nil, jute.ModeEphemeral)
	p.Session = s.ID
	if res, err := f.Propose(ctx, p); err != nil || res.Err != nil {
		t.Fatalf("create ephemeral: %v %v", err, res.Err)
	}
	toucher(t, func() *Node { return f }, []int64{s.ID}, 50*time.Millisecond)
	c.stop(old.ID())
	nl := c.leader()
	// Several session timeouts after the change, with the client pinging throughout.
	deadline := time.Now().Add(4 * time.Second)
	for time.Now().Before(deadline) {
		for _, n := range c.running() {
			if _, ok := n.View().Session(s.ID); !ok {
				t.Fatalf("pinging session expired on %s after the leader change to %s", n.ID(), nl.ID())
			}
		}
		time.Sleep(50 * time.Millisecond) // fake clock (synctest)
	}
	if _, _, ok := getData(t, f, "/owned"); !ok {
		t.Fatalf("ephemeral of the live session is gone")
	}
}

func TestReapEmptyContainer(t *testing.T) { synctest.Test(t, testReapEmptyContainer) }

func testReapEmptyContainer(t *testing.T) {
	c := newBubbleCluster(t, 3, true, func(cfg *Config) { cfg.ReapInterval = 50 * time.Millisecond })
	leader := c.leader()
	f := c.followers()[0]
	ctx := ctxT(t, 10*time.Second)
	cont := Proposal{Op: jute.OpCreateContainer, Body: jute.Marshal(nil, &jute.CreateRequest{Path: "/c", ACL: openACL, Flags: jute.ModeContainer})}
	if res, err := f.Propose(ctx, cont); err != nil || res.Err != nil {
		t.Fatalf("create container: %v %v", err, res.Err)
	}
	if res, err := f.Propose(ctx, createReq("/c/x", nil, jute.ModePersistent)); err != nil || res.Err != nil {
		t.Fatalf("create child: %v %v", err, res.Err)
	}
	// While it has a child it stays.
	time.Sleep(200 * time.Millisecond) // fake clock (synctest): four reap intervals
	if _, _, ok := getData(t, leader, "/c"); !ok {
		t.Fatalf("container with a child was reaped")
	}
	if res, err := f.Propose(ctx, deleteReq("/c/x", -1)); err != nil || res.Err != nil {
		t.Fatalf("delete child: %v %v", err, res.Err)
	}
	eventually(t, 5*time.Second, "the empty container to be reaped", func() bool {
		_, _, ok := getData(t, f, "/c")
		return !ok
	})
	c.converge()
	if leader.Stats().Reaped < 1 {
		t.Fatalf("leader reports %d reaped", leader.Stats().Reaped)
	}
}
