package raft

// Tests of zkd's change to this fork (see ZKD.md): a leader replicates its new entries while its
// own append is under way, counts itself towards the commit index only once that append
// returned, and never serves from its cache an entry its store failed to hold.

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// gatedStore is a LogCache whose StoreLogs can be held at a gate or made to fail.
type gatedStore struct {
	*LogCache
	mu   sync.Mutex
	gate chan struct{} // when set, StoreLogs waits until it is closed
	fail error         // when set, StoreLogs fails with it (after the gate)
}

func (g *gatedStore) set(gate chan struct{}, fail error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gate, g.fail = gate, fail
}

func (g *gatedStore) StoreLog(l *Log) error { return g.StoreLogs([]*Log{l}) }

func (g *gatedStore) StoreLogs(logs []*Log) error {
	g.mu.Lock()
	gate, fail := g.gate, g.fail
	g.mu.Unlock()
	if gate != nil {
		<-gate
	}
	if fail != nil {
		return fail
	}
	return g.LogCache.StoreLogs(logs)
}

type gatedCluster struct {
	rafts  []*Raft
	stores []*gatedStore
	inner  []*InmemStore
	fsms   []*MockFSM
}

func newGatedCluster(t *testing.T) *gatedCluster {
	t.Helper()
	c := &gatedCluster{}
	var trans []*InmemTransport
	var configuration Configuration
	for i := 0; i < 3; i++ {
		addr, tr := NewInmemTransport("")
		trans = append(trans, tr)
		configuration.Servers = append(configuration.Servers, Server{Suffrage: Voter, ID: ServerID(fmt.Sprintf("s%d", i)), Address: addr})
	}
	for i, a := range trans {
		for j, b := range trans {
			if i != j {
				a.Connect(b.LocalAddr(), b)
			}
		}
	}
	for i := 0; i < 3; i++ {
		inner := NewInmemStore()
		cache, err := NewLogCache(64, inner)
		if err != nil {
			t.Fatal(err)
		}
		store := &gatedStore{LogCache: cache}
		conf := inmemConfig(t)
		conf.LocalID = configuration.Servers[i].ID
		snaps := NewInmemSnapshotStore()
		if err := BootstrapCluster(conf, store, inner, snaps, trans[i], configuration); err != nil {
			t.Fatal(err)
		}
		fsm := &MockFSM{}
		r, err := NewRaft(conf, fsm, store, inner, snaps, trans[i])
		if err != nil {
			t.Fatal(err)
		}
		c.rafts, c.stores, c.inner, c.fsms = append(c.rafts, r), append(c.stores, store), append(c.inner, inner), append(c.fsms, fsm)
	}
	t.Cleanup(func() {
		for i, r := range c.rafts {
			c.stores[i].set(nil, nil)
			_ = r.Shutdown().Error()
		}
	})
	return c
}

// leader waits for a leader and returns its position.
func (c *gatedCluster) leader(t *testing.T) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for i, r := range c.rafts {
			if r.State() == Leader {
				return i
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no leader")
	return -1
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func storedLast(s *InmemStore) uint64 {
	last, _ := s.LastIndex()
	return last
}

func TestZkdLeaderReplicatesDuringItsOwnAppend(t *testing.T) {
	c := newGatedCluster(t)
	l := c.leader(t)
	// A first entry, so the replicators are past the leader's no-op.
	if err := c.rafts[l].Apply([]byte("first"), 5*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	target := storedLast(c.inner[l]) + 1
	gate := make(chan struct{})
	var open sync.Once
	release := func() { open.Do(func() { close(gate) }) }
	t.Cleanup(release) // before the cluster's shutdown (cleanups run last first)
	c.stores[l].set(gate, nil)
	f := c.rafts[l].Apply([]byte("x"), 10*time.Second)
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	// Both followers store the entry durably while the leader's own append is held.
	for i := range c.rafts {
		if i != l {
			waitFor(t, fmt.Sprintf("follower %d to store the entry", i), func() bool { return storedLast(c.inner[i]) >= target })
		}
	}
	if got := storedLast(c.inner[l]); got >= target {
		t.Fatalf("the leader stored %d while its append was held", got)
	}
	select {
	case err := <-done:
		t.Fatalf("the write completed (%v) before the leader's own append returned", err)
	case <-time.After(100 * time.Millisecond):
	}
	for _, log := range c.fsms[l].Logs() {
		if bytes.Equal(log, []byte("x")) {
			t.Fatal("the leader applied the entry before its own append returned")
		}
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("the write failed once the leader's append returned: %v", err)
	}
	for i := range c.fsms {
		waitFor(t, fmt.Sprintf("server %d to apply the entry", i), func() bool {
			logs := c.fsms[i].Logs()
			return len(logs) > 0 && bytes.Equal(logs[len(logs)-1], []byte("x"))
		})
	}
}

func TestZkdFailedLeaderAppend(t *testing.T) {
	c := newGatedCluster(t)
	l := c.leader(t)
	if err := c.rafts[l].Apply([]byte("first"), 5*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	target := storedLast(c.inner[l]) + 1
	broke := errors.New("disk broke")
	c.stores[l].set(nil, broke)
	if err := c.rafts[l].Apply([]byte("x"), 10*time.Second).Error(); err == nil {
		t.Fatal("a write whose leader append failed reported success")
	}
	// The cache must not serve what the store does not hold.
	var got Log
	if err := c.stores[l].GetLog(target, &got); err == nil {
		t.Fatalf("the failed leader's log serves index %d (%q) its store never held", target, got.Data)
	}
	if last := c.rafts[l].LastIndex(); last >= target {
		t.Fatalf("the failed leader's last index is %d; its store holds %d", last, target-1)
	}
	c.stores[l].set(nil, nil)
	// The cluster goes on, and every server ends with the same entries, whether or not the
	// entry the old leader failed to store was committed by the others.
	var err error
	waitFor(t, "a write after the failure", func() bool {
		nl := c.leader(t)
		err = c.rafts[nl].Apply([]byte("after"), time.Second).Error()
		return err == nil
	})
	want := c.fsms[c.leader(t)].Logs()
	for i := range c.fsms {
		waitFor(t, fmt.Sprintf("server %d to converge", i), func() bool {
			logs := c.fsms[i].Logs()
			if len(logs) != len(want) {
				return false
			}
			for k := range logs {
				if !bytes.Equal(logs[k], want[k]) {
					return false
				}
			}
			return true
		})
	}
}

func TestZkdCacheKeepsStagedEntriesThroughCompaction(t *testing.T) {
	inner := NewInmemStore()
	cache, err := NewLogCache(16, inner)
	if err != nil {
		t.Fatal(err)
	}
	var stored, staged []*Log
	for i := uint64(1); i <= 8; i++ {
		stored = append(stored, &Log{Index: i, Term: 1, Data: []byte{byte(i)}})
	}
	if err := cache.StoreLogs(stored); err != nil {
		t.Fatal(err)
	}
	for i := uint64(9); i <= 10; i++ {
		staged = append(staged, &Log{Index: i, Term: 1, Data: []byte{byte(i)}})
	}
	if !cache.StageLogs(staged) {
		t.Fatal("a batch that fits was not staged")
	}
	if err := cache.DeleteRange(1, 5); err != nil {
		t.Fatal(err)
	}
	var l Log
	if err := cache.GetLog(10, &l); err != nil || l.Data[0] != 10 {
		t.Fatalf("a staged entry was lost to the compaction of others: %v", err)
	}
	if err := cache.GetLog(3, &l); err == nil {
		t.Fatal("a deleted entry is still served")
	}
	cache.UnstageLogs(staged)
	if err := cache.GetLog(10, &l); err == nil {
		t.Fatal("an unstaged entry is still served")
	}
	if cache.StageLogs(make([]*Log, 17)) {
		t.Fatal("a batch larger than the cache was staged")
	}
}
