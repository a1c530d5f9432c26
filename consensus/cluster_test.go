package consensus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/znode"
)

func TestClusterForwardingAndReadYourWrites(t *testing.T) {
	synctest.Test(t, testClusterForwardingAndReadYourWrites)
}

func testClusterForwardingAndReadYourWrites(t *testing.T) {
	c := newBubbleCluster(t, 3, false, nil)
	leader := c.leader()
	ctx := ctxT(t, 20*time.Second)
	for _, f := range c.followers() {
		for i := range 20 {
			path := fmt.Sprintf("/%s-%d", f.ID(), i)
			res, err := f.Propose(ctx, createReq(path, []byte(path), jute.ModePersistent))
			if err != nil || res.Err != nil {
				t.Fatalf("create %s via follower %s: %v %v", path, f.ID(), err, res.Err)
			}
			// The follower answers only after its own FSM applied the write.
			if d, st, ok := getData(t, f, path); !ok || string(d) != path || st.Czxid != res.Zxid {
				t.Fatalf("follower %s does not see its own write %s: %q %v", f.ID(), path, d, ok)
			}
			if !c.recs[f.ID()].has(res.Zxid) {
				t.Fatalf("apply hook on %s missed zxid %d", f.ID(), res.Zxid)
			}
		}
	}
	if got := leader.Stats().Forwarded; got != 0 {
		t.Errorf("leader forwarded %d proposals; want 0", got)
	}
	for _, f := range c.followers() {
		if got := f.Stats().Forwarded; got < 20 {
			t.Errorf("follower %s forwarded %d proposals; want >= 20", f.ID(), got)
		}
	}
	c.converge()
}

func TestSessionOrderPipelined(t *testing.T) { synctest.Test(t, testSessionOrderPipelined) }

func testSessionOrderPipelined(t *testing.T) {
	c := newBubbleCluster(t, 3, true, nil)
	c.leader()
	f := c.followers()[0]
	ctx := ctxT(t, 20*time.Second)
	s, attach, err := f.CreateSession(ctx, 10000)
	if err != nil {
		t.Fatal(err)
	}
	// One session pipelines 200 ordered writes: Start in order, wait afterwards.
	var pend []*Pending
	for i := range 200 {
		p := setReq("/", []byte{byte(i)}, int32(i))
		p.Session, p.Attach, p.Seq = s.ID, attach, uint64(i+1)
		pd, err := f.Start(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		pend = append(pend, pd)
	}
	var last int64
	for i, pd := range pend {
		res, err := pd.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// setData with version i succeeds only if the writes applied in Start order.
		if res.Err != nil || res.Zxid <= last {
			t.Fatalf("write %d: err %v zxid %d (previous %d)", i, res.Err, res.Zxid, last)
		}
		last = res.Zxid
	}
}

func TestSyncOnFollower(t *testing.T) { synctest.Test(t, testSyncOnFollower) }

func testSyncOnFollower(t *testing.T) {
	c := newBubbleCluster(t, 3, true, func(cfg *Config) { cfg.CommitTimeout = 200 * time.Millisecond })
	leader := c.leader()
	ctx := ctxT(t, 20*time.Second)
	for i := range 10 {
		res, err := leader.Propose(ctx, createReq(fmt.Sprintf("/s%d", i), nil, jute.ModePersistent))
		if err != nil || res.Err != nil {
			t.Fatal(err, res.Err)
		}
		for _, f := range c.followers() {
			if err := f.Sync(ctx); err != nil {
				t.Fatalf("sync on %s: %v", f.ID(), err)
			}
			if f.LastZxid() < res.Zxid {
				t.Fatalf("after sync %s is at %d; the write was %d", f.ID(), f.LastZxid(), res.Zxid)
			}
		}
	}
}

// writer proposes creates through node until stopped and records the acknowledged ones.
type writer struct {
	mu      sync.Mutex
	changed sync.Cond // L is &mu; broadcast on each acknowledged write
	acked   map[string]int64
	fails   int
}

func newWriter() *writer {
	w := &writer{acked: map[string]int64{}}
	w.changed.L = &w.mu
	return w
}

func (w *writer) run(t *testing.T, c *cluster, via func() *Node, prefix string, stop <-chan struct{}) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		n := via()
		if n == nil {
			continue
		}
		path := fmt.Sprintf("/%s%06d", prefix, i)
		ctx := ctxT(t, 10*time.Second)
		res, err := n.Propose(ctx, createReq(path, nil, jute.ModePersistent))
		w.mu.Lock()
		if err == nil && res.Err == nil {
			w.acked[path] = res.Zxid
			w.changed.Broadcast()
		} else {
			w.fails++
		}
		w.mu.Unlock()
		// A client's think time. In a synctest bubble the fake clock moves only while every
		// goroutine waits: writers that never paused would freeze it, and with it every timer
		// (elections, retry pauses) that another writer waits for.
		time.Sleep(time.Millisecond)
	}
}

// count returns how many writes were acknowledged.
func (w *writer) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// waitAcked waits until n writes were acknowledged, and fails the test if that takes longer
// than d. It waits for the writer, not for the clock: in a synctest bubble the fake clock stands
// still while writes keep some goroutine busy, so a polling sleep would not return.
func (w *writer) waitAcked(t *testing.T, n int, d time.Duration) {
	t.Helper()
	expired := false
	tm := time.AfterFunc(d, func() {
		w.mu.Lock()
		expired = true
		w.changed.Broadcast()
		w.mu.Unlock()
	})
	defer tm.Stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.acked) < n {
		if expired {
			t.Fatalf("%d writes acknowledged after %v; want %d", len(w.acked), d, n)
		}
		w.changed.Wait()
	}
}

func TestLeaderKillNoAcknowledgedWriteLost(t *testing.T) {
	synctest.Test(t, testLeaderKillNoAcknowledgedWriteLost)
}

func testLeaderKillNoAcknowledgedWriteLost(t *testing.T) {
	c := newBubbleCluster(t, 3, false, nil)
	old := c.leader()
	var mu sync.Mutex
	targets := map[string]*Node{}
	for _, n := range c.running() {
		targets[n.ID()] = n
	}
	via := func(id string) func() *Node {
		return func() *Node { mu.Lock(); defer mu.Unlock(); return targets[id] }
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	ws := map[string]*writer{}
	for _, id := range c.ids {
		if id == old.ID() {
			continue
		}
		w := newWriter()
		ws[id] = w
		wg.Go(func() { w.run(t, c, via(id), id+"-", stop) })
	}
	for _, w := range ws {
		w.waitAcked(t, 20, 10*time.Second)
	}
	killed := time.Now()
	c.stop(old.ID())
	// Each writer gets 20 more writes acknowledged under the new leader.
	for _, w := range ws {
		w.waitAcked(t, w.count()+20, 10*time.Second)
	}
	resumed := time.Since(killed)
	newLeader := c.leader()
	t.Logf("leader %s killed; %s leads; 20 more writes each after %v", old.ID(), newLeader.ID(), resumed)
	close(stop)
	wg.Wait()
	c.converge()
	for id, w := range ws {
		for path, zxid := range w.acked {
			for _, n := range c.running() {
				if _, st, ok := getData(t, n, path); !ok || st.Czxid != zxid {
					t.Fatalf("acknowledged %s (zxid %d, via %s) missing or different on %s: %+v %v", path, zxid, id, n.ID(), st, ok)
				}
			}
		}
		t.Logf("writer via %s: %d acknowledged, %d failed", id, len(w.acked), w.fails)
	}
	// The old leader rejoins and converges.
	c.start(old.ID())
	c.converge()
}

func TestMinorityPartitionCannotCommit(t *testing.T) {
	synctest.Test(t, testMinorityPartitionCannotCommit)
}

func testMinorityPartitionCannotCommit(t *testing.T) {
	c := newBubbleCluster(t, 3, false, func(cfg *Config) { cfg.HoldTimeout = 500 * time.Millisecond })
	leader := c.leader()
	ctx := ctxT(t, 30*time.Second)
	if _, err := leader.Propose(ctx, createReq("/before", nil, jute.ModePersistent)); err != nil {
		t.Fatal(err)
	}
	c.converge()

	// Cut the leader off: it cannot commit; the majority elects a new leader and continues.
	c.net().Isolate(leader.ID(), c.ids)
	res, err := leader.Propose(ctx, createReq("/minority", nil, jute.ModePersistent))
	if err == nil {
		t.Fatalf("isolated old leader committed a write: %+v", res)
	}
	if !errors.Is(err, ErrUnknownOutcome) && !errors.Is(err, ErrNoLeader) {
		t.Fatalf("isolated leader error = %v; want ErrUnknownOutcome or ErrNoLeader", err)
	}
	// Proposals queued behind an unapplied one are settled too, each with an error, and free
	// their slots.
	var pds []*Pending
	for i := range 20 {
		pd, err := leader.Start(ctx, createReq(fmt.Sprintf("/minority%d", i), nil, jute.ModePersistent))
		if err == nil {
			pds = append(pds, pd)
		}
	}
	for i, pd := range pds {
		if res, err := pd.Wait(ctx); err == nil {
			t.Fatalf("isolated old leader committed queued write %d: %+v", i, res)
		}
		select {
		case <-pd.Done():
		case <-ctx.Done():
			t.Fatalf("queued write %d never settled", i)
		}
	}
	if got := leader.Stats().Outstanding; got != 0 {
		t.Fatalf("%d proposals still outstanding on the isolated node", got)
	}
	var others []string
	for _, id := range c.ids {
		if id != leader.ID() {
			others = append(others, id)
		}
	}
	nl := c.leader(others...)
	for i := range 20 {
		res, err := nl.Propose(ctx, createReq(fmt.Sprintf("/majority%d", i), nil, jute.ModePersistent))
		if err != nil || res.Err != nil {
			t.Fatalf("majority write %d: %v %v", i, err, res.Err)
		}
	}
	eventually(t, 5*time.Second, "the isolated node to stop serving", func() bool { return !leader.Serving() })
	if _, _, ok := getData(t, leader, "/minority"); ok {
		t.Fatalf("/minority applied on the isolated node")
	}

	c.net().Heal()
	c.converge()
	for _, n := range c.running() {
		if _, _, ok := getData(t, n, "/minority"); ok {
			t.Fatalf("/minority exists on %s after healing", n.ID())
		}
		if _, _, ok := getData(t, n, "/majority19"); !ok {
			t.Fatalf("/majority19 missing on %s after healing", n.ID())
		}
	}
	eventually(t, 5*time.Second, "all nodes serving after healing", func() bool {
		for _, n := range c.running() {
			if !n.Serving() {
				return false
			}
		}
		return true
	})

	// Healing cut the old leader's unreplicated suffix from its log; the log store must reopen
	// after that truncation (raft-wal before v0.4.1 sealed the tail segment without an index and
	// then could not read it back).
	c.stop(leader.ID())
	c.start(leader.ID())
	c.converge()
	if _, _, ok := getData(t, c.nodes[leader.ID()], "/minority"); ok {
		t.Fatalf("/minority reappeared on %s after a restart", leader.ID())
	}
	if _, _, ok := getData(t, c.nodes[leader.ID()], "/majority19"); !ok {
		t.Fatalf("/majority19 missing on %s after a restart", leader.ID())
	}
}

func TestFollowerCatchesUpBySnapshot(t *testing.T) { synctest.Test(t, testFollowerCatchesUpBySnapshot) }

func testFollowerCatchesUpBySnapshot(t *testing.T) {
	var restored sync.Map
	c := newBubbleCluster(t, 3, false, func(cfg *Config) {
		cfg.SnapshotThreshold = 100
		cfg.TrailingLogs = 20
		// Small segments, so truncation after the snapshot really deletes the early entries
		// (the WAL drops whole segments and still serves what a kept segment holds).
		cfg.walSegmentSize = 4 << 10
		id := cfg.ID
		cfg.OnRestore = func(v *znode.View) { restored.Store(id, v.Zxid()) }
	})
	leader := c.leader()
	lag := c.followers()[0]
	c.stop(lag.ID())
	ctx := ctxT(t, 30*time.Second)
	// 250 writes, not a multiple of SnapshotThreshold: the node asks for a snapshot every 100
	// operations, and raft names a snapshot by term, index and millisecond, so on the bubble's
	// clock (which stands still during file I/O) one asked for at the index of the explicit
	// Snapshot below would take its name.
	for i := range 250 {
		res, err := leader.Propose(ctx, createReq(fmt.Sprintf("/c%03d", i), []byte("x"), jute.ModePersistent))
		if err != nil || res.Err != nil {
			t.Fatalf("write %d: %v %v", i, err, res.Err)
		}
	}
	if err := leader.Snapshot(); err != nil {
		t.Fatal(err)
	}
	c.start(lag.ID())
	zxid := c.converge()
	if _, ok := restored.Load(lag.ID()); !ok {
		t.Fatalf("%s caught up to %d without installing a snapshot", lag.ID(), zxid)
	}
	// mntr's snap_count: the snapshots the leader sent (it still leads unless it was replaced).
	if c.leader() == leader && leader.metrics.snapSyncs.Total() < 1 {
		t.Errorf("the leader sent a snapshot but counted %d", leader.metrics.snapSyncs.Total())
	}
}

func TestFiveNodesSurviveTwoFailuresAndSplit(t *testing.T) {
	synctest.Test(t, testFiveNodesSurviveTwoFailuresAndSplit)
}

func testFiveNodesSurviveTwoFailuresAndSplit(t *testing.T) {
	c := newBubbleCluster(t, 5, true, nil)
	leader := c.leader()
	ctx := ctxT(t, 30*time.Second)
	// Kill the leader and one follower: three of five still commit.
	c.stop(leader.ID())
	c.stop(c.followers()[0].ID())
	nl := c.leader()
	for i := range 10 {
		if res, err := nl.Propose(ctx, createReq(fmt.Sprintf("/five%d", i), nil, jute.ModePersistent)); err != nil || res.Err != nil {
			t.Fatalf("write with 3 of 5: %v %v", err, res.Err)
		}
	}
	for _, id := range c.ids {
		if c.nodes[id] == nil {
			c.start(id)
		}
	}
	c.converge()
	// Split 2 | 3: only the three commit.
	minority := []string{c.ids[0], c.ids[1]}
	c.net().Partition(minority, c.ids)
	major := c.leader(c.ids[2:]...)
	if res, err := major.Propose(ctx, createReq("/split", nil, jute.ModePersistent)); err != nil || res.Err != nil {
		t.Fatalf("majority write: %v %v", err, res.Err)
	}
	synctest.Wait() // what was sent is delivered and applied: a minority node that could hear it has it
	for _, id := range minority {
		if _, _, ok := getData(t, c.nodes[id], "/split"); ok {
			t.Fatalf("minority node %s applied a write of the majority while cut off", id)
		}
	}
	c.net().Heal()
	c.converge()
}

func TestSlowFollowerDoesNotSlowCommits(t *testing.T) {
	synctest.Test(t, testSlowFollowerDoesNotSlowCommits)
}

func testSlowFollowerDoesNotSlowCommits(t *testing.T) {
	c := newBubbleCluster(t, 3, true, nil)
	leader := c.leader()
	slow := c.followers()[0]
	c.net().Delay(leader.ID(), slow.ID(), 100*time.Millisecond)
	ctx := ctxT(t, 30*time.Second)
	start := time.Now()
	var last int64
	for i := range 20 {
		res, err := leader.Propose(ctx, createReq(fmt.Sprintf("/slow%d", i), nil, jute.ModePersistent))
		if err != nil || res.Err != nil {
			t.Fatalf("write %d: %v %v", i, err, res.Err)
		}
		last = res.Zxid
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("20 writes took %v with one follower 100ms away; the quorum should not wait for it", took)
	}
	if slow.LastZxid() >= last {
		t.Logf("the slow follower kept up (%d >= %d)", slow.LastZxid(), last)
	}
	c.net().Heal()
	c.converge()
}

func TestOneWayPartition(t *testing.T) { synctest.Test(t, testOneWayPartition) }

func testOneWayPartition(t *testing.T) {
	c := newBubbleCluster(t, 3, true, nil)
	leader := c.leader()
	f := c.followers()[0]
	// The leader can no longer reach f, though f can still dial the leader: f hears nothing, the
	// other follower keeps the quorum, and pre-vote keeps f from disrupting it.
	c.net().CutOneWay(leader.ID(), f.ID())
	ctx := ctxT(t, 30*time.Second)
	for i := range 20 {
		res, err := c.leader().Propose(ctx, createReq(fmt.Sprintf("/oneway%d", i), nil, jute.ModePersistent))
		if err != nil || res.Err != nil {
			t.Fatalf("write %d during a one-way cut: %v %v", i, err, res.Err)
		}
	}
	eventually(t, 5*time.Second, "the cut-off follower to stop serving", func() bool { return !f.Serving() })
	c.net().Heal()
	c.converge()
	eventually(t, 5*time.Second, "the follower to serve again", f.Serving)
}

// TestForwardedCommitIsRelayed checks that a follower answering a forwarded write does not wait
// for the leader's next AppendEntries to learn that the write committed: with a CommitTimeout of
// a second, each write would otherwise take a second or more.
func TestForwardedCommitIsRelayed(t *testing.T) { synctest.Test(t, testForwardedCommitIsRelayed) }

func testForwardedCommitIsRelayed(t *testing.T) {
	c := newBubbleCluster(t, 3, false, func(cfg *Config) { cfg.CommitTimeout = time.Second })
	c.leader()
	f := c.followers()[0]
	ctx := ctxT(t, 60*time.Second)
	const writes = 10
	start := time.Now()
	for i := range writes {
		res, err := f.Propose(ctx, createReq(fmt.Sprintf("/relay%d", i), nil, jute.ModePersistent))
		if err != nil || res.Err != nil {
			t.Fatalf("write %d: %v %v", i, err, res.Err)
		}
	}
	took := time.Since(start)
	st := f.Stats()
	t.Logf("%d forwarded writes in %v; relayed %d, waited for the entry %d, refused %d", writes, took, st.Relayed, st.RelayWaited, st.RelayRefused)
	if st.Relayed == 0 {
		t.Fatal("no commit was relayed")
	}
	if took > writes*time.Second/2 {
		t.Fatalf("%d forwarded writes took %v: the follower waited for the leader's idle AppendEntries", writes, took)
	}
	c.converge()
}

// TestForwarderHearsNoAnnouncementOfItsWrite checks that the leader does not announce a commit
// to the follower whose forwarded write it was (the answer to the forward carried the same
// commit), while the other follower is still told of each write well within CommitTimeout.
func TestForwarderHearsNoAnnouncementOfItsWrite(t *testing.T) {
	synctest.Test(t, testForwarderHearsNoAnnouncementOfItsWrite)
}

func testForwarderHearsNoAnnouncementOfItsWrite(t *testing.T) {
	c := newBubbleCluster(t, 3, false, func(cfg *Config) { cfg.CommitTimeout = time.Second })
	c.leader()
	fs := c.followers()
	f, g := fs[0], fs[1]
	ctx := ctxT(t, 60*time.Second)
	const writes = 12
	heardF, heardG := f.Stats().Heard, g.Stats().Heard
	for i := range writes {
		res, err := f.Propose(ctx, createReq(fmt.Sprintf("/told%d", i), nil, jute.ModePersistent))
		if err != nil || res.Err != nil {
			t.Fatalf("write %d: %v %v", i, err, res.Err)
		}
		wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		err = g.WaitApplied(wctx, res.Zxid)
		cancel()
		if err != nil {
			t.Fatalf("write %d not applied on the other follower within 500ms: %v", i, err)
		}
	}
	c.converge()
	df, dg := f.Stats().Heard-heardF, g.Stats().Heard-heardG
	t.Logf("announcements heard: forwarding follower %d, other follower %d, of %d writes", df, dg, writes)
	if dg == 0 {
		t.Fatal("the other follower heard no announcement")
	}
	if df > writes/4 {
		t.Fatalf("the forwarding follower heard %d announcements of its own %d writes", df, writes)
	}
}

// TestLeaderAnnouncesCommits checks that followers learn the leader's commits without waiting
// for its idle AppendEntries (CommitTimeout is a second here): each write made on the leader
// must be applied on both followers well within that. The followers themselves announce nothing.
func TestLeaderAnnouncesCommits(t *testing.T) { synctest.Test(t, testLeaderAnnouncesCommits) }

func testLeaderAnnouncesCommits(t *testing.T) {
	c := newBubbleCluster(t, 3, false, func(cfg *Config) { cfg.CommitTimeout = time.Second })
	l := c.leader()
	ctx := ctxT(t, 60*time.Second)
	for i := range 10 {
		res, err := l.Propose(ctx, createReq(fmt.Sprintf("/ann%d", i), nil, jute.ModePersistent))
		if err != nil || res.Err != nil {
			t.Fatalf("write %d: %v %v", i, err, res.Err)
		}
		for _, f := range c.followers() {
			wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			err := f.WaitApplied(wctx, res.Zxid)
			cancel()
			if err != nil {
				t.Fatalf("write %d not applied on %s within 500ms: %v", i, f.ID(), err)
			}
		}
	}
	// A burst: commits offered while an announcement is still being sent must follow it.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var last int64
	for i := range 32 {
		wg.Go(func() {
			res, err := l.Propose(ctx, createReq(fmt.Sprintf("/burst%d", i), nil, jute.ModePersistent))
			if err != nil || res.Err != nil {
				t.Errorf("burst write %d: %v %v", i, err, res.Err)
				return
			}
			mu.Lock()
			last = max(last, res.Zxid)
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, f := range c.followers() {
		wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		err := f.WaitApplied(wctx, last)
		cancel()
		if err != nil {
			t.Fatalf("the burst's last write not applied on %s within 500ms: %v", f.ID(), err)
		}
	}
	if got := l.Stats().Announced; got == 0 {
		t.Fatal("the leader announced no commit")
	}
	c.converge()
	// A follower applied every write too, but only a leader offers its announcer a commit: a
	// follower's announcer would wake for each batch only to find it does not lead.
	for _, f := range c.followers() {
		if index, _, _ := f.announce.loadExcept(); index != 0 {
			t.Errorf("follower %s offered its announcer commit %d", f.ID(), index)
		}
	}
}
