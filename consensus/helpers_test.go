package consensus

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/zkd-io/zkd/internal/storage"
	"github.com/zkd-io/zkd/internal/testkit/memnet"
	"github.com/zkd-io/zkd/internal/testkit/raftnet"
	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/znode"
)

var openACL = []jute.ACL{{Perms: jute.PermAll, ID: jute.Id{Scheme: "world", ID: "anyone"}}}

func testLogger(t testing.TB) *slog.Logger {
	level := slog.LevelError + 4 // quiet unless asked: raft logs expected failures as errors
	if os.Getenv("ZKD_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: level}))
}

func createReq(path string, data []byte, mode jute.CreateMode) Proposal {
	return Proposal{Op: jute.OpCreate, Body: jute.Marshal(nil, &jute.CreateRequest{Path: path, Data: data, ACL: openACL, Flags: mode})}
}

func setReq(path string, data []byte, version int32) Proposal {
	return Proposal{Op: jute.OpSetData, Body: jute.Marshal(nil, &jute.SetDataRequest{Path: path, Data: data, Version: version})}
}

func deleteReq(path string, version int32) Proposal {
	return Proposal{Op: jute.OpDelete, Body: jute.Marshal(nil, &jute.DeleteRequest{Path: path, Version: version})}
}

// getData reads path from n's current view; ok is false when it does not exist.
func getData(t testing.TB, n *Node, path string) ([]byte, jute.Stat, bool) {
	t.Helper()
	r, err := n.View().Read(0, nil, jute.OpGetData, &jute.GetDataRequest{Path: path})
	if err != nil {
		return nil, jute.Stat{}, false
	}
	resp := r.(*jute.GetDataResponse)
	return resp.Data, resp.Stat, true
}

func snapshotBytes(t testing.TB, n *Node) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := storage.WriteSnapshot(&b, n.View()); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return b.Bytes()
}

// eventually polls cond until it holds or the deadline passes. Inside a synctest bubble (a
// newBubbleCluster test) the sleep and the deadline are the bubble's fake clock: the sleep ends
// only once every goroutine of the bubble waits, so no real time passes, but a test whose own
// goroutines never wait (a writer that never pauses) would freeze the clock; wait on those
// goroutines instead (see writer.waitAcked).
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond) // polling: no event exists for these conditions
	}
}

// applyRecorder records the apply hook's calls on one node.
type applyRecorder struct {
	mu     sync.Mutex
	zxids  []int64
	events []znode.Event
}

func (r *applyRecorder) hook(zxid int64, res *znode.Result, _ *znode.View) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.zxids = append(r.zxids, zxid)
	r.events = append(r.events, res.Events...)
}

func (r *applyRecorder) count(typ jute.EventType, path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := 0
	for _, e := range r.events {
		if e.Type == typ && e.Path == path {
			c++
		}
	}
	return c
}

func (r *applyRecorder) has(zxid int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.zxids, zxid)
}

// cluster is an in-process cluster of nodes on real loopback TCP through a raftnet.Fabric, each
// with its own bolt store in a temp dir (or in memory). A cluster made by newBubbleCluster runs
// on a memnet.Net instead, inside the caller's testing/synctest bubble.
type cluster struct {
	t      testing.TB
	fab    *raftnet.Fabric // nil in a bubble
	mem    *memnet.Net     // nil outside a bubble
	ids    []string
	addrs  map[string]string
	dirs   map[string]string
	nodes  map[string]*Node
	recs   map[string]*applyRecorder
	tweak  func(*Config)
	memory bool
}

func newCluster(t testing.TB, size int, memory bool, tweak func(*Config)) *cluster {
	t.Helper()
	c := &cluster{t: t, fab: raftnet.New()}
	c.init(size, memory, tweak)
	return c
}

// newBubbleCluster is newCluster on an in-memory network, for a test running inside a
// testing/synctest bubble (synctest.Test): its nodes' clocks are the bubble's fake clock, and
// it must be shut down (as Cleanup does) before the bubble ends.
func newBubbleCluster(t *testing.T, size int, memory bool, tweak func(*Config)) *cluster {
	t.Helper()
	c := &cluster{t: t, mem: memnet.New()}
	c.init(size, memory, tweak)
	return c
}

// faults is the fault injection that raftnet.Fabric and memnet.Net have in common.
type faults interface {
	Cut(a, b string)
	CutOneWay(from, to string)
	Partition(group, all []string)
	Isolate(node string, all []string)
	Delay(a, b string, d time.Duration)
	Heal()
	Dropped() int
}

// net returns the cluster's network, to inject faults.
func (c *cluster) net() faults {
	if c.mem != nil {
		return c.mem
	}
	return c.fab
}

// network returns node id's view of the cluster's network.
func (c *cluster) network(id string) Network {
	if c.mem != nil {
		return c.mem.Node(id)
	}
	return c.fab.Node(id)
}

func (c *cluster) init(size int, memory bool, tweak func(*Config)) {
	t := c.t
	t.Helper()
	c.addrs, c.dirs, c.nodes, c.recs = map[string]string{}, map[string]string{}, map[string]*Node{}, map[string]*applyRecorder{}
	c.tweak, c.memory = tweak, memory
	lns := map[string]net.Listener{}
	for i := 1; i <= size; i++ {
		id := fmt.Sprintf("n%d", i)
		ln, err := c.network(id).Listen("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		c.ids = append(c.ids, id)
		c.addrs[id] = ln.Addr().String()
		if !memory {
			c.dirs[id] = t.TempDir()
		}
		lns[id] = ln
	}
	for _, id := range c.ids {
		c.startWith(id, lns[id])
	}
	t.Cleanup(c.shutdown)
}

func (c *cluster) peers() []Peer {
	var ps []Peer
	for _, id := range c.ids {
		ps = append(ps, Peer{ID: id, Addr: c.addrs[id]})
	}
	return ps
}

func (c *cluster) config(id string, ln net.Listener) Config {
	rec := &applyRecorder{}
	c.recs[id] = rec
	cfg := Config{
		ID:       id,
		Dir:      c.dirs[id],
		Listener: ln,
		Network:  c.network(id),
		Peers:    c.peers(),
		Logger:   testLogger(c.t).With("test", c.t.Name()),
		OnApply:  rec.hook,
		TickTime: 200 * time.Millisecond,
		// Twice the production default: the test machine is shared and -race is slow, and a
		// spurious election fails tests that expect a stable leader.
		HeartbeatTimeout: 600 * time.Millisecond,
	}
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	return cfg
}

func (c *cluster) startWith(id string, ln net.Listener) {
	c.t.Helper()
	n, err := New(c.config(id, ln))
	if err != nil {
		c.t.Fatalf("start %s: %v", id, err)
	}
	c.nodes[id] = n
}

// start restarts a stopped node on its old address and data dir.
func (c *cluster) start(id string) {
	c.t.Helper()
	var ln net.Listener
	var err error
	deadline := time.Now().Add(5 * time.Second)
	for {
		ln, err = c.network(id).Listen(c.addrs[id])
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // the port may linger briefly after close
	}
	if err != nil {
		c.t.Fatalf("relisten %s: %v", id, err)
	}
	c.startWith(id, ln)
}

func (c *cluster) stop(id string) {
	c.t.Helper()
	if n := c.nodes[id]; n != nil {
		if err := n.Shutdown(); err != nil {
			c.t.Errorf("shutdown %s: %v", id, err)
		}
		delete(c.nodes, id)
	}
}

func (c *cluster) shutdown() {
	for _, id := range c.ids {
		c.stop(id)
	}
}

func (c *cluster) running() []*Node {
	var ns []*Node
	for _, id := range c.ids {
		if n := c.nodes[id]; n != nil {
			ns = append(ns, n)
		}
	}
	return ns
}

// leader waits for an established leader among the running nodes in among (all running if nil).
func (c *cluster) leader(among ...string) *Node {
	c.t.Helper()
	var l *Node
	eventually(c.t, 10*time.Second, "a leader", func() bool {
		for _, n := range c.running() {
			if len(among) > 0 && !slices.Contains(among, n.ID()) {
				continue
			}
			if n.IsLeader() {
				l = n
				return true
			}
		}
		return false
	})
	return l
}

func (c *cluster) followers() []*Node {
	var fs []*Node
	for _, n := range c.running() {
		if !n.IsLeader() {
			fs = append(fs, n)
		}
	}
	return fs
}

// converge waits until every running node applied the same zxid and holds identical snapshot
// bytes.
func (c *cluster) converge() int64 {
	c.t.Helper()
	var zxid int64
	eventually(c.t, 15*time.Second, "convergence", func() bool {
		ns := c.running()
		for _, n := range ns[1:] {
			if n.LastZxid() != ns[0].LastZxid() {
				return false
			}
		}
		zxid = ns[0].LastZxid()
		return true
	})
	ns := c.running()
	want := snapshotBytes(c.t, ns[0])
	for _, n := range ns[1:] {
		if got := snapshotBytes(c.t, n); !bytes.Equal(got, want) {
			c.t.Fatalf("snapshot of %s differs from %s at zxid %d (%d vs %d bytes)", n.ID(), ns[0].ID(), zxid, len(got), len(want))
		}
	}
	return zxid
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}
