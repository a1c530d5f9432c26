package consensus

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zkd-io/zkd/jute"
)

// TestWriteOfExpiredSessionRefused: a write a follower forwarded before its session expired, but
// that reaches the leader only after the expiry committed, is refused with SessionExpired on
// every replica. (Before the session rules moved into Apply, the leader checked liveness only for
// ephemeral creates, and such a write took effect after its session's end.)
func TestWriteOfExpiredSessionRefused(t *testing.T) {
	synctest.Test(t, testWriteOfExpiredSessionRefused)
}

func testWriteOfExpiredSessionRefused(t *testing.T) {
	c := newBubbleCluster(t, 3, true, func(cfg *Config) { cfg.TickTime = 100 * time.Millisecond })
	leader := c.leader()
	f := c.followers()[0]
	ctx := ctxT(t, 30*time.Second)
	s, attach, err := f.CreateSession(ctx, 500)
	if err != nil {
		t.Fatal(err)
	}
	if attach == 0 {
		t.Fatal("CreateSession returned no attachment token")
	}
	// The follower's link to the leader becomes slow: the write, and the session's touches,
	// arrive after the session's timeout, so the leader expires it first.
	c.net().Delay(f.ID(), leader.ID(), 2*time.Second)
	p := createReq("/late", nil, jute.ModePersistent)
	p.Session, p.Attach, p.Seq = s.ID, attach, 1
	res, err := f.Propose(ctx, p)
	if err != nil {
		t.Fatalf("Propose = %v", err)
	}
	if res.Err != jute.CodeSessionExpired {
		t.Fatalf("write of an expired session: %v at zxid %d; want SessionExpired", res.Err, res.Zxid)
	}
	c.net().Heal()
	c.converge()
	for _, n := range c.running() {
		if _, _, ok := getData(t, n, "/late"); ok {
			t.Fatalf("the expired session's write took effect on %s", n.ID())
		}
		if _, ok := n.View().Session(s.ID); ok {
			t.Fatalf("session still open on %s", n.ID())
		}
	}
}

// TestOrderedWritesThroughFollower: a session's ordered writes, sent through a follower, take
// effect only in order: a write whose predecessor never took effect is refused with SessionMoved,
// and once the session attached again (a larger token from ValidateSession) the old attachment's
// writes are refused too. Tokens grow across a change of leader.
func TestOrderedWritesThroughFollower(t *testing.T) {
	synctest.Test(t, testOrderedWritesThroughFollower)
}

func testOrderedWritesThroughFollower(t *testing.T) {
	c := newBubbleCluster(t, 3, true, nil)
	c.leader()
	f := c.followers()[0]
	ctx := ctxT(t, 30*time.Second)
	s, a1, err := f.CreateSession(ctx, 10000)
	if err != nil {
		t.Fatal(err)
	}
	propose := func(n *Node, attach, seq uint64, path string) jute.Code {
		t.Helper()
		p := createReq(path, nil, jute.ModePersistent)
		p.Session, p.Attach, p.Seq = s.ID, attach, seq
		res, err := n.Propose(ctx, p)
		if err != nil {
			t.Fatalf("Propose(%s) = %v", path, err)
		}
		if res.Err == nil {
			return jute.CodeOK
		}
		return res.Err.(jute.Code)
	}
	steps := []struct {
		attach, seq uint64
		path        string
		want        jute.Code
	}{
		{a1, 1, "/1", jute.CodeOK},
		{a1, 3, "/3", jute.CodeSessionMoved}, // 2 never took effect
		{a1, 2, "/2", jute.CodeOK},
		{a1, 2, "/2-again", jute.CodeSessionMoved},
	}
	for _, st := range steps {
		if got := propose(f, st.attach, st.seq, st.path); got != st.want {
			t.Fatalf("write %s (%d, %d) = %v; want %v", st.path, st.attach, st.seq, got, st.want)
		}
	}
	ok, a2, err := f.ValidateSession(ctx, s.ID)
	if err != nil || !ok || a2 <= a1 {
		t.Fatalf("ValidateSession = %v, %#x, %v; want a token above %#x", ok, a2, err, a1)
	}
	if got := propose(f, a2, 1, "/new-1"); got != jute.CodeOK {
		t.Fatalf("first write of the new attachment = %v", got)
	}
	if got := propose(f, a1, 3, "/old-3"); got != jute.CodeSessionMoved {
		t.Fatalf("write of the left attachment = %v; want SessionMoved", got)
	}

	// A new leader hands out larger tokens than the old one did.
	old := c.leader()
	c.stop(old.ID())
	nl := c.leader()
	var via *Node
	for _, n := range c.running() {
		via = n
	}
	ok, a3, err := via.ValidateSession(ctx, s.ID)
	if err != nil || !ok || a3 <= a2 {
		t.Fatalf("ValidateSession under leader %s = %v, %#x, %v; want a token above %#x", nl.ID(), ok, a3, err, a2)
	}
	if got := propose(via, a3, 1, "/after-change"); got != jute.CodeOK {
		t.Fatalf("first write after the leader change = %v", got)
	}
	for _, path := range []string{"/3", "/2-again", "/old-3"} {
		if _, _, ok := getData(t, via, path); ok {
			t.Fatalf("refused write %s took effect", path)
		}
	}
}

// TestRetryOnlyAlone: a write that was not proposed is resubmitted only when it is its session's
// one unsettled proposal. A later write is never resubmitted alone while an earlier one's outcome
// is unknown (the server closes the connection instead).
func TestRetryOnlyAlone(t *testing.T) { synctest.Test(t, testRetryOnlyAlone) }

func testRetryOnlyAlone(t *testing.T) {
	c := newBubbleCluster(t, 1, true, nil)
	ps := c.leader().props
	register := func(session int64, seq uint64) *Pending {
		p := &Pending{c: &command{session: session, seq: seq}, done: make(chan struct{})}
		ps.slots <- struct{}{} // what start takes
		ps.mu.Lock()
		defer ps.mu.Unlock()
		ps.mu.pending[seq] = p
		ps.mu.lastSeq[session] = seq
		ps.mu.unsettled[session]++
		return p
	}
	p1, p2, other := register(9, 1001), register(9, 1002), register(10, 1003)
	if ps.mayRetry(p1.c) {
		t.Fatal("an earlier write may be retried after a later one was started")
	}
	if ps.mayRetry(p2.c) {
		t.Fatal("a later write may be retried alone while an earlier one is unsettled")
	}
	if !ps.mayRetry(other.c) {
		t.Fatal("another session's only write may not be retried")
	}
	failed := errors.New("failed")
	if !ps.finish(p1, nil, nil, failed) || ps.finish(p1, nil, nil, nil) {
		t.Fatal("finish completed a write other than exactly once")
	}
	if _, err := p1.Wait(context.Background()); err != failed {
		t.Fatalf("Wait = %v; want the first outcome", err)
	}
	if !ps.mayRetry(p2.c) {
		t.Fatal("the session's only unsettled write may not be retried")
	}
	ps.finish(p2, nil, nil, failed)
	ps.finish(other, nil, nil, failed)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if len(ps.mu.unsettled) != 0 || len(ps.mu.lastSeq) != 0 || len(ps.mu.pending) != 0 {
		t.Fatalf("bookkeeping left behind: %v %v %v", ps.mu.unsettled, ps.mu.lastSeq, ps.mu.pending)
	}
}
