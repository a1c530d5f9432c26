package consensus

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/znode"
)

// The tracker's rules at given times: a touch extends a deadline by the timeout, never shortens
// it; expire returns each passed session once until unclose; reset gives a full timeout.
func TestSessionTrackerDeadlines(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tr := newSessionTracker()
	tr.created(1, 4000, t0, time.Time{})
	tr.created(2, 10000, t0, time.Time{})
	if got := tr.expire(t0.Add(4 * time.Second)); len(got) != 0 {
		t.Fatalf("expired at the deadline itself: %v", got)
	}
	tr.touch(1, t0.Add(3*time.Second)) // deadline now t0+7s
	tr.touch(2, t0.Add(time.Second))   // deadline now t0+11s
	if got := tr.expire(t0.Add(6 * time.Second)); len(got) != 0 {
		t.Fatalf("a touched session expired early: %v", got)
	}
	if got := tr.expire(t0.Add(7*time.Second + time.Millisecond)); !slices.Equal(got, []int64{1}) {
		t.Fatalf("expire after the touched deadline = %v; want [1]", got)
	}
	if got := tr.expire(t0.Add(8 * time.Second)); len(got) != 0 {
		t.Fatalf("a session being expired was returned again: %v", got)
	}
	if tr.touch(1, t0.Add(8*time.Second)) {
		t.Fatal("a session being expired took a touch")
	}
	tr.unclose([]int64{1})
	if got := tr.expire(t0.Add(8 * time.Second)); !slices.Equal(got, []int64{1}) {
		t.Fatalf("after a failed expiry = %v; want [1] again", got)
	}
	tr.reset([]znode.Session{{ID: 2, Timeout: 10000}, {ID: 3, Timeout: 2000}}, t0.Add(20*time.Second))
	if got := tr.expire(t0.Add(21 * time.Second)); len(got) != 0 {
		t.Fatalf("after a reset = %v; want none before a full timeout", got)
	}
	if got := tr.expire(t0.Add(22*time.Second + time.Millisecond)); !slices.Equal(got, []int64{3}) {
		t.Fatalf("after a reset's timeout = %v; want [3]", got)
	}
}

// In a synctest bubble the in-memory node's clock is the bubble's: a session lives exactly as
// long as its timeout allows after its last touch, and its expiry deletes its ephemerals, with no
// real time spent.
func TestMemorySessionExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var closed []int64
		m := NewMemory(MemoryConfig{TickTime: 200 * time.Millisecond,
			OnApply: func(_ int64, r *znode.Result, _ *znode.View) { closed = append(closed, r.Closed...) }})
		defer m.Shutdown()
		ctx := context.Background()
		s, attach, err := m.CreateSession(ctx, 4000)
		if err != nil {
			t.Fatal(err)
		}
		p := Proposal{Session: s.ID, Attach: attach, Seq: 1, Op: jute.OpCreate,
			Body: jute.Marshal(nil, &jute.CreateRequest{Path: "/e", ACL: openACL, Flags: jute.ModeEphemeral})}
		if res, err := m.Propose(ctx, p); err != nil || res.Err != nil {
			t.Fatalf("create ephemeral: %v %v", err, res.Err)
		}
		// Touched every 3s for 30s: alive throughout.
		for range 10 {
			time.Sleep(3 * time.Second)
			m.Touch(s.ID)
			synctest.Wait()
			if _, ok := m.View().Session(s.ID); !ok {
				t.Fatalf("a touched session expired at %v", time.Now())
			}
		}
		// Silent: alive just before its timeout, gone within a tick after it.
		time.Sleep(3900 * time.Millisecond)
		synctest.Wait()
		if _, ok := m.View().Session(s.ID); !ok {
			t.Fatal("expired before its timeout")
		}
		time.Sleep(400 * time.Millisecond)
		synctest.Wait()
		if _, ok := m.View().Session(s.ID); ok {
			t.Fatal("still alive a tick after its timeout")
		}
		if _, ok := m.View().Stat("/e"); ok {
			t.Fatal("the expired session's ephemeral is still there")
		}
		if !slices.Equal(closed, []int64{s.ID}) {
			t.Fatalf("apply hook saw sessions %v closed; want [%#x]", closed, s.ID)
		}
		// A write it sent late is refused, as on every replica.
		p.Seq = 2
		if res, err := m.Propose(ctx, p); err != nil || res.Err != jute.CodeSessionExpired {
			t.Fatalf("write after expiry: %v %v; want SessionExpired", err, res.Err)
		}
		if ok, _, _ := m.ValidateSession(ctx, s.ID); ok {
			t.Fatal("an expired session validated")
		}
	})
}
