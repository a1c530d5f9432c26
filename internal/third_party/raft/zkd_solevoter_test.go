package raft

// Test of zkd's change to this fork (see ZKD.md): the only voter of its configuration stands at
// once instead of after a heartbeat timeout.

import (
	"testing"
	"time"
)

func TestZkdSoleVoterStandsAtOnce(t *testing.T) {
	addr, trans := NewInmemTransport("")
	conf := inmemConfig(t)
	conf.LocalID = "s0"
	// Far longer than the test waits: upstream would wait this long before its first election.
	conf.HeartbeatTimeout, conf.ElectionTimeout, conf.LeaderLeaseTimeout = time.Hour, time.Hour, time.Hour
	store, snaps := NewInmemStore(), NewInmemSnapshotStore()
	configuration := Configuration{Servers: []Server{{Suffrage: Voter, ID: conf.LocalID, Address: addr}}}
	if err := BootstrapCluster(conf, store, store, snaps, trans, configuration); err != nil {
		t.Fatal(err)
	}
	r, err := NewRaft(conf, &MockFSM{}, store, store, snaps, trans)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Shutdown().Error() })
	waitFor(t, "leadership", func() bool { return r.State() == Leader })

	// A voter among others still waits for a leader to make contact.
	addr2, trans2 := NewInmemTransport("")
	conf2 := inmemConfig(t)
	conf2.LocalID = "s1"
	conf2.HeartbeatTimeout, conf2.ElectionTimeout, conf2.LeaderLeaseTimeout = time.Hour, time.Hour, time.Hour
	store2, snaps2 := NewInmemStore(), NewInmemSnapshotStore()
	pair := Configuration{Servers: []Server{{Suffrage: Voter, ID: "s1", Address: addr2}, {Suffrage: Voter, ID: "s2", Address: "nowhere"}}}
	if err := BootstrapCluster(conf2, store2, store2, snaps2, trans2, pair); err != nil {
		t.Fatal(err)
	}
	r2, err := NewRaft(conf2, &MockFSM{}, store2, store2, snaps2, trans2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r2.Shutdown().Error() })
	if soleVoter(pair, "s1") || !soleVoter(configuration, "s0") {
		t.Fatal("soleVoter is wrong")
	}
	if st := r2.State(); st != Follower {
		t.Fatalf("a voter of two is %v at once; want a follower until its heartbeat times out", st)
	}
}
