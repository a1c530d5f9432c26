package consensus

import (
	"bufio"
	"testing"
	"testing/synctest"

	"github.com/zkd-io/zkd/internal/peernet"
	"github.com/zkd-io/zkd/internal/third_party/raft"
)

// TestRelayWaitsForTheEntry drives the relay's bookkeeping: a commit is relayed only once the
// local log holds its entry, a newer commit replaces an older one, and a commit already applied
// is dropped.
func TestRelayWaitsForTheEntry(t *testing.T) {
	r := newRelay(nil)
	r.storedThrough(5)
	r.offer(7, 2)
	if idx, _, waited := r.next(4); idx != 0 || !waited {
		t.Fatalf("entry 7 not stored yet: next = %d, waited %v; want 0, true", idx, waited)
	}
	r.offer(6, 2) // older than the pending one: ignored
	r.storedThrough(7)
	select {
	case <-r.wake:
	default:
		t.Fatal("storing the pending entry did not wake the relay")
	}
	if idx, term, _ := r.next(4); idx != 7 || term != 2 {
		t.Fatalf("next = (%d, %d); want (7, 2)", idx, term)
	}
	if idx, _, waited := r.next(4); idx != 0 || waited {
		t.Fatalf("relayed twice: next = %d, waited %v", idx, waited)
	}
	r.offer(9, 3)
	r.storedThrough(12)
	if idx, _, _ := r.next(9); idx != 0 {
		t.Fatalf("entry 9 already applied, but next = %d", idx)
	}
	r.offer(10, 3)
	r.storedThrough(8) // the log was cut back (a new leader's entries replaced its tail)
	if idx, _, waited := r.next(9); idx != 0 || !waited {
		t.Fatalf("entry 10 no longer stored: next = %d, waited %v; want 0, true", idx, waited)
	}
}

// TestAnnouncementWantsNoReply: a commit announcement sent with id 0 (how a leader sends them)
// gets no reply, and one with an id (how earlier leaders sent them) still does. The first reply
// on the connection must be to the request that follows the announcement: the server answers an
// announcement on its reading goroutine, before it even reads the next request.
func TestAnnouncementWantsNoReply(t *testing.T) { synctest.Test(t, testAnnouncementWantsNoReply) }

func testAnnouncementWantsNoReply(t *testing.T) {
	c := newBubbleCluster(t, 3, true, nil)
	c.leader()
	f := c.followers()[0]
	conn, err := f.cfg.Network.Dial(t.Context(), f.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte{peernet.ConnRPC}); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	// An index this follower has applied long ago: the relay drops it.
	note := encodeMsg(&commitMsg{Index: 1, Term: 1})
	for _, tc := range []struct {
		id   uint64
		want uint64 // the id of the first reply
	}{{0, 9}, {7, 7}} {
		if err := writeFrame(conn, tc.id, rpcCommitted, note); err != nil {
			t.Fatal(err)
		}
		if err := writeFrame(conn, 9, rpcMembers, nil); err != nil {
			t.Fatal(err)
		}
		id, _, _, err := readFrame(br)
		if err != nil {
			t.Fatal(err)
		}
		if id != tc.want {
			t.Fatalf("announcement with id %d: first reply has id %d, want %d", tc.id, id, tc.want)
		}
		if tc.id != 0 {
			if id, _, _, err := readFrame(br); err != nil || id != 9 {
				t.Fatalf("second reply: id %d, %v; want 9", id, err)
			}
		}
	}
}

// The wrappers between Raft and the log cache (metrics' timing, the relay's stored index) pass
// the leader's staging on. Without it the leader's append silently stops overlapping replication,
// which costs a write through a cluster about a fifth of its throughput (docs/performance.md)
// and shows no error.
func TestLogStoreWrappersStage(t *testing.T) {
	cache, err := raft.NewLogCache(16, raft.NewInmemStore())
	if err != nil {
		t.Fatal(err)
	}
	var logs raft.LogStore = timedLogs{LogStore: relayedLogs{LogStore: cache, r: newRelay(nil)}, m: newMetrics()}
	s, ok := logs.(raft.StagingLogStore)
	if !ok {
		t.Fatal("the log store Raft is given does not stage")
	}
	batch := []*raft.Log{{Index: 1, Term: 1, Type: raft.LogCommand, Data: []byte("x")}}
	if !s.StageLogs(batch) {
		t.Fatal("a batch was not staged")
	}
	var l raft.Log
	if err := logs.GetLog(1, &l); err != nil || string(l.Data) != "x" {
		t.Fatalf("a staged entry is not served: %v", err)
	}
	s.UnstageLogs(batch)
	if err := logs.GetLog(1, &l); err == nil {
		t.Fatal("an unstaged entry that was never stored is still served")
	}
}
