package consensus

import (
	"testing"
	"time"

	"github.com/zkd-io/zkd/znode"
)

// TestSessionOwnership checks the leader's owner rules: the first server to write for a session
// owns it, a reattach validated on another server moves it there, the old server's writes are
// refused, and a new leader (reset) or the session's close forgets the owner.
func TestSessionOwnership(t *testing.T) {
	tr := newSessionTracker()
	tr.created(7, 10000, time.Unix(0, 0), time.Time{})
	tr.claim(7, "a")
	if !tr.owns(7, "a") {
		t.Fatal("owner a refused")
	}
	if tr.owns(7, "b") {
		t.Fatal("b accepted for a session owned by a")
	}
	tr.claim(7, "b") // the client reattached on b
	if tr.owns(7, "a") {
		t.Fatal("a still accepted after the session moved to b")
	}
	if !tr.owns(7, "b") {
		t.Fatal("new owner b refused")
	}
	if !tr.owns(8, "c") || tr.owns(8, "a") {
		t.Fatal("an unowned session must go to the first server that writes for it, and stay there")
	}
	tr.reset([]znode.Session{{ID: 7, Timeout: 10000}}, time.Unix(0, 0))
	if !tr.owns(7, "a") {
		t.Fatal("a new leader must not refuse writes from an owner it has not learned")
	}
	tr.closed([]int64{7})
	if !tr.owns(7, "c") {
		t.Fatal("a closed session's owner must be forgotten")
	}
	if got, want := originServer("s1/0a1b"), "s1"; got != want {
		t.Fatalf("originServer = %q; want %q", got, want)
	}
}
