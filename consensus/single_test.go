package consensus

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zkd-io/zkd/jute"
)

func TestSingleNodeWriteRead(t *testing.T) {
	for _, memory := range []bool{true, false} {
		t.Run(fmt.Sprintf("memory=%v", memory), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testSingleNodeWriteRead(t, memory) })
		})
	}
}

func testSingleNodeWriteRead(t *testing.T, memory bool) {
	c := newBubbleCluster(t, 1, memory, nil)
	n := c.leader()
	ctx := ctxT(t, 10*time.Second)

	res, err := n.Propose(ctx, createReq("/a", []byte("one"), jute.ModePersistent))
	if err != nil || res.Err != nil {
		t.Fatalf("create = %v, %v; want success", err, res.Err)
	}
	if cr, ok := res.Resp.(*jute.CreateResponse); !ok || cr.Path != "/a" {
		t.Fatalf("create response = %#v", res.Resp)
	}
	// The reply goes out only after the local apply and the hook.
	if n.LastZxid() < res.Zxid || !c.recs[n.ID()].has(res.Zxid) {
		t.Fatalf("after Propose: LastZxid %d, hook saw zxid %d: %v", n.LastZxid(), res.Zxid, c.recs[n.ID()].has(res.Zxid))
	}
	if res.Events == nil || res.Events[0].Type != jute.EventNodeCreated {
		t.Fatalf("events = %v; want NodeCreated", res.Events)
	}
	data, st, ok := getData(t, n, "/a")
	if !ok || string(data) != "one" || st.Czxid != res.Zxid {
		t.Fatalf("getData(/a) = %q %+v %v", data, st, ok)
	}

	// A failed write still gets a zxid, and the tree's last zxid moves on.
	bad, err := n.Propose(ctx, setReq("/a", []byte("x"), 7))
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(bad.Err, jute.CodeBadVersion) || bad.Zxid <= res.Zxid {
		t.Fatalf("setData with bad version = zxid %d err %v; want BadVersion at a zxid > %d", bad.Zxid, bad.Err, res.Zxid)
	}
	if v := n.View(); v.Zxid() != bad.Zxid {
		t.Fatalf("view zxid = %d; want %d", v.Zxid(), bad.Zxid)
	}

	ok2, err := n.Propose(ctx, setReq("/a", []byte("two"), 0))
	if err != nil || ok2.Err != nil {
		t.Fatalf("setData = %v %v", err, ok2.Err)
	}
	if data, _, _ := getData(t, n, "/a"); string(data) != "two" {
		t.Fatalf("getData(/a) = %q; want two", data)
	}
	if err := n.Sync(ctx); err != nil {
		t.Fatalf("sync: %v", err)
	}
}

func TestProposeRejectsBadRequests(t *testing.T) { synctest.Test(t, testProposeRejectsBadRequests) }

func testProposeRejectsBadRequests(t *testing.T) {
	c := newBubbleCluster(t, 1, true, nil)
	n := c.leader()
	ctx := ctxT(t, 5*time.Second)
	for _, p := range []Proposal{
		{Op: jute.OpGetData, Body: jute.Marshal(nil, &jute.GetDataRequest{Path: "/"})},
		{Op: jute.OpCloseSession},
		{Op: jute.OpCreateSession},
		{Op: jute.OpCreate, Body: make([]byte, maxFrame)},
	} {
		if _, err := n.Propose(ctx, p); !errors.Is(err, ErrBadRequest) {
			t.Errorf("Propose(%v) error = %v; want ErrBadRequest", p.Op, err)
		}
	}
	// A body that does not decode is a failed write, decided when it is applied, as in
	// ZooKeeper: it takes a zxid and changes nothing.
	before := n.LastZxid()
	res, err := n.Propose(ctx, Proposal{Op: jute.OpCreate, Body: []byte{1, 2, 3}})
	if err != nil || res.Err != jute.CodeMarshallingError || res.Zxid <= before {
		t.Fatalf("Propose(undecodable create) = %+v, %v; want MarshallingError at a new zxid", res, err)
	}
	before = n.LastZxid()
	if _, err := n.Propose(ctx, createReq("/ok", nil, jute.ModePersistent)); err != nil {
		t.Fatal(err)
	}
	if n.LastZxid() <= before {
		t.Fatalf("zxid did not advance")
	}
}

func TestRestartKeepsWritesAndSnapshots(t *testing.T) {
	synctest.Test(t, testRestartKeepsWritesAndSnapshots)
}

func testRestartKeepsWritesAndSnapshots(t *testing.T) {
	c := newBubbleCluster(t, 1, false, func(cfg *Config) {
		cfg.SnapshotThreshold = 50
		cfg.TrailingLogs = 10
	})
	n := c.leader()
	ctx := ctxT(t, 30*time.Second)
	var last int64
	for i := range 120 {
		res, err := n.Propose(ctx, createReq(fmt.Sprintf("/k%03d", i), []byte{byte(i)}, jute.ModePersistent))
		if err != nil || res.Err != nil {
			t.Fatalf("create %d: %v %v", i, err, res.Err)
		}
		last = res.Zxid
		if i == 70 {
			if err := n.Snapshot(); err != nil {
				t.Fatalf("snapshot: %v", err)
			}
		}
	}
	before := snapshotBytes(t, n)
	c.stop("n1")
	c.start("n1")
	n = c.leader()
	// A restarted node applies the log after the snapshot once it commits as leader again.
	if err := n.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if n.LastZxid() < last {
		t.Fatalf("after restart LastZxid = %d; want >= %d", n.LastZxid(), last)
	}
	for i := range 120 {
		if d, _, ok := getData(t, n, fmt.Sprintf("/k%03d", i)); !ok || !bytes.Equal(d, []byte{byte(i)}) {
			t.Fatalf("/k%03d after restart = %v %v", i, d, ok)
		}
	}
	if after := snapshotBytes(t, n); !bytes.Equal(before, after) {
		t.Fatalf("state after restart differs (%d vs %d bytes)", len(after), len(before))
	}
}

// A node bootstrapped alone is its only voter, so by default it waits only standaloneHeartbeat
// before electing itself after a restart, its lease is the whole heartbeat (raft's leader checks
// it that often, and it meets it alone) and it re-evaluates its serving signal rarely; members of
// a cluster, and nodes waiting to join one, wait half a tickTime (2s unless set), at least 300ms;
// an explicit timeout is kept as given.
func TestStandaloneDefaultsToShortHeartbeat(t *testing.T) {
	const lan = 300 * time.Millisecond
	for _, tc := range []struct {
		name                     string
		cfg                      Config
		want, lease, servingTick time.Duration
	}{
		{"standalone", Config{}, standaloneHeartbeat, standaloneHeartbeat, 100 * time.Millisecond},
		{"joining", Config{NoBootstrap: true}, time.Second, time.Second / 2, time.Second / 4},
		{"cluster", Config{Peers: []Peer{{ID: "1", Addr: "a:1"}, {ID: "2", Addr: "b:1"}, {ID: "3", Addr: "c:1"}}}, time.Second, time.Second / 2, time.Second / 4},
		{"cluster, tickTime 3s", Config{TickTime: 3 * time.Second, Peers: []Peer{{ID: "1", Addr: "a:1"}, {ID: "2", Addr: "b:1"}}}, 1500 * time.Millisecond, 750 * time.Millisecond, 375 * time.Millisecond},
		{"cluster, short tickTime", Config{TickTime: 200 * time.Millisecond, Peers: []Peer{{ID: "1", Addr: "a:1"}, {ID: "2", Addr: "b:1"}}}, lan, lan / 2, lan / 4},
		{"explicit", Config{HeartbeatTimeout: time.Second}, time.Second, time.Second / 2, time.Second / 4},
	} {
		c := tc.cfg.withDefaults()
		if c.HeartbeatTimeout != tc.want || c.ElectionTimeout != tc.want || c.LeaderLeaseTimeout != tc.lease || c.servingTick != tc.servingTick {
			t.Errorf("%s: heartbeat %v, election %v, lease %v, serving tick %v; want %v, %v, %v, %v", tc.name,
				c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout, c.servingTick, tc.want, tc.want, tc.lease, tc.servingTick)
		}
	}
}
