package consensus

import (
	"testing"
	"time"

	"github.com/zkd-io/zkd/znode"
)

// TestSessionActivity checks what the tracker reports about sessions: the creation time the
// leader stamped and the last sign of life, kept across a new leader's reset; the last touch and
// the owner only on a leader; zero values for sessions it does not know.
func TestSessionActivity(t *testing.T) {
	tr := newSessionTracker()
	born := time.UnixMilli(1_000_000)
	t0 := time.UnixMilli(2_000_000)
	tr.created(7, 10000, t0, born)
	tr.claim(7, "2")
	tr.touch(7, t0.Add(3*time.Second))
	tr.touch(7, t0.Add(time.Second)) // out of order: the later touch stays
	got := tr.activity([]int64{9, 7}, true)
	if got[0] != (SessionActivity{}) {
		t.Errorf("unknown session: %+v; want the zero value", got[0])
	}
	want := SessionActivity{Created: born, LastTouch: t0.Add(3 * time.Second), Server: "2"}
	if got[1] != want {
		t.Errorf("leader's view: %+v; want %+v", got[1], want)
	}
	if got := tr.activity([]int64{7}, false)[0]; got != (SessionActivity{Created: born}) {
		t.Errorf("follower's view: %+v; want only the creation time", got)
	}
	// A new leader keeps what was known (but not the owner, which it learns anew); a session
	// that came with a snapshot has no known creation time or activity.
	tr.reset([]znode.Session{{ID: 7, Timeout: 10000}, {ID: 8, Timeout: 10000}}, t0.Add(time.Minute))
	got = tr.activity([]int64{7, 8}, true)
	if got[0] != (SessionActivity{Created: born, LastTouch: t0.Add(3 * time.Second)}) || got[1] != (SessionActivity{}) {
		t.Errorf("after reset: %+v", got)
	}
	// Creating a session is a sign of life.
	tr.created(9, 10000, t0, born)
	if got := tr.activity([]int64{9}, true)[0]; got != (SessionActivity{Created: born, LastTouch: born}) {
		t.Errorf("new session: %+v; want created and last heard of at its creation", got)
	}
}

func TestSnapshotTime(t *testing.T) {
	for id, want := range map[string]time.Time{
		"3-1200-1700000000123": time.UnixMilli(1700000000123),
		"garbage":              {},
		"3-1200-x":             {},
	} {
		if got := snapshotTime(id); !got.Equal(want) {
			t.Errorf("snapshotTime(%q) = %v; want %v", id, got, want)
		}
	}
}
