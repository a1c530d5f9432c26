package raft

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// A follower that holds entries it has not been told are committed commits and applies them
// when AdvanceCommit names an entry it holds with the same term, and only then.
func TestZkdAdvanceCommit(t *testing.T) {
	logs, stable := NewInmemStore(), NewInmemStore()
	servers := Configuration{Servers: []Server{
		{Suffrage: Voter, ID: "a", Address: "a"},
		{Suffrage: Voter, ID: "b", Address: "b"},
		{Suffrage: Voter, ID: "c", Address: "c"},
	}}
	// Term 2: the configuration at 1, commands at 2-5 (the leader's, not yet said committed).
	entries := []*Log{{Index: 1, Term: 2, Type: LogConfiguration, Data: EncodeConfiguration(servers)}}
	for i := uint64(2); i <= 5; i++ {
		entries = append(entries, &Log{Index: i, Term: 2, Type: LogCommand, Data: []byte(fmt.Sprint(i))})
	}
	if err := logs.StoreLogs(entries); err != nil {
		t.Fatal(err)
	}
	if err := stable.SetUint64(keyCurrentTerm, 2); err != nil {
		t.Fatal(err)
	}
	conf := inmemConfig(t)
	conf.LocalID = "a"
	// No leader ever makes contact: the node must stay a follower for the whole test.
	conf.HeartbeatTimeout, conf.ElectionTimeout, conf.LeaderLeaseTimeout = time.Hour, time.Hour, time.Hour
	_, trans := NewInmemTransport("a")
	fsm := &MockFSM{}
	r, err := NewRaft(conf, fsm, logs, stable, NewInmemSnapshotStore(), trans)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Shutdown().Error() }()
	if r.State() != Follower {
		t.Fatalf("state %v; want Follower", r.State())
	}

	for _, c := range []struct {
		index, term uint64
		want        error
	}{
		{6, 2, ErrCommitNotStored}, // beyond the log
		{3, 1, ErrCommitMismatch},  // the entry there is of another term
		{3, 3, ErrCommitMismatch},
	} {
		if err := r.AdvanceCommit(c.index, c.term, nil); !errors.Is(err, c.want) {
			t.Errorf("AdvanceCommit(%d, %d) = %v; want %v", c.index, c.term, err, c.want)
		}
	}
	if got := len(fsm.Logs()); got != 0 {
		t.Fatalf("refused commits applied %d entries", got)
	}

	if err := r.AdvanceCommit(3, 2, nil); err != nil { // inside the log
		t.Fatal(err)
	}
	waitFor(t, "entries 2-3 applied", func() bool { return len(fsm.Logs()) == 2 })
	if got := fsm.Logs(); len(got) != 2 || string(got[0]) != "2" || string(got[1]) != "3" {
		t.Fatalf("applied %q; want entries 2 and 3", got)
	}
	if err := r.AdvanceCommit(2, 2, nil); err != nil { // already committed: nothing to do
		t.Fatal(err)
	}
	if err := r.AdvanceCommit(5, 2, nil); err != nil { // the last entry
		t.Fatal(err)
	}
	waitFor(t, "entries 4-5 applied", func() bool { return len(fsm.Logs()) == 4 })
	if got := len(fsm.Logs()); got != 4 {
		t.Fatalf("applied %d entries; want 4", got)
	}
	if r.State() != Follower || r.Leader() != "" {
		t.Fatalf("state %v, leader %q: AdvanceCommit must not count as a leader's contact", r.State(), r.Leader())
	}

	stop := make(chan struct{})
	close(stop)
	if err := r.Shutdown().Error(); err != nil {
		t.Fatal(err)
	}
	if err := r.AdvanceCommit(5, 2, stop); !errors.Is(err, ErrRaftShutdown) {
		t.Fatalf("AdvanceCommit after shutdown = %v; want ErrRaftShutdown", err)
	}
}
