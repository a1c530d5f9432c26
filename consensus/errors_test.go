package consensus

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zkd-io/zkd/jute"
)

func TestConfigValidate(t *testing.T) {
	good := Config{ID: "a"}
	if err := good.Validate(); err != nil {
		t.Fatalf("Validate(minimal) = %v", err)
	}
	for name, c := range map[string]Config{
		"no id":           {},
		"short heartbeat": {ID: "a", HeartbeatTimeout: time.Millisecond},
		"election < hb":   {ID: "a", HeartbeatTimeout: time.Second, ElectionTimeout: 500 * time.Millisecond},
		"self missing":    {ID: "a", Peers: []Peer{{ID: "b", Addr: "x:1"}}},
		"duplicate peer":  {ID: "a", Peers: []Peer{{ID: "a", Addr: "x:1"}, {ID: "a", Addr: "x:2"}}},
		"peer no addr":    {ID: "a", Peers: []Peer{{ID: "a"}}},
		"negative hold":   {ID: "a", HoldTimeout: -time.Second},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("Validate(%s) = nil; want an error", name)
		}
		if _, err := New(c); err == nil {
			t.Errorf("New(%s) succeeded", name)
		}
	}
}

// A follower without a leader fails with ErrNoLeader after HoldTimeout and proposes nothing.
func TestNoLeaderFailsSafely(t *testing.T) { synctest.Test(t, testNoLeaderFailsSafely) }

func testNoLeaderFailsSafely(t *testing.T) {
	c := newBubbleCluster(t, 3, true, func(cfg *Config) { cfg.HoldTimeout = 700 * time.Millisecond })
	c.leader()
	f := c.followers()[0]
	for _, n := range c.running() {
		if n != f {
			c.stop(n.ID())
		}
	}
	eventually(t, 5*time.Second, "the survivor to lose its leader", func() bool {
		id, _ := f.Leader()
		return id == ""
	})
	before := f.LastZxid()
	ctx := ctxT(t, 10*time.Second)
	start := time.Now()
	_, err := f.Propose(ctx, createReq("/lost", nil, jute.ModePersistent))
	if !errors.Is(err, ErrNoLeader) || errors.Is(err, ErrUnknownOutcome) {
		t.Fatalf("Propose without a leader = %v; want ErrNoLeader", err)
	}
	if took := time.Since(start); took < 600*time.Millisecond {
		t.Fatalf("gave up after %v; want about HoldTimeout", took)
	}
	if err := f.Sync(ctx); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("Sync without a leader = %v; want ErrNoLeader", err)
	}
	if f.Serving() {
		t.Fatalf("a node without a leader reports serving")
	}
	if f.LastZxid() != before || f.Stats().Retried == 0 {
		t.Fatalf("zxid moved (%d → %d) or no retries counted (%d)", before, f.LastZxid(), f.Stats().Retried)
	}
}

// Start blocks once MaxOutstanding proposals are outstanding, until its ctx ends.
func TestOutstandingProposalsBounded(t *testing.T) { synctest.Test(t, testOutstandingProposalsBounded) }

func testOutstandingProposalsBounded(t *testing.T) {
	c := newBubbleCluster(t, 3, true, func(cfg *Config) {
		cfg.MaxOutstanding = 1
		cfg.HoldTimeout = 1500 * time.Millisecond
	})
	c.leader()
	f := c.followers()[0]
	for _, n := range c.running() {
		if n != f {
			c.stop(n.ID())
		}
	}
	eventually(t, 5*time.Second, "the survivor to lose its leader", func() bool {
		id, _ := f.Leader()
		return id == ""
	})
	first := make(chan error, 1)
	go func() {
		_, err := f.Start(ctxT(t, 10*time.Second), createReq("/one", nil, jute.ModePersistent))
		first <- err
	}()
	eventually(t, 5*time.Second, "the first proposal to hold the only slot", func() bool { return f.Stats().Outstanding == 1 })
	short := ctxT(t, 100*time.Millisecond)
	if _, err := f.Start(short, createReq("/two", nil, jute.ModePersistent)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second Start with the slot taken = %v; want the ctx deadline", err)
	}
	if err := <-first; !errors.Is(err, ErrNoLeader) {
		t.Fatalf("first Start = %v; want ErrNoLeader", err)
	}
	if got := f.Stats().Outstanding; got != 0 {
		t.Fatalf("outstanding after both settled = %d", got)
	}
}
