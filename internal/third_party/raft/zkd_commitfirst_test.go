package raft

// Test of zkd's change to this fork (see ZKD.md): a leader hands committed entries to the FSM
// before it stores the next batch.

import (
	"sync"
	"testing"
	"time"
)

// commitSeenStore holds StoreLogs at a gate and tells, for each call, the first index it stores
// and the leader's commit index when the call began.
type commitSeenStore struct {
	*InmemStore
	r func() *Raft

	mu   sync.Mutex
	gate chan struct{}
	seen chan [2]uint64 // {first index of the batch, commit index on entry}
}

func (s *commitSeenStore) StoreLog(l *Log) error { return s.StoreLogs([]*Log{l}) }

func (s *commitSeenStore) StoreLogs(logs []*Log) error {
	s.mu.Lock()
	gate, seen := s.gate, s.seen
	s.mu.Unlock()
	if seen != nil && len(logs) > 0 {
		seen <- [2]uint64{logs[0].Index, s.r().getCommitIndex()}
	}
	if gate != nil {
		<-gate
	}
	return s.InmemStore.StoreLogs(logs)
}

func (s *commitSeenStore) set(gate chan struct{}, seen chan [2]uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gate, s.seen = gate, seen
}

// While the leader stores one batch, the next one is queued; once the store returns, both the
// commit of the first and the second batch are ready for the leader loop. The first must be
// committed before the second is stored. Upstream's loop chose between the two at random, so
// 20 rounds in a row pass by chance one time in a million.
func TestZkdCommitBeforeNextStore(t *testing.T) {
	addr, trans := NewInmemTransport("")
	conf := inmemConfig(t)
	conf.LocalID = "s0"
	conf.BatchApplyCh = true // Apply returns once the entry is queued for the leader loop
	store := &commitSeenStore{InmemStore: NewInmemStore()}
	configuration := Configuration{Servers: []Server{{Suffrage: Voter, ID: conf.LocalID, Address: addr}}}
	snaps := NewInmemSnapshotStore()
	if err := BootstrapCluster(conf, store, store, snaps, trans, configuration); err != nil {
		t.Fatal(err)
	}
	var rmu sync.Mutex
	var r *Raft
	store.r = func() *Raft { rmu.Lock(); defer rmu.Unlock(); return r }
	rr, err := NewRaft(conf, &MockFSM{}, store, store, snaps, trans)
	if err != nil {
		t.Fatal(err)
	}
	rmu.Lock()
	r = rr
	rmu.Unlock()
	t.Cleanup(func() {
		store.set(nil, nil)
		_ = rr.Shutdown().Error()
	})
	waitFor(t, "leadership", func() bool { return rr.State() == Leader })
	if err := rr.Apply([]byte("first"), 5*time.Second).Error(); err != nil {
		t.Fatal(err)
	}

	for round := 0; round < 20; round++ {
		gate, seen := make(chan struct{}), make(chan [2]uint64, 2)
		store.set(gate, seen)
		a := rr.Apply([]byte("a"), 5*time.Second)
		first := <-seen // the leader is storing a's batch, held at the gate
		store.set(nil, seen)
		b := rr.Apply([]byte("b"), 5*time.Second) // queued behind it
		close(gate)
		second := <-seen
		if err := a.Error(); err != nil {
			t.Fatal(err)
		}
		if err := b.Error(); err != nil {
			t.Fatal(err)
		}
		if second[0] <= first[0] {
			t.Fatalf("round %d: batches at %d then %d", round, first[0], second[0])
		}
		if second[1] < first[0] {
			t.Fatalf("round %d: the batch at %d was stored with the commit index at %d, before the batch at %d it follows was committed",
				round, second[0], second[1], first[0])
		}
	}
}
