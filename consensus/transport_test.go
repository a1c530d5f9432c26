package consensus

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestAppendEntriesWaitsForUnreachableFollower: while a follower cannot be dialled, the leader's
// AppendEntries to it does not fail (which would grow raft's backoff to 10s between attempts) but
// waits, and completes as soon as the follower is reachable again. An AppendEntries of a term the
// node no longer leads in fails at once.
func TestAppendEntriesWaitsForUnreachableFollower(t *testing.T) {
	c := newCluster(t, 3, true, nil)
	leader := c.leader()
	f := c.followers()[0]
	c.fab.Isolate(f.ID(), c.ids)
	term := leader.raft.CurrentTerm()
	hb := func(term uint64) *raft.AppendEntriesRequest {
		return &raft.AppendEntriesRequest{
			RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(leader.ID()),
				Addr: leader.trans.EncodePeer(raft.ServerID(leader.ID()), raft.ServerAddress(leader.Addr()))},
			Term:              term,
			LeaderCommitIndex: 0,
		}
	}
	// Heartbeats of an older term are not worth waiting for: they fail at once, first on the
	// pooled connections the isolation broke, then with a dial error.
	var err error
	for range 5 {
		var resp raft.AppendEntriesResponse
		err = leader.rtrans.AppendEntries(raft.ServerID(f.ID()), raft.ServerAddress(f.Addr()), hb(term-1), &resp)
		if errors.As(err, new(peerDialError)) {
			break
		}
	}
	if !errors.As(err, new(peerDialError)) {
		t.Fatalf("AppendEntries of an old term to an unreachable peer = %v; want a dial error", err)
	}
	done := make(chan error, 1)
	go func() {
		var resp raft.AppendEntriesResponse
		done <- leader.rtrans.AppendEntries(raft.ServerID(f.ID()), raft.ServerAddress(f.Addr()), hb(term), &resp)
	}()
	// Several redial rounds pass (the fabric refuses the dials) and the call still waits.
	dropped := c.fab.Dropped()
	eventually(t, 10*time.Second, "the leader to redial the unreachable follower", func() bool {
		return c.fab.Dropped() >= dropped+5
	})
	select {
	case err := <-done:
		t.Fatalf("AppendEntries to an unreachable member returned %v while this node still leads", err)
	default:
	}
	c.fab.Heal()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("AppendEntries after the heal = %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("AppendEntries still waiting 20s after the heal")
	}
}
