package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkd-io/zkd/internal/testkit"
	"github.com/zkd-io/zkd/internal/testkit/apachezk"
	"github.com/zkd-io/zkd/internal/testkit/zktest"
	"github.com/zkd-io/zkd/znode"
)

func sessionOf(t *testing.T, addr string, timeout time.Duration) (*zk.Conn, <-chan zk.Event) {
	t.Helper()
	c, ev, err := zk.Connect(strings.Split(addr, ","), timeout, zk.WithLogInfo(false), zk.WithLogger(quietLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	waitState(t, ev, zk.StateHasSession)
	return c, ev
}

// ridesThrough drains a session's events (go-zookeeper drops events its small channel cannot
// hold, so a state may be missed by a late reader) and returns a function that waits until the
// session is connected again, failing the test if it expired on the way. The goroutine ends
// when the session is closed, which closes its channel.
func ridesThrough(t *testing.T, c *zk.Conn, ev <-chan zk.Event) func() {
	var mu sync.Mutex
	expired := false
	go func() {
		for e := range ev {
			if e.State == zk.StateExpired {
				mu.Lock()
				expired = true
				mu.Unlock()
			}
		}
	}()
	return func() {
		t.Helper()
		if !testkit.Until(60*time.Second, func() bool {
			mu.Lock()
			exp := expired
			mu.Unlock()
			if exp {
				t.Fatal("the session expired during the move")
			}
			return c.State() == zk.StateHasSession
		}) {
			t.Fatalf("the session is not connected again after the move: %v", c.State())
		}
	}
}

// waitState waits for state on a session's event channel; an expiry on the way fails the test.
func waitState(t *testing.T, ev <-chan zk.Event, state zk.State) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	for {
		select {
		case e := <-ev:
			if e.State == state {
				return
			}
			if e.State == zk.StateExpired && state != zk.StateExpired {
				t.Fatalf("session expired while waiting for %v", state)
			}
		case <-ctx.Done():
			t.Fatalf("no %v: %v", state, ctx.Err())
		}
	}
}

// superReader opens a session on addr (a comma-separated list) authenticated as the tests'
// super user (super:pw), who reads every node and ACL.
func superReader(t *testing.T, addr string) *zk.Conn {
	t.Helper()
	c, _ := sessionOf(t, addr, 30*time.Second)
	if err := c.AddAuth("digest", []byte("super:pw")); err != nil {
		t.Fatal(err)
	}
	return c
}

// The move from a running Apache ZooKeeper: stop it, zkd import its files, start zkd on the
// same address. zkd serves the very tree ZooKeeper served (data, ACLs, every Stat field), its
// zxids go on above ZooKeeper's, and a client connected to ZooKeeper rides through the move with
// its session, its ephemerals and its watches.
func TestImportFromZooKeeperKeepsTreeAndSessions(t *testing.T) {
	zktest.Require(t)
	dir := t.TempDir()
	super := znode.DigestID("super", "pw")
	ports, err := apachezk.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	zkExtra := map[string]string{
		"extendedTypesEnabled": "true", "snapCount": "40", "DigestAuthenticationProvider.superDigest": super,
		"authProvider.1": "org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
	}
	zkp := zktest.LaunchAt(t, apachezk.ServerConfig{Dir: filepath.Join(dir, "zookeeper"), ClientAddr: addr, Extra: zkExtra})[0]

	// The session that rides through: ephemerals and watches on ZooKeeper.
	live, liveEv := sessionOf(t, addr, 30*time.Second)
	reattached := ridesThrough(t, live, liveEv)
	w, _ := sessionOf(t, addr, 30*time.Second)
	open := zk.WorldACL(zk.PermAll)
	for _, p := range []string{"/app", "/app/config", "/locks"} {
		if _, err := w.Create(p, []byte("v0"), 0, open); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 100 {
		p := fmt.Sprintf("/app/n%03d", i)
		if _, err := w.Create(p, []byte(p), 0, zk.DigestACL(zk.PermAll, "bob", "pw")); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Create("/locks/lock-", nil, zk.FlagEphemeral|zk.FlagSequence, open); err != nil && i == 0 {
			t.Fatal(err)
		}
	}
	if _, err := w.CreateTTL("/app/ttl", nil, zk.FlagTTL, open, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := w.CreateContainer("/app/cont", nil, zk.FlagContainer, open); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Create("/app/cont/x", nil, 0, open); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Create("/app/sasl", nil, 0, []zk.ACL{{Perms: zk.PermRead, Scheme: "sasl", ID: "bob"}}); err != nil {
		t.Fatal(err)
	}
	// A quota on /app: its nodes under /zookeeper/quota, which only super may write.
	if err := w.AddAuth("digest", []byte("super:pw")); err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct{ p, d string }{{"/zookeeper/quota/app", ""}, {"/zookeeper/quota/app/zookeeper_limits", "count=500,bytes=-1"}, {"/zookeeper/quota/app/zookeeper_stats", "count=0,bytes=0"}} {
		if _, err := w.Create(q.p, []byte(q.d), 0, open); err != nil {
			t.Fatal(err)
		}
	}
	mine, err := live.Create("/locks/mine-", []byte("held"), zk.FlagEphemeral|zk.FlagSequence, open)
	if err != nil {
		t.Fatal(err)
	}
	_, _, dataWatch, err := live.GetW("/app/config")
	if err != nil {
		t.Fatal(err)
	}
	_, _, childWatch, err := live.ChildrenW("/app")
	if err != nil {
		t.Fatal(err)
	}
	// A session whose client will never come back: its dialer fails after the move.
	var gone atomic.Bool
	ghost, ghostEv, err := zk.Connect([]string{addr}, 6*time.Second, zk.WithLogInfo(false), zk.WithLogger(quietLogger{}),
		zk.WithDialer(func(network, address string, timeout time.Duration) (net.Conn, error) {
			if gone.Load() {
				return nil, errors.New("this client is gone")
			}
			return net.DialTimeout(network, address, timeout)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ghost.Close)
	waitState(t, ghostEv, zk.StateHasSession)
	go func() {
		for range ghostEv { // drained until Close
		}
	}()
	if _, err := ghost.Create("/locks/ghost", nil, zk.FlagEphemeral, open); err != nil {
		t.Fatal(err)
	}
	w.Close() // its ephemerals go: a closeSession in the log
	reader := superReader(t, addr)
	want := zktest.DumpTree(t, reader)
	reader.Close()
	lastZxid := int64(0)
	for _, e := range want {
		lastZxid = max(lastZxid, e.Stat.Mzxid, e.Stat.Pzxid)
	}

	// The move: stop ZooKeeper, import, start zkd on the same address.
	gone.Store(true)
	if err := zkp.Stop(); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "zkd")
	var out bytes.Buffer
	zkDir := filepath.Join(dir, "zookeeper")
	if code := run([]string{"import", "-from", filepath.Join(zkDir, "data"), "-from-log", filepath.Join(zkDir, "txnlog"), "-data", data}, &out, &out); code != 0 {
		t.Fatalf("zkd import: exit %d\n%s", code, out.String())
	}
	t.Log(strings.TrimSpace(out.String()))
	cfg := filepath.Join(dir, "zoo.cfg")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("dataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\nextendedTypesEnabled=true\nDigestAuthenticationProvider.superDigest=%s\n", data, ports[0], super)), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startZkd(t, "-config", cfg)
	waitRuok(t, addr, p)

	// The live client reattaches with its session: no expiry, its ephemerals and watches kept.
	reattached()
	if _, st, err := live.Get(mine); err != nil || st.EphemeralOwner != live.SessionID() {
		t.Fatalf("the live session's ephemeral %s after the move: %v %+v", mine, err, st)
	}
	reader2 := superReader(t, addr)
	// The abandoned session may expire at any moment now, changing its ephemeral and /locks;
	// everything else is compared.
	got := zktest.DumpTree(t, reader2)
	for _, p := range []string{"/locks", "/locks/ghost"} {
		delete(got, p)
		delete(want, p)
	}
	zktest.DiffTrees(t, "tree against ZooKeeper's", got, want)

	// The session whose client never came back expires on zkd after its timeout, and its
	// ephemeral goes with it.
	_, _, ghostGone, err := reader2.ExistsW("/locks/ghost")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-ghostGone:
		if e.Type != zk.EventNodeDeleted {
			t.Errorf("the abandoned session's ephemeral: %+v", e)
		}
	case <-time.After(60 * time.Second):
		t.Error("the imported session whose client never came back did not expire")
	}

	// Writes after the move get zxids above ZooKeeper's, and fire the watches set on ZooKeeper.
	st, err := reader2.Set("/app/config", []byte("v1"), -1)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mzxid <= lastZxid {
		t.Errorf("first write after the move got zxid %#x, not above ZooKeeper's last %#x", st.Mzxid, lastZxid)
	}
	if _, err := reader2.Create("/app/new", nil, 0, open); err != nil {
		t.Fatal(err)
	}
	for name, ch := range map[string]<-chan zk.Event{"data": dataWatch, "child": childWatch} {
		select {
		case e := <-ch:
			if e.Err != nil || (e.Type != zk.EventNodeDataChanged && e.Type != zk.EventNodeChildrenChanged) {
				t.Errorf("%s watch fired with %+v", name, e)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("the %s watch set on ZooKeeper never fired on zkd", name)
		}
	}

	// zxids stay above ZooKeeper's across a restart of the imported server.
	onZkd := zktest.DumpTree(t, reader2)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("zkd after SIGTERM: %v", err)
	}
	p2 := startZkd(t, "-config", cfg)
	waitRuok(t, addr, p2)
	reader3 := superReader(t, addr)
	zktest.DiffTrees(t, "tree against ZooKeeper's", zktest.DumpTree(t, reader3), onZkd)
	st2, err := reader3.Create("/app/after-restart", nil, 0, open)
	if err != nil {
		t.Fatal(err)
	}
	_, st3, err := reader3.Get(st2)
	if err != nil || st3.Czxid <= st.Mzxid {
		t.Errorf("write after the restart: zxid %#x, not above %#x (%v)", st3.Czxid, st.Mzxid, err)
	}
	if err := reader3.Delete(st2, -1); err != nil {
		t.Fatal(err)
	}
	// The live session comes back after the restart too. It stays open through the way back, so
	// that what is exported does not depend on whether a close beat zkd's shutdown.
	reattached()
	onZkd = zktest.DumpTree(t, reader3)
	reader3.Close()

	// And back: export zkd's state, start ZooKeeper on it, and it serves the same tree.
	if err := p2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p2.cmd.Wait(); err != nil {
		t.Fatalf("zkd after SIGTERM: %v", err)
	}
	back := filepath.Join(dir, "back")
	out.Reset()
	if code := run([]string{"export", "-data", data, "-out", filepath.Join(back, "data")}, &out, &out); code != 0 {
		t.Fatalf("zkd export: exit %d\n%s", code, out.String())
	}
	zktest.LaunchAt(t, apachezk.ServerConfig{Dir: back, ClientAddr: addr, Extra: zkExtra})
	reader4 := superReader(t, addr)
	zktest.DiffTrees(t, "tree against ZooKeeper's", zktest.DumpTree(t, reader4), onZkd)

	// The live session rides back to ZooKeeper with its ephemeral.
	reattached()
	if _, st, err := live.Get(mine); err != nil || st.EphemeralOwner != live.SessionID() {
		t.Fatalf("the live session's ephemeral %s back on ZooKeeper: %v %+v", mine, err, st)
	}
	live.Close()
}
