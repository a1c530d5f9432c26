package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkd-io/zkd/internal/apachezk"
	"github.com/zkd-io/zkd/znode"
)

type znodeDump struct {
	Data []byte
	ACL  []zk.ACL
	Stat zk.Stat
}

// dumpTree reads every node, its ACL and its Stat through a client.
func dumpTree(t *testing.T, c *zk.Conn) map[string]znodeDump {
	t.Helper()
	out := map[string]znodeDump{}
	var walk func(p string)
	walk = func(p string) {
		data, st, err := c.Get(p)
		if err != nil {
			t.Fatalf("get %s: %v", p, err)
		}
		acl, _, err := c.GetACL(p)
		if err != nil {
			t.Fatalf("getACL %s: %v", p, err)
		}
		out[p] = znodeDump{data, acl, *st}
		kids, _, err := c.Children(p)
		if err != nil {
			t.Fatalf("children %s: %v", p, err)
		}
		slices.Sort(kids)
		for _, k := range kids {
			walk(path.Join(p, k))
		}
	}
	walk("/")
	return out
}

func diffTrees(t *testing.T, got, want map[string]znodeDump) {
	t.Helper()
	var bad []string
	for p, w := range want {
		g, ok := got[p]
		switch {
		case !ok:
			bad = append(bad, "missing "+p)
		case !bytes.Equal(g.Data, w.Data):
			bad = append(bad, fmt.Sprintf("%s data %q, want %q", p, g.Data, w.Data))
		case !slices.Equal(g.ACL, w.ACL):
			bad = append(bad, fmt.Sprintf("%s ACL %v, want %v", p, g.ACL, w.ACL))
		case g.Stat != w.Stat:
			bad = append(bad, fmt.Sprintf("%s stat %+v, want %+v", p, g.Stat, w.Stat))
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			bad = append(bad, "extra "+p)
		}
	}
	slices.Sort(bad)
	if len(bad) > 0 {
		t.Errorf("%d differences from ZooKeeper:\n%s", len(bad), strings.Join(bad, "\n"))
	}
}

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
		deadline := time.Now().Add(60 * time.Second)
		for {
			mu.Lock()
			exp := expired
			mu.Unlock()
			if exp {
				t.Fatal("the session expired during the move")
			}
			if c.State() == zk.StateHasSession {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the session is not connected again after the move: %v", c.State())
			}
			time.Sleep(20 * time.Millisecond)
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

// The move from a running Apache ZooKeeper: stop it, zkd import its files, start zkd on the
// same address. zkd serves the very tree ZooKeeper served (data, ACLs, every Stat field), its
// zxids go on above ZooKeeper's, and a client connected to ZooKeeper rides through the move with
// its session, its ephemerals and its watches.
func TestImportFromZooKeeperKeepsTreeAndSessions(t *testing.T) {
	if err := apachezk.Installed(); err != nil {
		t.Skipf("real ZooKeeper is not installed: %v", err)
	}
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
	zkp, err := apachezk.Launch(apachezk.ServerConfig{Dir: filepath.Join(dir, "zookeeper"), ClientAddr: addr, Extra: zkExtra})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = zkp.Stop() })
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	if err := zkp.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}

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
	reader, _ := sessionOf(t, addr, 30*time.Second)
	if err := reader.AddAuth("digest", []byte("super:pw")); err != nil {
		t.Fatal(err)
	}
	want := dumpTree(t, reader)
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
	reader2, _ := sessionOf(t, addr, 30*time.Second)
	if err := reader2.AddAuth("digest", []byte("super:pw")); err != nil {
		t.Fatal(err)
	}
	// The abandoned session may expire at any moment now, changing its ephemeral and /locks;
	// everything else is compared.
	got := dumpTree(t, reader2)
	for _, p := range []string{"/locks", "/locks/ghost"} {
		delete(got, p)
		delete(want, p)
	}
	diffTrees(t, got, want)

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
	onZkd := dumpTree(t, reader2)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("zkd after SIGTERM: %v", err)
	}
	p2 := startZkd(t, "-config", cfg)
	waitRuok(t, addr, p2)
	reader3, _ := sessionOf(t, addr, 30*time.Second)
	if err := reader3.AddAuth("digest", []byte("super:pw")); err != nil {
		t.Fatal(err)
	}
	diffTrees(t, dumpTree(t, reader3), onZkd)
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
	onZkd = dumpTree(t, reader3)
	reader3.Close()
	live.Close()

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
	zkBack, err := apachezk.Launch(apachezk.ServerConfig{Dir: back, ClientAddr: addr, Extra: zkExtra})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = zkBack.Stop() })
	ctx2, cancel2 := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel2()
	if err := zkBack.WaitReady(ctx2); err != nil {
		t.Fatal(err)
	}
	reader4, _ := sessionOf(t, addr, 30*time.Second)
	if err := reader4.AddAuth("digest", []byte("super:pw")); err != nil {
		t.Fatal(err)
	}
	diffTrees(t, dumpTree(t, reader4), onZkd)
}

// The way back: zkd export of a stopped zkd server gives a ZooKeeper snapshot that Apache
// ZooKeeper loads as it is, and serves the very tree zkd served.
func TestExportLoadsInZooKeeper(t *testing.T) {
	if err := apachezk.Installed(); err != nil {
		t.Skipf("real ZooKeeper is not installed: %v", err)
	}
	dir := t.TempDir()
	super := znode.DigestID("super", "pw")
	data := filepath.Join(dir, "zkd")
	cfg := filepath.Join(dir, "zoo.cfg")
	addr := freePort(t)
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("dataDir=%s\nclientPort=%s\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\nextendedTypesEnabled=true\nDigestAuthenticationProvider.superDigest=%s\n", data, portOf(t, addr), super)), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startZkd(t, "-config", cfg)
	waitRuok(t, addr, p)
	c, _ := sessionOf(t, addr, 30*time.Second)
	live, _ := sessionOf(t, addr, 30*time.Second)
	if err := c.AddAuth("digest", []byte("alice:secret")); err != nil {
		t.Fatal(err)
	}
	open := zk.WorldACL(zk.PermAll)
	acls := [][]zk.ACL{open, zk.WorldACL(zk.PermRead), zk.DigestACL(zk.PermAll, "bob", "pw"), {{Perms: zk.PermAll, Scheme: "auth", ID: ""}},
		{{Perms: zk.PermRead, Scheme: "ip", ID: "127.0.0.1"}, {Perms: zk.PermAll, Scheme: "digest", ID: "alice:abc"}}}
	for _, p := range []string{"/app", "/seq", "/eph"} {
		if _, err := c.Create(p, nil, 0, open); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.CreateContainer("/cont", []byte("c"), zk.FlagContainer, open); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		n := fmt.Sprintf("/app/n%02d", i)
		if _, err := c.Create(n, []byte(n), 0, acls[i%len(acls)]); err != nil {
			t.Fatal(err)
		}
		if i%5 == 0 || i%5 == 3 {
			if _, err := c.Set(n, []byte("changed"), -1); err != nil {
				t.Fatal(err)
			}
			if _, err := c.SetACL(n, acls[(i+1)%len(acls)], -1); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Create("/seq/s-", nil, zk.FlagSequence, open); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Create(fmt.Sprintf("/cont/k%02d", i), nil, 0, open); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			if err := c.Delete(fmt.Sprintf("/cont/k%02d", i), -1); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := live.Create(fmt.Sprintf("/eph/e%02d", i), nil, zk.FlagEphemeral, open); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.CreateTTL("/app/ttl", []byte("t"), zk.FlagTTL, open, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Multi(&zk.CreateRequest{Path: "/app/m", Acl: open}, &zk.SetDataRequest{Path: "/app/m", Data: []byte("m"), Version: 0}); err != nil {
		t.Fatal(err)
	}
	reader, _ := sessionOf(t, addr, 30*time.Second)
	if err := reader.AddAuth("digest", []byte("super:pw")); err != nil {
		t.Fatal(err)
	}
	want := dumpTree(t, reader)
	reader.Close()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("zkd after SIGTERM: %v\n%s", err, p.out.String())
	}

	zkDir := filepath.Join(dir, "zookeeper")
	var out bytes.Buffer
	if code := run([]string{"export", "-data", data, "-out", filepath.Join(zkDir, "data")}, &out, &out); code != 0 {
		t.Fatalf("zkd export: exit %d\n%s", code, out.String())
	}
	t.Log(strings.TrimSpace(out.String()))
	ports, err := apachezk.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	zkp, err := apachezk.Launch(apachezk.ServerConfig{Dir: zkDir, ClientAddr: fmt.Sprintf("127.0.0.1:%d", ports[0]), Extra: map[string]string{
		"extendedTypesEnabled": "true", "DigestAuthenticationProvider.superDigest": super,
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = zkp.Stop() })
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	if err := zkp.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	zr, _ := sessionOf(t, zkp.ClientAddr(), 30*time.Second)
	if err := zr.AddAuth("digest", []byte("super:pw")); err != nil {
		t.Fatal(err)
	}
	diffTrees(t, dumpTree(t, zr), want)
	zr.Close()
	if err := zkp.Stop(); err != nil {
		t.Fatal(err)
	}

	// A three-server ensemble, every member given the same export, serves the same tree too.
	// (/zookeeper/config is then the ensemble's own membership, which ZooKeeper writes itself.)
	snaps, err := filepath.Glob(filepath.Join(zkDir, "data", "version-2", "snapshot.*"))
	if err != nil || len(snaps) == 0 {
		t.Fatalf("no exported snapshot: %v", err)
	}
	export, err := os.ReadFile(snaps[0])
	if err != nil {
		t.Fatal(err)
	}
	eports, err := apachezk.FreePorts(9)
	if err != nil {
		t.Fatal(err)
	}
	var servers, clients []string
	for i := range 3 {
		servers = append(servers, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", i+1, eports[3+i], eports[6+i]))
		clients = append(clients, fmt.Sprintf("127.0.0.1:%d", eports[i]))
	}
	var members []*apachezk.Process
	for i := range 3 {
		mdir := filepath.Join(dir, fmt.Sprintf("zk%d", i+1))
		v2 := filepath.Join(mdir, "data", "version-2")
		if err := os.MkdirAll(v2, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(v2, filepath.Base(snaps[0])), export, 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := apachezk.Launch(apachezk.ServerConfig{Dir: mdir, ClientAddr: clients[i], ID: i + 1, Servers: servers, HeapMB: 256,
			Extra: map[string]string{"extendedTypesEnabled": "true", "DigestAuthenticationProvider.superDigest": super}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Stop() })
		members = append(members, m)
	}
	for _, m := range members {
		ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
		err := m.WaitReady(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	ze, _ := sessionOf(t, strings.Join(clients, ","), 30*time.Second)
	if err := ze.AddAuth("digest", []byte("super:pw")); err != nil {
		t.Fatal(err)
	}
	got := dumpTree(t, ze)
	delete(got, "/zookeeper/config")
	delete(want, "/zookeeper/config")
	diffTrees(t, got, want)
}

// The move of a three-server ensemble: stop ZooKeeper, import the member with the highest zxid
// into three zkd members with the same zoo.cfg lines, start them. A client whose connect string
// lists the three servers keeps its session, ephemerals and watches; the tree is the same; and
// the test reports how long writes were unavailable.
func TestImportEnsembleCutover(t *testing.T) {
	if err := apachezk.Installed(); err != nil {
		t.Skipf("real ZooKeeper is not installed: %v", err)
	}
	if testing.Short() {
		t.Skip("runs three ZooKeeper and three zkd servers")
	}
	dir := t.TempDir()
	super := znode.DigestID("super", "pw")
	ports, err := apachezk.FreePorts(9)
	if err != nil {
		t.Fatal(err)
	}
	var servers, clients []string
	for i := range 3 {
		servers = append(servers, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", i+1, ports[3+i], ports[6+i]))
		clients = append(clients, fmt.Sprintf("127.0.0.1:%d", ports[i]))
	}
	procs := make([]*apachezk.Process, 3)
	for i := range 3 {
		p, err := apachezk.Launch(apachezk.ServerConfig{
			Dir: filepath.Join(dir, fmt.Sprintf("zk%d", i+1)), ClientAddr: clients[i], ID: i + 1, Servers: servers, HeapMB: 256,
			Extra: map[string]string{"extendedTypesEnabled": "true", "snapCount": "40", "DigestAuthenticationProvider.superDigest": super},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Stop() })
		procs[i] = p
	}
	for _, p := range procs {
		ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
		err := p.WaitReady(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	connect := strings.Join(clients, ",")
	live, liveEv := sessionOf(t, connect, 30*time.Second)
	reattached := ridesThrough(t, live, liveEv)
	w, _ := sessionOf(t, connect, 30*time.Second)
	open := zk.WorldACL(zk.PermAll)
	for _, p := range []string{"/app", "/app/config", "/locks"} {
		if _, err := w.Create(p, []byte("v0"), 0, open); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 100 {
		if _, err := w.Create(fmt.Sprintf("/app/n%03d", i), []byte("x"), 0, zk.DigestACL(zk.PermRead, "bob", "pw")); err != nil {
			t.Fatal(err)
		}
	}
	mine, err := live.Create("/locks/mine-", []byte("held"), zk.FlagEphemeral|zk.FlagSequence, open)
	if err != nil {
		t.Fatal(err)
	}
	_, _, watch, err := live.GetW("/app/config")
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	// Read the tree from each member in turn after a sync, so that all have everything.
	reader, _ := sessionOf(t, connect, 30*time.Second)
	if err := reader.AddAuth("digest", []byte("super:pw")); err != nil {
		t.Fatal(err)
	}
	if _, err := reader.Sync("/"); err != nil {
		t.Fatal(err)
	}
	want := dumpTree(t, reader)
	reader.Close()

	// The move. Write unavailability runs from stopping ZooKeeper to the first write zkd takes.
	stopped := time.Now()
	for _, p := range procs {
		if err := p.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	var from []string
	for i := range 3 {
		zd := filepath.Join(dir, fmt.Sprintf("zk%d", i+1))
		from = append(from, "-from", filepath.Join(zd, "data"), "-from-log", filepath.Join(zd, "txnlog"))
	}
	for i := range 3 {
		data := filepath.Join(dir, fmt.Sprintf("zkd%d", i+1))
		if err := os.MkdirAll(data, 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(data, "myid"), []byte(fmt.Sprint(i+1)), 0o600); err != nil {
			t.Fatal(err)
		}
		var cfg strings.Builder
		fmt.Fprintf(&cfg, "dataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\nextendedTypesEnabled=true\ntickTime=2000\nDigestAuthenticationProvider.superDigest=%s\n", data, ports[i], super)
		for _, s := range servers {
			cfg.WriteString(s + "\n")
		}
		cfgPath := filepath.Join(dir, fmt.Sprintf("zoo%d.cfg", i+1))
		if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		args := append(append([]string{"import"}, from...), "-data", data, "-config", cfgPath)
		if code := run(args, &out, &out); code != 0 {
			t.Fatalf("zkd import: exit %d\n%s", code, out.String())
		}
		if i == 0 {
			t.Log(strings.TrimSpace(out.String()))
		}
		startZkd(t, "-config", cfgPath)
	}
	imported := time.Now()
	c, _ := sessionOf(t, connect, 30*time.Second)
	for {
		_, err := c.Create("/after-the-move", nil, 0, open)
		if err == nil {
			break
		}
		if time.Since(stopped) > 90*time.Second {
			t.Fatalf("no write accepted after the move: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("writes unavailable for %v (ZooKeeper stop and import %v, zkd start to first write %v)",
		time.Since(stopped).Round(time.Millisecond), imported.Sub(stopped).Round(time.Millisecond), time.Since(imported).Round(time.Millisecond))

	reattached()
	if _, st, err := live.Get(mine); err != nil || st.EphemeralOwner != live.SessionID() {
		t.Fatalf("the live session's ephemeral %s after the move: %v %+v", mine, err, st)
	}
	if _, err := c.Set("/app/config", []byte("v1"), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-watch:
		if e.Type != zk.EventNodeDataChanged {
			t.Errorf("watch fired with %+v", e)
		}
	case <-time.After(30 * time.Second):
		t.Error("the watch set on ZooKeeper never fired on zkd")
	}
	if err := c.Delete("/after-the-move", -1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Set("/app/config", []byte("v0"), -1); err != nil {
		t.Fatal(err)
	}
	r2, _ := sessionOf(t, connect, 30*time.Second)
	if err := r2.AddAuth("digest", []byte("super:pw")); err != nil {
		t.Fatal(err)
	}
	got := dumpTree(t, r2)
	// The two writes after the move changed what they touched; /zookeeper/config describes the
	// running membership in zkd's words (docs/differences.md); the rest is ZooKeeper's tree.
	if g := got["/zookeeper/config"].Data; !bytes.HasPrefix(g, bytes.Split(want["/zookeeper/config"].Data, []byte("version="))[0]) {
		t.Errorf("/zookeeper/config on zkd %q does not list ZooKeeper's members %q", g, want["/zookeeper/config"].Data)
	}
	for _, p := range []string{"/", "/app/config", "/zookeeper/config"} {
		delete(got, p)
		delete(want, p)
	}
	diffTrees(t, got, want)
}

// cutoverClient is a client process (kazoo or the Java client) that rides through the move:
// see testdata/cutover_client.py and testdata/CutoverClient.java.
type cutoverClient struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

func startCutoverClient(t *testing.T, name string, argv ...string) *cutoverClient {
	t.Helper()
	c := &cutoverClient{name: name, cmd: exec.Command(argv[0], argv[1:]...), lines: make(chan string, 16)}
	var err error
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	c.cmd.Stderr = &stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		_ = c.cmd.Wait()
		if t.Failed() {
			t.Logf("%s stderr:\n%s", name, stderr.String())
		}
	})
	go func() { // ends when the process's stdout closes
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	return c
}

// line waits for the client's next line that starts with one of prefixes.
func (c *cutoverClient) line(t *testing.T, prefixes ...string) string {
	t.Helper()
	timeout := time.After(120 * time.Second)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatalf("%s exited before printing %v", c.name, prefixes)
			}
			for _, p := range prefixes {
				if strings.HasPrefix(l, p) {
					return l
				}
			}
		case <-timeout:
			t.Fatalf("%s printed no %v", c.name, prefixes)
		}
	}
}

// kazoo and the Java client, connected to ZooKeeper with a connect string that also lists
// zkd's address, ride through the move to zkd with their sessions, ephemerals and watches.
func TestImportKeepsKazooAndJavaSessions(t *testing.T) {
	if err := apachezk.Installed(); err != nil {
		t.Skipf("real ZooKeeper is not installed: %v", err)
	}
	py := ""
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(p, "-c", "import kazoo").Run() == nil {
			py = p
			break
		}
	}
	if py == "" {
		t.Skip("kazoo is not installed (Debian package python3-kazoo)")
	}
	java, err := exec.LookPath("java")
	if err != nil {
		t.Skip("no java")
	}
	dir := t.TempDir()
	ports, err := apachezk.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	// zkd takes over on another address; the clients' connect string lists both.
	addr, zkdAddr := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	both := addr + "," + zkdAddr
	zkDir := filepath.Join(dir, "zookeeper")
	zkp, err := apachezk.Launch(apachezk.ServerConfig{Dir: zkDir, ClientAddr: addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = zkp.Stop() })
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	if err := zkp.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	setup, _ := sessionOf(t, addr, 30*time.Second)
	if _, err := setup.Create("/watched", []byte("v0"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	setup.Close()
	src, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	clients := []*cutoverClient{
		startCutoverClient(t, "kazoo", py, filepath.Join(src, "cutover_client.py"), both),
		startCutoverClient(t, "java", java, "-cp", apachezk.Jar, filepath.Join(src, "CutoverClient.java"), both),
	}
	for _, c := range clients {
		t.Logf("%s: %s", c.name, c.line(t, "READY", "FAIL"))
	}

	if err := zkp.Stop(); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "zkd")
	var out bytes.Buffer
	if code := run([]string{"import", "-from", filepath.Join(zkDir, "data"), "-from-log", filepath.Join(zkDir, "txnlog"), "-data", data}, &out, &out); code != 0 {
		t.Fatalf("zkd import: exit %d\n%s", code, out.String())
	}
	cfg := filepath.Join(dir, "zoo.cfg")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("dataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n", data, ports[1])), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startZkd(t, "-config", cfg)
	waitRuok(t, zkdAddr, p)
	c, _ := sessionOf(t, zkdAddr, 30*time.Second)
	if _, err := c.Set("/watched", []byte("v1"), -1); err != nil {
		t.Fatal(err)
	}
	for _, cl := range clients {
		if _, err := io.WriteString(cl.stdin, "CHECK\n"); err != nil {
			t.Fatal(err)
		}
	}
	for _, cl := range clients {
		if got := cl.line(t, "OK", "FAIL"); got != "OK" {
			t.Errorf("%s after the move: %s", cl.name, got)
		}
	}
}
