package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/zkd-io/zkd/internal/testkit"
	"github.com/zkd-io/zkd/jute"
)

// newTestFloor makes a floor server with a small log, and a loopback listener for it.
func newTestFloor(t *testing.T) (*floorServer, net.Listener) {
	t.Helper()
	s, err := newFloorServer(t.TempDir(), 8<<20)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return s, ln
}

// startTestFloor runs a floor server with a small log on a loopback port until the test ends.
func startTestFloor(t *testing.T) (*floorServer, string) {
	t.Helper()
	s, ln := newTestFloor(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		_ = s.log.Close()
	})
	return s, ln.Addr().String()
}

// Every zkbench workload runs against the floor server without an error, and the log file,
// written from its start again whenever it fills, keeps its size.
func TestFloorRunsEveryWorkload(t *testing.T) {
	s, addr := startTestFloor(t)
	results, err := smokeAll(context.Background(), []string{addr}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) < len(workloadNames()) {
		t.Fatalf("%d results for %d workloads", len(results), len(workloadNames()))
	}
	st, err := os.Stat(filepath.Join(filepath.Dir(s.log.Name()), "floor.log"))
	if err != nil || st.Size() != 8<<20 {
		t.Fatalf("log file: %v, %d bytes", err, st.Size())
	}
}

// The floor server answers as ZooKeeper does where the workloads depend on it: sequential names
// from the parent's cversion, a multi that fails changes nothing, a watch fires once.
func TestFloorSemantics(t *testing.T) {
	_, addr := startTestFloor(t)
	c, err := dialClient(addr, 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.close() }()
	w, err := dialClient(addr, 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.close() }()
	if err := create(c, "/a", []byte("x"), jute.ModePersistent); err != nil {
		t.Fatal(err)
	}
	r := c.call(jute.OpCreate, &jute.CreateRequest{Path: "/a/s-", ACL: openACL, Flags: jute.ModeEphemeralSequential})
	if err := r.result(); err != nil || r.body.(*jute.CreateResponse).Path != "/a/s-0000000000" {
		t.Fatalf("sequential create: %v %+v", err, r.body)
	}
	bad := &jute.MultiRequest{Ops: []jute.MultiOp{
		{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: "/b", ACL: openACL}},
		{Type: jute.OpSetData, Req: &jute.SetDataRequest{Path: "/a", Data: []byte("y"), Version: 7}},
	}}
	events := make(chan jute.WatcherEvent, 4)
	x, err := dialClient(addr, 10*time.Second, func(e jute.WatcherEvent) { events <- e })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = x.close() }()
	if err := x.call(jute.OpExists, &jute.ExistsRequest{Path: "/b", Watch: true}).result(); !errors.Is(err, jute.CodeNoNode) {
		t.Fatalf("exists /b: %v", err)
	}
	if err := c.call(jute.OpMulti, bad).multiResult(); !errors.Is(err, jute.CodeBadVersion) {
		t.Fatalf("multi with a bad version: %v", err)
	}
	// The failed multi changed and fired nothing. An event would come before the reply to a
	// request x sends after it.
	if err := x.call(jute.OpExists, &jute.ExistsRequest{Path: "/b", Watch: true}).result(); !errors.Is(err, jute.CodeNoNode) {
		t.Fatalf("/b after the failed multi: %v", err)
	}
	select {
	case e := <-events:
		t.Fatalf("the failed multi fired %+v", e)
	default:
	}
	if err := create(c, "/b", nil, jute.ModePersistent); err != nil {
		t.Fatal(err)
	}
	if e := <-events; e.Type != jute.EventNodeCreated || e.Path != "/b" {
		t.Fatalf("event %+v", e)
	}
	if err := c.call(jute.OpDelete, &jute.DeleteRequest{Path: "/b", Version: -1}).result(); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-events:
		t.Fatalf("a second event %+v: the watch was set once", e)
	default:
	}
	gone := w.waitFor("/a")
	if err := w.call(jute.OpGetData, &jute.GetDataRequest{Path: "/a", Watch: true}).result(); err != nil {
		t.Fatal(err)
	}
	if err := c.call(jute.OpSetData, &jute.SetDataRequest{Path: "/a", Data: []byte("z"), Version: -1}).result(); err != nil {
		t.Fatal(err)
	}
	<-gone
	r = w.call(jute.OpGetData, &jute.GetDataRequest{Path: "/a"})
	if err := r.result(); err != nil || string(r.body.(*jute.GetDataResponse).Data) != "z" || r.body.(*jute.GetDataResponse).Stat.Version != 1 {
		t.Fatalf("getData after setData: %v %+v", err, r.body)
	}
	// Closing the session removes its ephemeral node.
	if err := c.close(); err != nil {
		t.Fatal(err)
	}
	if err := w.call(jute.OpExists, &jute.ExistsRequest{Path: "/a/s-0000000000"}).result(); !errors.Is(err, jute.CodeNoNode) {
		t.Fatalf("ephemeral after its session closed: %v", err)
	}
}

// startTestFloorCluster runs a replicated floor of three nodes until the test ends: node 1 with
// its client address, and the other two, whose contexts stop them one by one.
func startTestFloorCluster(t *testing.T) (leader *floorServer, addr string, nodes []*floorServer, stop []context.CancelFunc) {
	t.Helper()
	var addrs []string
	done := make(chan error, 3)
	for range 2 {
		s, ln := newTestFloor(t)
		ctx, cancel := context.WithCancel(context.Background())
		go func() { done <- s.follow(ctx, ln) }()
		nodes, stop = append(nodes, s), append(stop, cancel)
		addrs = append(addrs, ln.Addr().String())
	}
	leader, ln := newTestFloor(t)
	ctx, cancel := context.WithCancel(context.Background())
	var err error
	if leader.repl, err = dialReplicas(ctx, cancel, addrs, io.Discard); err != nil {
		t.Fatal(err)
	}
	go func() { done <- leader.serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		leader.repl.close()
		for _, c := range stop {
			c()
		}
		for range 3 {
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
		for _, s := range append(nodes, leader) {
			_ = s.log.Close()
		}
	})
	return leader, ln.Addr().String(), nodes, stop
}

// The replicated floor answers every workload, and each other node's log holds exactly what node
// 1's holds. With one of them gone, a majority remains and writes are still answered; with both
// gone, node 1 stops instead of answering writes no other node has.
func TestFloorReplicated(t *testing.T) {
	leader, addr, nodes, stop := startTestFloorCluster(t)
	if _, err := smokeAll(context.Background(), []string{addr}, io.Discard); err != nil {
		t.Fatal(err)
	}
	c, err := dialClient(addr, 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.close() }()
	if err := create(c, "/r", []byte("x"), jute.ModePersistent); err != nil {
		t.Fatal(err)
	}
	// Node 1 answered the create once one other node had logged it; the slower one has it within
	// moments. Every node writes the same records at the same offsets (wrapping at the same
	// size), so the files end up equal.
	want, err := os.ReadFile(leader.log.Name())
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range nodes {
		if !testkit.Until(10*time.Second, func() bool { // the node logs on its own schedule
			got, err := os.ReadFile(n.log.Name())
			if err != nil {
				t.Fatal(err)
			}
			return string(got) == string(want)
		}) {
			t.Fatalf("node %d's log differs from node 1's", i+2)
		}
	}
	stop[0]()
	if err := c.call(jute.OpSetData, &jute.SetDataRequest{Path: "/r", Data: []byte("y"), Version: -1}).result(); err != nil {
		t.Fatalf("setData with two of three nodes: %v", err)
	}
	stop[1]()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := c.call(jute.OpSetData, &jute.SetDataRequest{Path: "/r", Data: []byte("z"), Version: -1})
		if err := r.result(); err != nil {
			break // node 1 gave up and closed the connection
		}
		if time.Now().After(deadline) {
			t.Fatal("node 1 still answers writes with no other node")
		}
	}
}

// The floor's profiles are served until stopped, and not after.
func TestFloorPprof(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stop := servePprof(ln)
	url := "http://" + ln.Addr().String() + "/debug/pprof/cmdline"
	resp, err := http.Get(url)
	if err != nil {
		stop()
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s: %s", url, resp.Status)
	}
	stop()
	if resp, err := http.Get(url); err == nil {
		_ = resp.Body.Close()
		t.Errorf("GET %s after stop: %s", url, resp.Status)
	}
}

// Node 1 gives up with an error, not a hang, when a node it must reach never listens, even after
// reaching the others; the connections it made are closed.
func TestFloorDialGivesUp(t *testing.T) {
	_, ln := newTestFloor(t) // listens, and accepts nothing: a dial still succeeds
	t.Cleanup(func() { _ = ln.Close() })
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_ = gone.Close() // a port nothing listens on
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := dialReplicas(ctx, cancel, []string{ln.Addr().String(), gone.Addr().String()}, io.Discard)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("dialReplicas reached a node that does not listen")
		}
	case <-time.After(time.Minute):
		t.Fatal("dialReplicas hangs after giving up")
	}
}
