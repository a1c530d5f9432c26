package clientmatrix

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkd-io/zkd/conformance"
	"github.com/zkd-io/zkd/internal/testkit"
	"github.com/zkd-io/zkd/internal/testkit/apachezk"
	"github.com/zkd-io/zkd/internal/testkit/tmpfs"
	"github.com/zkd-io/zkd/internal/testkit/zktest"
	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/server"
	"github.com/zkd-io/zkd/server/zkdtest"
)

// smallMaxBuffer is jute.maxbuffer on the server of the request over jute.maxbuffer row.
const smallMaxBuffer = 64 << 10

// rows lists the conditions in the order the matrix shows them.
func rows() []row {
	return []row{
		{name: "full disk (a write)", run: fullDisk},
		{name: "throttled", run: throttled},
		{name: "request over jute.maxbuffer", run: requestOverMaxBuffer},
		{name: "reply over the client's jute.maxbuffer (1.3 MB getChildren)", run: replyOverMaxBuffer},
		{name: "session moved", run: sessionMoved},
		{name: "auth: addauth with an unknown scheme", run: unknownScheme},
		{name: "auth: wrong digest", run: wrongDigest},
		{name: "quota exceeded (default configuration)", run: quota(false)},
		{name: "quota exceeded (ZooKeeper with enforceQuota)", run: quota(true)},
		{name: "leader lost / no quorum", run: noQuorum},
		{name: "not read-only (read-only client, no quorum)", run: notReadOnly},
		{name: "server shutting down (requests in flight)", run: shuttingDown},
		{name: "reconfig while reconfig is disabled", run: reconfigDisabled},
	}
}

// standalone starts a standalone server of tg: zkd in this process (opts apply) or a real
// ZooKeeper (flags are its JVM flags). It returns the client address and a graceful stop.
func standalone(t *testing.T, tg target, zkdOpts []zkdtest.Option, zkFlags []string) (string, func()) {
	t.Helper()
	if tg == zkd {
		s := zkdtest.Start(t, zkdOpts...)
		return s.Addr(), func() { _ = s.Shutdown(context.Background()) }
	}
	dir := t.TempDir()
	p := zktest.Launch(t, 1, func(ports []int) apachezk.ServerConfig {
		return apachezk.ServerConfig{Dir: dir, ClientAddr: fmt.Sprintf("127.0.0.1:%d", ports[0]), HeapMB: 256, JVMFlags: zkFlags}
	})
	return p.ClientAddr(), func() { _ = p.Stop() }
}

// plainServers are a standalone server per target with the default configuration, shared by
// the rows that need nothing else (each works under its own paths); TestClientMatrix starts them.
var plainServers = map[target]string{}

// plainServer returns tg's shared default server, or starts one for t alone when there is none
// (ZooKeeper that was not installed when the test began skips here, as a row of its own would).
func plainServer(t *testing.T, tg target) string {
	if addr := plainServers[tg]; addr != "" {
		return addr
	}
	addr, _ := standalone(t, tg, nil, nil)
	return addr
}

// ensemble starts three servers of tg and returns their client addresses and a stop per member;
// a ZooKeeper ensemble gets zkFlags as JVM flags and zkCfg as more zoo.cfg keys.
func ensemble(t *testing.T, tg target, zkFlags []string, zkCfg map[string]string) ([]string, []func()) {
	t.Helper()
	if tg == zkd {
		cl := zkdtest.StartCluster(t, 3, zkdtest.WithConfig(func(c *server.Config) { c.Consensus.HeartbeatTimeout = time.Second }))
		var stops []func()
		for _, s := range cl.Servers {
			stops = append(stops, func() { _ = s.Shutdown(context.Background()) })
		}
		return cl.Addrs(), stops
	}
	zktest.Require(t)
	ports, err := apachezk.FreePorts(9)
	if err != nil {
		t.Fatal(err)
	}
	var servers []string
	for i := range 3 {
		servers = append(servers, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", i+1, ports[3+i], ports[6+i]))
	}
	var cfgs []apachezk.ServerConfig
	for i := range 3 {
		cfgs = append(cfgs, apachezk.ServerConfig{Dir: filepath.Join(t.TempDir(), strconv.Itoa(i)), ID: i + 1, Servers: servers,
			ClientAddr: fmt.Sprintf("127.0.0.1:%d", ports[i]), HeapMB: 256, JVMFlags: zkFlags, Extra: zkCfg})
	}
	procs := zktest.LaunchAt(t, cfgs...)
	var addrs []string
	var stops []func()
	for _, p := range procs {
		addrs = append(addrs, p.ClientAddr())
		stops = append(stops, func() { _ = p.Stop() })
	}
	return addrs, stops
}

// connectAll opens every client's session on addrs; a client that cannot connect gets its cell
// filled with that and is left out of the returned list.
func connectAll(cs []*client, addrs []string) []*client {
	var mu sync.Mutex
	var ok []*client
	each(cs, func(c *client) {
		if c.connect(addrs, false) {
			mu.Lock()
			ok = append(ok, c)
			mu.Unlock()
			return
		}
		c.cell.saw = "could not connect"
	})
	return ok
}

func fullDisk(t *testing.T, tg target, cs []*client) string {
	if tg == zookeeper {
		return "ZooKeeper exits on a full disk"
	}
	vol := tmpfs.Mount(t, "16m")
	addr, _ := standalone(t, tg, []zkdtest.Option{zkdtest.WithDir(filepath.Join(vol, "data"))}, nil)
	a := admin(t, []string{addr})
	for _, c := range cs {
		mkdirs(t, a, "/disk/"+slug(c.kind.name))
	}
	cs = connectAll(cs, []string{addr})
	filler := tmpfs.Fill(t, vol)
	i := 0
	if !testkit.Until(20*time.Second, func() bool {
		i++
		_, err := a.Create(fmt.Sprintf("/disk/fill-%d", i), nil, 0, zk.WorldACL(zk.PermAll))
		return err != nil
	}) {
		t.Fatal("writes still taken on a full disk")
	}
	each(cs, func(c *client) { c.cell.saw = c.saw("create /disk/" + slug(c.kind.name) + "/w 10 s") })
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if !testkit.Until(30*time.Second, func() bool {
		i++
		_, err := a.Create(fmt.Sprintf("/disk/free-%d", i), nil, 0, zk.WorldACL(zk.PermAll))
		return err == nil
	}) {
		t.Fatal("writes not taken again after the disk was freed")
	}
	each(cs, func(c *client) {
		c.probeAfter("/probe-"+slug(c.kind.name), 20*time.Second)
		c.cell.dup = duplicates(t, a, "/disk/"+slug(c.kind.name), true)
	})
	return ""
}

// only returns the clients keep accepts and marks every other one's cell skipped, saying why.
func only(cs []*client, keep func(*client) bool, why string) []*client {
	var run []*client
	for _, c := range cs {
		if !keep(c) {
			c.cell.skip = why
			continue
		}
		run = append(run, c)
	}
	return run
}

func notCliMt(c *client) bool { return c.kind.name != "C cli_mt" }

// throttleMax is request_throttle_max_requests on the server of the throttled row.
const throttleMax = 2

// throttled sends a burst of creates from every client at once to a server whose request
// throttler admits throttleMax requests at a time: ZooKeeper's throttler (and zkd's) makes them
// wait, never refuses them, so every one is answered.
func throttled(t *testing.T, tg target, cs []*client) string {
	addr, _ := standalone(t, tg,
		[]zkdtest.Option{zkdtest.WithConfig(func(c *server.Config) { c.RequestThrottleMaxRequests = throttleMax })},
		[]string{"-Dzookeeper.request_throttle_max_requests=" + strconv.Itoa(throttleMax)})
	a := admin(t, []string{addr})
	run := only(cs, notCliMt, "the driver gives cli_mt one request at a time")
	for _, c := range run {
		mkdirs(t, a, "/throttled/"+slug(c.kind.name))
	}
	run = connectAll(run, []string{addr})
	each(run, func(c *client) {
		out, ok := c.do("burst /throttled/"+slug(c.kind.name)+" 200", burstWait+opWithin)
		if !ok {
			c.cell.saw = out
			return
		}
		f := strings.Fields(out)
		switch {
		case len(f) < 4:
			c.cell.saw = "unexpected answer " + out
		case f[0] == "200":
			c.cell.saw = "200 creates at once: all answered"
		default:
			c.cell.saw = fmt.Sprintf("200 creates at once: %s answered, %s failed (%s), %s pending", f[0], f[1], f[3], f[2])
		}
		c.probeAfter("/probe-throttled-"+slug(c.kind.name), 5*time.Second)
		c.cell.dup = duplicates(t, a, "/throttled/"+slug(c.kind.name), false)
	})
	return ""
}

func maxBufferServer(t *testing.T, tg target) string {
	addr, _ := standalone(t, tg, []zkdtest.Option{zkdtest.WithConfig(func(c *server.Config) { c.MaxFrameSize = smallMaxBuffer })},
		[]string{"-Djute.maxbuffer=" + strconv.Itoa(smallMaxBuffer)})
	return addr
}

func requestOverMaxBuffer(t *testing.T, tg target, cs []*client) string {
	addr := maxBufferServer(t, tg)
	a := admin(t, []string{addr})
	for _, c := range cs {
		mkdirs(t, a, "/big/"+slug(c.kind.name))
	}
	run := only(cs, notCliMt, "cli_mt always writes the 3 bytes \"new\"")
	run = connectAll(run, []string{addr})
	each(run, func(c *client) {
		c.cell.saw = c.saw(fmt.Sprintf("create /big/%s/w %d s", slug(c.kind.name), smallMaxBuffer+36<<10))
		c.probeAfter("/probe-"+slug(c.kind.name), 20*time.Second)
		c.cell.dup = duplicates(t, a, "/big/"+slug(c.kind.name), true)
	})
	return ""
}

// wideChildren and wideName make /wide's getChildren reply about 1.3 MB: over the Java
// client's default jute.maxbuffer (0xfffff bytes), which it applies to what it reads, while the
// servers, which apply theirs to requests, send it.
const (
	wideChildren = 18000
	wideName     = 68
)

func replyOverMaxBuffer(t *testing.T, tg target, cs []*client) string {
	addr := plainServer(t, tg)
	a := admin(t, []string{addr})
	mkdirs(t, a, "/wide")
	pad := strings.Repeat("x", wideName-5)
	for b := 0; b < wideChildren; b += 1000 {
		var ops []any
		for i := b; i < b+1000 && i < wideChildren; i++ {
			ops = append(ops, &zk.CreateRequest{Path: fmt.Sprintf("/wide/%s%05d", pad, i), Acl: zk.WorldACL(zk.PermAll)})
		}
		if _, err := a.Multi(ops...); err != nil {
			t.Fatalf("create children %d-: %v", b, err)
		}
	}
	cs = connectAll(cs, []string{addr})
	each(cs, func(c *client) {
		out, ok := c.do("children /wide", opWithin)
		switch {
		case ok && out == strconv.Itoa(wideChildren):
			c.cell.saw = "ok (" + noReplyLimit(c.kind.name) + ")"
		case ok:
			c.cell.saw = "ok but " + out + " children"
		case strings.HasPrefix(c.kind.name, "Java"), strings.HasPrefix(c.kind.name, "Curator"):
			// The Java client refuses a reply over its jute.maxbuffer (0xfffff by default, the
			// -Djute.maxbuffer property) by dropping the connection; it reconnects to the session
			// and does not send the read again (Curator does, as its retry policy allows).
			c.cell.saw = out + " (over its 1 MiB jute.maxbuffer: connection dropped, session kept)"
		default:
			c.cell.saw = out
		}
		c.probeAfter("/probe-"+slug(c.kind.name), 20*time.Second)
	})
	return ""
}

// noReplyLimit says why a client read a reply over 1 MiB.
func noReplyLimit(name string) string {
	switch {
	case strings.HasPrefix(name, "Java"), strings.HasPrefix(name, "Curator"):
		return "read within its limit"
	case strings.HasPrefix(name, "go-zookeeper"):
		return "no limit unless zk.WithMaxBufferSize"
	}
	return "the client has no limit"
}

func sessionMoved(t *testing.T, tg target, cs []*client) string {
	addrs, _ := ensemble(t, tg, nil, nil)
	a := admin(t, addrs)
	for _, c := range cs {
		mkdirs(t, a, "/moved/"+slug(c.kind.name))
	}
	run := only(cs, notCliMt, "cli_mt does not show the session password")
	// Each client on the first server only; then its session is taken over on the second
	// server by a raw connection presenting the same id and password.
	run = connectAll(run, addrs[:1])
	each(run, func(c *client) {
		if c.pw == "" || c.pw == "-" {
			c.cell.skip = "the client does not expose its session password"
			return
		}
		id, err := strconv.ParseUint(c.id, 16, 64)
		if err != nil {
			t.Errorf("%s: session id %q: %v", c.kind.name, c.id, err)
			return
		}
		pw, _ := hex.DecodeString(c.pw)
		raw, err := conformance.DialRaw(addrs[1], 10*time.Second)
		if err != nil {
			t.Error(err)
			return
		}
		defer raw.Close()
		if _, _, err := raw.Handshake(jute.ConnectRequest{TimeOut: 6000, SessionID: int64(id), Passwd: pw}); err != nil {
			t.Errorf("%s: take over the session: %v", c.kind.name, err)
			return
		}
		c.cell.saw = c.saw("create /moved/" + slug(c.kind.name) + "/w 0 s")
		c.probeAfter("/probe-"+slug(c.kind.name), 5*time.Second)
		c.cell.dup = duplicates(t, a, "/moved/"+slug(c.kind.name), true)
	})
	return ""
}

func unknownScheme(t *testing.T, tg target, cs []*client) string {
	addr := plainServer(t, tg)
	cs = connectAll(cs, []string{addr})
	each(cs, func(c *client) {
		add := c.saw("addauth nosuchscheme secret")
		if strings.HasPrefix(c.kind.name, "go-zookeeper") {
			// go-zookeeper reconnects the session at once (it keeps only credentials that were
			// accepted): a read right after races the reconnection; what holds is that the
			// session is usable again.
			c.cell.saw = "addauth: " + add + ", connection dropped and reconnected"
			c.probeAfter("/probe-"+slug(c.kind.name), 5*time.Second)
			return
		}
		// The failure closes the connection; a read sent before the client noticed races it
		// (node-zookeeper-client's addAuthInfo has no result to wait for).
		testkit.Until(5*time.Second, func() bool {
			out, ok := c.do("state", opWithin)
			return !ok || disconnected(out)
		})
		get := c.saw("get /")
		c.cell.saw = "addauth: " + add + ", then get: " + get
		if strings.HasPrefix(c.kind.name, "node-zookeeper-client") && (get == "AUTH_FAILED" || get == "CONNECTION_LOSS") {
			// Whether this client handles the AuthFailed reply before it sees the connection
			// close races inside the client, on ZooKeeper as on zkd: either is what it does.
			c.cell.saw = "addauth: " + add + ", then get: AUTH_FAILED or CONNECTION_LOSS (which the client sees first races)"
			c.cell.after = "state AUTH_FAILED or DISCONNECTED"
			return
		}
		if c.kind.name == "C cli_mt" && add == "ZAUTHFAILED" && (get == "exited" || get == "ZINVALIDSTATE") {
			// cli_mt's watcher closes the handle on the failure and the shell then exits: whether
			// the get meets the closed handle or the exited shell races inside cli_mt, on
			// ZooKeeper as on zkd.
			c.cell.saw = "addauth: " + add + ", then get: exited or ZINVALIDSTATE (cli_mt closes its handle and exits; which the get meets races)"
			c.cell.after = "state AUTH_FAILED_STATE"
			return
		}
		if get == "exited" {
			// cli_mt exits on the failure: report its state once it has.
			testkit.Until(5*time.Second, func() bool {
				out, ok := c.do("state", opWithin)
				return !ok || strings.Contains(out, "exited")
			})
		}
		c.stateAfter(true)
	})
	return ""
}

func wrongDigest(t *testing.T, tg target, cs []*client) string {
	addr := plainServer(t, tg)
	a := admin(t, []string{addr})
	for _, c := range cs {
		if _, err := a.Create("/secret-"+slug(c.kind.name), []byte("x"), 0, zk.DigestACL(zk.PermAll, "user", "right")); err != nil {
			t.Fatal(err)
		}
	}
	cs = connectAll(cs, []string{addr})
	each(cs, func(c *client) {
		add := c.saw("addauth digest user:wrong")
		get := c.saw("get /secret-" + slug(c.kind.name))
		c.cell.saw = "addauth: " + add + ", then get: " + get
		c.probeAfter("/probe-"+slug(c.kind.name), 5*time.Second)
	})
	return ""
}

// quota sets a hard limit of 2 nodes (the root and one child) on a directory per client, then
// has the client create two children.
func quota(enforce bool) func(t *testing.T, tg target, cs []*client) string {
	return func(t *testing.T, tg target, cs []*client) string {
		var flags []string
		if enforce {
			flags = []string{"-Dzookeeper.enforceQuota=true"}
		}
		var addr string
		if enforce {
			addr, _ = standalone(t, tg, nil, flags)
		} else {
			addr = plainServer(t, tg)
		}
		a := admin(t, []string{addr})
		for _, c := range cs {
			dir := "/quota/" + slug(c.kind.name)
			mkdirs(t, a, dir, "/zookeeper/quota"+dir)
			if _, err := a.Create("/zookeeper/quota"+dir+"/zookeeper_limits", []byte("count=-1,bytes=-1,countHardLimit=2,byteHardLimit=-1"), 0, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatal(err)
			}
			if _, err := a.Create("/zookeeper/quota"+dir+"/zookeeper_stats", []byte("count=1,bytes=0"), 0, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatal(err)
			}
		}
		cs = connectAll(cs, []string{addr})
		each(cs, func(c *client) {
			dir := "/quota/" + slug(c.kind.name)
			first := c.saw("create " + dir + "/a 0 p")
			second := c.saw("create " + dir + "/b 0 p")
			c.cell.saw = "2nd node: " + first + ", 3rd node: " + second
			c.probeAfter("/probe-"+slug(c.kind.name), 5*time.Second)
		})
		return ""
	}
}

// noQuorumCluster is a 3-server cluster with two members stopped by stopTwo. With readOnly, a
// ZooKeeper ensemble runs in read-only mode: the system property readonlymode.enabled on every
// JVM, and local sessions, since a ReadOnlyZooKeeperServer creates no other session (3.5 and
// later answer a read-only client's connect with an error otherwise). A survivor then serves
// read-only clients once it has given up on a quorum, some seconds after losing it.
func noQuorumCluster(t *testing.T, tg target, readOnly bool) (addrs []string, stopTwo func()) {
	var flags []string
	var cfg map[string]string
	if readOnly {
		flags = []string{"-Dreadonlymode.enabled=true"}
		cfg = map[string]string{"localSessionsEnabled": "true", "localSessionsUpgradingEnabled": "true"}
	}
	addrs, stops := ensemble(t, tg, flags, cfg)
	return addrs, func() {
		var wg sync.WaitGroup
		for _, stop := range stops[1:] {
			wg.Go(stop)
		}
		wg.Wait()
	}
}

// readOnlyMode reports whether the ZooKeeper server at addr says it is read-only (srvr).
func readOnlyMode(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return false
	}
	b, _ := io.ReadAll(c)
	return strings.Contains(string(b), "Mode: read-only")
}

func noQuorum(t *testing.T, tg target, cs []*client) string {
	addrs, stopTwo := noQuorumCluster(t, tg, false)
	a := admin(t, addrs)
	for _, c := range cs {
		mkdirs(t, a, "/quorum/"+slug(c.kind.name))
	}
	cs = connectAll(cs, addrs)
	stopTwo()
	each(cs, func(c *client) {
		// Once the client has noticed: a request sent before races the loss of the connection.
		if !testkit.Until(20*time.Second, func() bool {
			out, ok := c.do("state", opWithin)
			return !ok || disconnected(out)
		}) {
			c.cell.saw = "the client did not notice the loss of its server"
			return
		}
		if c.drv == nil {
			return
		}
		w := c.saw("create /quorum/" + slug(c.kind.name) + "/w 0 s")
		if c.drv != nil {
			g := c.saw("get /quorum")
			c.cell.saw = "create: " + w + ", get: " + g
			if strings.HasPrefix(c.kind.name, "Curator") && curatorLoss(w) && curatorLoss(g) {
				// Curator expires a session itself once it has been SUSPENDED for the session
				// timeout, and the create's retries (connection timeout 2 s, two retries) end
				// close to that: which error each request gets races Curator's own clock, on
				// ZooKeeper as on zkd (a CI run on zkd saw the create expire).
				c.cell.saw = "create: ConnectionLossException, get: ConnectionLossException " +
					"(SessionExpiredException once Curator expires the session itself, the session timeout after SUSPENDED)"
			}
		}
		if c.cell.hang {
			// A client that waits for a reconnection may first fail a request it had sent on a
			// connection attempt that then broke (kazoo on zkd, sometimes): which request is
			// left without an answer races those attempts.
			c.cell.saw = "a request gets no answer"
			return
		}
		// No state afterwards: a client that retries the surviving member may be connecting or
		// briefly connected (the Java client, on zkd, in a CI run) when asked.
	})
	return ""
}

// curatorLoss reports whether a Curator request failed as it may once the connection is lost.
func curatorLoss(saw string) bool {
	return saw == "ConnectionLossException" || saw == "SessionExpiredException"
}

// disconnected reports whether a state answer says the client has lost its connection.
func disconnected(state string) bool {
	for _, f := range strings.Fields(state) {
		switch f {
		case "Disconnected", "SUSPENDED", "LOST", "StateConnecting", "StateDisconnected", "DISCONNECTED",
			"CONNECTING_STATE", "exited", "AUTH_FAILED", "AuthFailed", "AUTH_FAILED_STATE":
			return true
		}
	}
	return false
}

func notReadOnly(t *testing.T, tg target, cs []*client) string {
	addrs, stopTwo := noQuorumCluster(t, tg, true)
	admin(t, addrs).Close() // the ensemble has formed
	stopTwo()
	if tg == zookeeper && !testkit.Until(30*time.Second, func() bool { return readOnlyMode(addrs[0]) }) {
		t.Fatal("the surviving ZooKeeper server did not turn read-only")
	}
	run := only(cs, func(c *client) bool { return c.kind.readOnly }, "the client has no read-only sessions")
	each(run, func(c *client) {
		ro := "1"
		out, ok := c.do(fmt.Sprintf("connect %s 6000 %s", addrs[0], ro), connectWithin)
		if !ok {
			c.cell.saw = "connect: " + out
			c.stateOnlyAfter()
			return
		}
		r := c.saw("get /")
		w := c.saw("create /ro-" + slug(c.kind.name) + " 0 p")
		c.cell.saw = "connected; get: " + r + ", create: " + w
		c.stateOnlyAfter()
	})
	return ""
}

func shuttingDown(t *testing.T, tg target, cs []*client) string {
	addr, stop := standalone(t, tg, nil, nil)
	a := admin(t, []string{addr})
	for _, c := range cs {
		mkdirs(t, a, "/flight/"+slug(c.kind.name))
	}
	run := only(cs, notCliMt, "the driver gives cli_mt one request at a time")
	run = connectAll(run, []string{addr})
	started := make(chan struct{})
	go func() {
		// Stop once requests are being applied: some are then answered, some in flight.
		testkit.Until(20*time.Second, func() bool {
			for _, c := range run {
				if _, s, err := a.Children("/flight/" + slug(c.kind.name)); err == nil && s.NumChildren > 0 {
					return true
				}
			}
			return false
		})
		stop()
		close(started)
	}()
	each(run, func(c *client) {
		out, ok := c.do("burst /flight/"+slug(c.kind.name)+" 500", burstWait+opWithin)
		if !ok {
			c.cell.saw = out
			return
		}
		c.cell.saw = burstOutcome(t, c.kind.name, out)
		// The client's state right after the shutdown races its noticing it: what holds is
		// that the client still answers.
		if _, ok := c.do("state", opWithin); ok {
			c.cell.after = "the client answers"
		}
		if f := strings.Fields(out); len(f) == 5 && f[4] != "0" {
			// A call is blocked in the client until it reconnects, and so would be its close:
			// a fresh driver serves the next condition.
			c.drv.stop()
			c.drv = nil
		}
	})
	<-started
	return ""
}

func reconfigDisabled(t *testing.T, tg target, cs []*client) string {
	addr := plainServer(t, tg)
	run := only(cs, func(c *client) bool { return !strings.HasPrefix(c.kind.name, "node-") }, "the client has no reconfig")
	run = connectAll(run, []string{addr})
	each(run, func(c *client) {
		c.cell.saw = c.saw("reconfig")
		c.probeAfter("/probe-"+slug(c.kind.name), 5*time.Second)
	})
	return ""
}

// burstOutcome describes a burst's answer ("<answered> <failed> <pending> <error names|->",
// and from kazoo "<not issued>": calls blocked in the client). How many requests the server
// answered, failed or left to a reconnection depends on when the shutdown lands, so the cell
// does not say (the log does); what it says holds whenever the client answered.
func burstOutcome(t *testing.T, name, out string) string {
	f := strings.Fields(out)
	if len(f) != 4 && len(f) != 5 {
		return "unexpected answer " + out
	}
	t.Logf("%s: burst: %s answered, %s failed (%s), %s pending", name, f[0], f[1], f[3], f[2])
	s := "answered, failed or held for a reconnection"
	if len(f) == 5 {
		// Whether kazoo blocks in a run depends on how many calls it had made when the
		// connection broke, so the cell states it whether or not this run saw it.
		t.Logf("%s: burst: %s calls blocked", name, f[4])
		s += " (kazoo's create_async itself can block until a reconnection once its wake-up socket is full)"
	}
	return s
}
