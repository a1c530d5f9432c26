package consensus

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zkd-io/zkd/internal/peernet"
	"github.com/zkd-io/zkd/internal/third_party/raft"
)

// TestAppendEntriesWaitsForUnreachableFollower: while a follower cannot be dialled, the leader's
// AppendEntries to it does not fail (which would grow raft's backoff to 10s between attempts) but
// waits, and completes as soon as the follower is reachable again. An AppendEntries of a term the
// node no longer leads in fails at once.
func TestAppendEntriesWaitsForUnreachableFollower(t *testing.T) {
	synctest.Test(t, testAppendEntriesWaitsForUnreachableFollower)
}

func testAppendEntriesWaitsForUnreachableFollower(t *testing.T) {
	c := newBubbleCluster(t, 3, true, nil)
	leader := c.leader()
	f := c.followers()[0]
	c.net().Isolate(f.ID(), c.ids)
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
		if errors.As(err, new(peernet.DialError)) {
			break
		}
	}
	if !errors.As(err, new(peernet.DialError)) {
		t.Fatalf("AppendEntries of an old term to an unreachable peer = %v; want a dial error", err)
	}
	done := make(chan error, 1)
	go func() {
		var resp raft.AppendEntriesResponse
		done <- leader.rtrans.AppendEntries(raft.ServerID(f.ID()), raft.ServerAddress(f.Addr()), hb(term), &resp)
	}()
	// Several redial rounds pass (the fabric refuses the dials) and the call still waits.
	dropped := c.net().Dropped()
	eventually(t, 10*time.Second, "the leader to redial the unreachable follower", func() bool {
		return c.net().Dropped() >= dropped+5
	})
	select {
	case err := <-done:
		t.Fatalf("AppendEntries to an unreachable member returned %v while this node still leads", err)
	default:
	}
	c.net().Heal()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("AppendEntries after the heal = %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("AppendEntries still waiting 20s after the heal")
	}
}

// A follower that cannot be reached is logged once, then summarised, then logged once more when
// it is back, instead of an error for every attempt.
func TestUnreachableFollowerLoggedOnceThenSummarised(t *testing.T) {
	synctest.Test(t, testUnreachableFollowerLoggedOnceThenSummarised)
}

func testUnreachableFollowerLoggedOnceThenSummarised(t *testing.T) {
	var logs lockedBuffer
	c := newBubbleCluster(t, 3, true, func(cfg *Config) {
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil)).With("id", cfg.ID)
	})
	leader := c.leader()
	leader.rtrans.mu.Lock()
	leader.rtrans.logEvery = 200 * time.Millisecond
	leader.rtrans.mu.Unlock()
	f := c.followers()[0]
	c.net().Isolate(f.ID(), c.ids)
	count := func(msg string) int {
		n := 0
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, "id="+leader.ID()) && strings.Contains(line, msg) && strings.Contains(line, "peer="+f.ID()) {
				n++
			}
		}
		return n
	}
	eventually(t, 10*time.Second, "two summaries of the unreachable follower", func() bool {
		return count("peer still unreachable") >= 2
	})
	c.net().Heal()
	eventually(t, 10*time.Second, "the follower to be logged as reachable again", func() bool {
		return count("peer reachable again") == 1
	})
	if n := count("cannot reach peer"); n != 1 {
		t.Fatalf("logged the start of the outage %d times; want once:\n%s", n, logs.String())
	}
}
