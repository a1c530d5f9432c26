package server_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkd-io/zkd/internal/testkit/apachezk"
	"github.com/zkd-io/zkd/internal/testkit/pyclient"
	"github.com/zkd-io/zkd/internal/testkit/zktest"
	"github.com/zkd-io/zkd/server"
	"github.com/zkd-io/zkd/server/zkdtest"
)

// Clients hold sessions open well past the maximum session timeout, idle (only their pings) and
// busy (a few operations every 100 ms), with go-zookeeper, kazoo and the Java client, on zkd
// standalone, a zkd cluster and real ZooKeeper, and must never lose their connection: a healthy
// client is never disconnected by ZooKeeper, so never by zkd.

// heldSession is what one long-lived session went through.
type heldSession struct {
	client, name                    string
	connects, disconnects, sessions int
	errors, ops                     int
	log                             string // the client's own account, for a failure message
}

// check fails t unless the session connected once, never lost its connection or its session,
// and (when busy) did its operations without an error.
func (h heldSession) check(t *testing.T) {
	t.Helper()
	busy := strings.HasPrefix(h.name, "busy")
	if h.connects != 1 || h.disconnects != 0 || h.sessions != 1 || h.errors != 0 || (busy && h.ops == 0) {
		t.Errorf("%s %s session: connected %d times, disconnected %d, %d session ids, %d errors, %d ops; want one connection that never dropped%s\n%s",
			h.client, h.name, h.connects, h.disconnects, h.sessions, h.errors, h.ops, map[bool]string{true: " and its ops done"}[busy], h.log)
	}
}

// heldTarget is where the long-lived clients connect: client addresses, plain and (when not
// empty, and the clients are given TLS files) TLS.
type heldTarget struct {
	plain, tls []string
}

// heldTLS are the client-side files for TLS sessions.
type heldTLS struct {
	pki      *pki
	goConfig *tls.Config
	// kazoo's PEM files; the Java client's PKCS12 stores and their password.
	ca, cert, key              string
	keyStore, trustStore, pass string
}

func newHeldTLS(t *testing.T) *heldTLS {
	p := newPKI(t)
	leaf := p.client(t, acmeSubject)
	h := &heldTLS{pki: p, goConfig: p.clientTLS(t, leaf), ca: p.path("ca.pem"), cert: p.path("held.crt"), key: p.path("held.key"),
		keyStore: p.path("held.p12"), trustStore: p.path("trust.p12"), pass: "changeit"}
	leaf.WriteCertAndKey(t, h.cert, h.key)
	leaf.WritePKCS12(t, h.keyStore, h.pass)
	p.ca.WritePKCS12(t, h.trustStore, h.pass)
	return h
}

// startZkdHeld starts a zkd server and a 3-server zkd cluster with tickTime tick and TLS ports,
// and returns them as targets for holdClients.
func startZkdHeld(t *testing.T, tick time.Duration, h *heldTLS) ([]string, map[string]heldTarget) {
	s := zkdtest.Start(t, zkdHeldOption(t, tick, h))
	cl := zkdtest.StartCluster(t, 3, zkdHeldOption(t, tick, h))
	tg := heldTarget{plain: cl.Addrs()}
	for _, s := range cl.Servers {
		tg.tls = append(tg.tls, s.SecureAddr())
	}
	return []string{"zkd-standalone", "zkd-cluster"}, map[string]heldTarget{
		"zkd-standalone": {plain: []string{s.Addr()}, tls: []string{s.SecureAddr()}},
		"zkd-cluster":    tg,
	}
}

// zkdHeldOption configures a zkd server as zoo.cfg with tickTime tick would (session timeouts 2
// to 20 ticks), with a TLS port when h is not nil.
func zkdHeldOption(t *testing.T, tick time.Duration, h *heldTLS) zkdtest.Option {
	return zkdtest.WithConfig(func(c *server.Config) {
		c.TickTime, c.MinSessionTimeout, c.MaxSessionTimeout = tick, 2*tick, 20*tick
		// An election drops a cluster's clients, in zkd as in ZooKeeper; these tests are about
		// healthy connections, so the cluster gets a heartbeat timeout that a loaded CI machine
		// running the race detector does not miss.
		c.Consensus.HeartbeatTimeout = 2 * time.Second
		if h != nil {
			c.TLS = h.pki.serverTLS(t)
			c.SecureAddr = "127.0.0.1:0"
		}
	})
}

// heldRun is one client's sessions on one target.
type heldRun struct {
	target, client string
	sessions       []heldSession
	skip           string // why the client could not run here
	err            error
}

// holdClients holds sessions of every client on every target at once for d, each asking for
// the longest session timeout, maxTimeout, then checks in a subtest per target and client that
// none was disconnected. (Parallel subtests would run only GOMAXPROCS at a time; these mostly
// wait.)
func holdClients(t *testing.T, targets []string, tgs map[string]heldTarget, maxTimeout, d time.Duration, h *heldTLS) {
	var runs []*heldRun
	var wg sync.WaitGroup
	for _, name := range targets {
		for _, client := range []string{"go-zookeeper", "kazoo", "java"} {
			r := &heldRun{target: name, client: client}
			runs = append(runs, r)
			wg.Go(func() { r.sessions, r.skip, r.err = holdWith(t.Context(), client, tgs[name], maxTimeout, d, h) })
		}
	}
	wg.Wait()
	for _, r := range runs {
		t.Run(r.target+"/"+r.client, func(t *testing.T) {
			if r.skip != "" {
				t.Skip(r.skip)
			}
			if r.err != nil {
				t.Fatal(r.err)
			}
			for _, s := range r.sessions {
				s.check(t)
			}
		})
	}
}

// holdWith holds the sessions of one client on tg for d.
func holdWith(ctx context.Context, client string, tg heldTarget, maxTimeout, d time.Duration, h *heldTLS) ([]heldSession, string, error) {
	timeout := strconv.Itoa(int(maxTimeout.Milliseconds()))
	switch client {
	case "go-zookeeper":
		return holdGoZookeeper(tg, maxTimeout, d, h), "", nil
	case "kazoo":
		py, err := pyclient.Kazoo()
		if err != nil {
			return nil, err.Error(), nil
		}
		args := []string{filepath.Join("testdata", "long_lived.py"), strings.Join(tg.plain, ","), secs(d), timeout}
		if h != nil && len(tg.tls) > 0 {
			args = append(args, strings.Join(tg.tls, ","), h.ca, h.cert, h.key)
		}
		got, err := runHeldClient(ctx, "kazoo", d, py, args...)
		return got, "", err
	default:
		java, err := exec.LookPath("java")
		if err != nil {
			return nil, "no java for the ZooKeeper Java client", nil
		}
		if err := apachezk.Installed(); err != nil {
			return nil, err.Error(), nil
		}
		cp := strings.Join(append([]string{apachezk.Jar}, apachezk.NettyTLSJars()...), ":")
		args := []string{"-Xmx128m", "-cp", cp, filepath.Join("testdata", "LongLived.java"), strings.Join(tg.plain, ","), secs(d), timeout}
		if h != nil && len(tg.tls) > 0 {
			args = append(args, strings.Join(tg.tls, ","), h.keyStore, h.trustStore, h.pass)
		}
		got, err := runHeldClient(ctx, "java", d, java, args...)
		return got, "", err
	}
}

func secs(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) }

var heldResult = regexp.MustCompile(`(?m)^result (\S+) connects=(\d+) disconnects=(\d+) sessions=(\d+) errors=(\d+) ops=(\d+)$`)

// runHeldClient runs a client program that holds sessions for d and returns the sessions it
// reports (testdata/long_lived.py and LongLived.java print the same result lines).
func runHeldClient(ctx context.Context, client string, d time.Duration, name string, args ...string) ([]heldSession, error) {
	ctx, cancel := context.WithTimeout(ctx, d+3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s: %v\n%s", client, err, out)
	}
	var got []heldSession
	for _, m := range heldResult.FindAllStringSubmatch(string(out), -1) {
		n := func(i int) int { v, _ := strconv.Atoi(m[i]); return v }
		got = append(got, heldSession{client: client, name: m[1], connects: n(2), disconnects: n(3), sessions: n(4), errors: n(5), ops: n(6), log: string(out)})
	}
	if len(got) == 0 {
		return nil, fmt.Errorf("%s reported no session:\n%s", client, out)
	}
	return got, nil
}

// holdGoZookeeper holds go-zookeeper sessions, idle and busy, plain and (with h) TLS, for d.
func holdGoZookeeper(tg heldTarget, maxTimeout, d time.Duration, h *heldTLS) []heldSession {
	type spec struct {
		name  string
		hosts []string
		tls   bool
	}
	specs := []spec{{"idle", tg.plain, false}, {"busy", tg.plain, false}}
	if h != nil && len(tg.tls) > 0 {
		specs = append(specs, spec{"idle-tls", tg.tls, true}, spec{"busy-tls", tg.tls, true})
	}
	out := make([]heldSession, len(specs))
	until := time.Now().Add(d)
	var wg sync.WaitGroup
	for i, sp := range specs {
		wg.Go(func() {
			dial := zk.Dialer(net.DialTimeout)
			if sp.tls {
				dial = func(network, addr string, timeout time.Duration) (net.Conn, error) {
					return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, network, addr, h.goConfig)
				}
			}
			out[i] = holdGoSession(sp.name, sp.hosts, maxTimeout, until, dial)
		})
	}
	wg.Wait()
	return out
}

// holdGoSession holds one go-zookeeper session until the given time.
func holdGoSession(name string, hosts []string, timeout time.Duration, until time.Time, dial zk.Dialer) heldSession {
	hs := heldSession{client: "go-zookeeper", name: name}
	var log strings.Builder
	start := time.Now()
	say := func(format string, a ...any) {
		fmt.Fprintf(&log, "%7.1f %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, a...))
	}
	c, events, err := zk.Connect(hosts, timeout, zk.WithLogInfo(false), zk.WithLogger(quietLogger{}), zk.WithDialer(dial))
	if err != nil {
		hs.errors++
		hs.log = err.Error()
		return hs
	}
	ids := map[int64]bool{}
	var mu sync.Mutex
	stopping := false
	established := make(chan struct{}) // closed at the first session
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for ev := range events {
			if ev.Type != zk.EventSession {
				continue
			}
			mu.Lock()
			say("state %v", ev.State)
			switch {
			case stopping:
				// Close ends the session and the connection.
			case ev.State == zk.StateHasSession:
				if hs.connects == 0 {
					close(established)
				}
				hs.connects++
				ids[c.SessionID()] = true
			case hs.connects == 0:
				// Before its first session the client may be turned away (a member not serving
				// yet), as ZooKeeper turns it away; only a drop of an established session counts.
			case ev.State == zk.StateDisconnected, ev.State == zk.StateExpired, ev.State == zk.StateAuthFailed:
				hs.disconnects++
			}
			mu.Unlock()
		}
	}()
	busy := strings.HasPrefix(name, "busy")
	path := fmt.Sprintf("/long-lived-go-%d-%s-%d", os.Getpid(), name, time.Now().UnixNano())
	// Operations start once the session is established: a first connection attempt may fail
	// (go-zookeeper gives up on a server after 1 s, which a cold JVM's TLS handshake can take)
	// and fail what was queued, on ZooKeeper as on zkd; that is not a long-lived connection's drop.
	select {
	case <-established:
	case <-time.After(time.Until(until)):
	}
	for time.Now().Before(until) {
		if !busy {
			// An idle session: the test holds it for a span of real time, with nothing to wait on.
			time.Sleep(min(500*time.Millisecond, time.Until(until)))
			continue
		}
		err := func() error {
			if _, _, err := c.Exists("/"); err != nil {
				return err
			}
			if _, err := c.Create(path, []byte("v"), 0, zk.WorldACL(zk.PermAll)); err != nil {
				return err
			}
			if _, err := c.Set(path, []byte("w"), -1); err != nil {
				return err
			}
			return c.Delete(path, -1)
		}()
		mu.Lock()
		if err != nil {
			hs.errors++
			say("error %v", err)
			_ = c.Delete(path, -1)
		} else {
			hs.ops += 4
		}
		mu.Unlock()
		// Pacing on the real clock, which this test is about: a busy session keeps working through
		// the whole hold, past the maximum session timeout on real servers (ZooKeeper's JVM among
		// them), at a few ops a second, not a flood. There is no event to pace on.
		time.Sleep(100 * time.Millisecond)
	}
	mu.Lock()
	stopping = true
	mu.Unlock()
	c.Close()
	<-watched
	hs.sessions = len(ids)
	hs.log = log.String()
	return hs
}

// TestLongLivedClients holds clients of every kind, plain and TLS, on zkd standalone, a zkd
// cluster and real ZooKeeper, for 2.5 times the maximum session timeout, with a short tickTime
// (500 ms: session timeouts up to 10 s) so that it takes seconds. Until the writer cleared its
// write deadline, zkd dropped every one of these connections once the maximum session timeout
// had passed.
func TestLongLivedClients(t *testing.T) {
	if testing.Short() {
		t.Skip("holds client sessions for 25 s")
	}
	const tick = 500 * time.Millisecond
	const maxTimeout, hold = 20 * tick, 25 * time.Second
	h := newHeldTLS(t)
	targets, tgs := startZkdHeld(t, tick, h)
	if apachezk.Installed() == nil {
		z := startZooKeeperTLS(t, h.pki.props(map[string]string{"tickTime": strconv.Itoa(int(tick.Milliseconds()))}))
		tgs["zookeeper"] = heldTarget{plain: []string{z.plain}, tls: []string{z.secure}}
		targets = append(targets, "zookeeper")
	}
	holdClients(t, targets, tgs, maxTimeout, hold, h)
}

// TestLongLivedClientsRealTime is the same check as a user meets it: zoo.cfg's stock tickTime
// of 2 s (a maximum session timeout of 40 s), sessions held for 3 minutes (ZKD_HOLD overrides,
// as a Go duration), on zkd standalone, a zkd cluster, and a real ZooKeeper server (plain and
// TLS) and ensemble (plain).
func TestLongLivedClientsRealTime(t *testing.T) {
	if testing.Short() {
		t.Skip("holds client sessions for minutes")
	}
	const tick = 2 * time.Second
	hold := 3 * time.Minute
	if v := os.Getenv("ZKD_HOLD"); v != "" {
		var err error
		if hold, err = time.ParseDuration(v); err != nil {
			t.Fatalf("ZKD_HOLD: %v", err)
		}
	}
	t.Parallel()
	h := newHeldTLS(t)
	targets, tgs := startZkdHeld(t, tick, h)
	if zktest.Check() == nil {
		z := startZooKeeperTLS(t, h.pki.props(nil)) // zoo.cfg's stock tickTime
		tgs["zookeeper"] = heldTarget{plain: []string{z.plain}, tls: []string{z.secure}}
		tgs["zookeeper-ensemble"] = heldTarget{plain: zktest.Ensemble(t).Addrs}
		targets = append(targets, "zookeeper", "zookeeper-ensemble")
	}
	holdClients(t, targets, tgs, 20*tick, hold, h)
}
