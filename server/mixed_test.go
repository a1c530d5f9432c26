package server_test

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkd-io/zkd/internal/testkit"
	"github.com/zkd-io/zkd/internal/testkit/apachezk"
	"github.com/zkd-io/zkd/internal/testkit/pyclient"
	"github.com/zkd-io/zkd/internal/testkit/tcpproxy"
	"github.com/zkd-io/zkd/internal/testkit/zktest"
	"github.com/zkd-io/zkd/server"
	"github.com/zkd-io/zkd/server/zkdtest"
)

// A long-lived Curator client and a long-lived kazoo client create znodes and read them back
// for the whole hold, while other clients of theirs churn through proxies the test controls:
// sessions opened and closed, Curator's InterProcessMutex, LeaderLatch and
// InterProcessSemaphoreV2, kazoo's Lock, Semaphore and Election, connections cut under them,
// and sessions expired (the test cuts or stalls a victim's proxy until the server has expired
// its session). The long-lived clients must never be disconnected nor see an error, and every
// create they were told succeeded must exist at the end; the churn must get done; and a zkd
// server must have closed no connection for a reason other than the churn's own. The same runs
// against real ZooKeeper, whose behaviour the checks must allow. The clients are
// testdata/MixedClients.java and testdata/mixed_clients.py.

// mixedTarget is a server or cluster the mixed clients run against.
type mixedTarget struct {
	name  string
	addrs []string // the client addresses of its servers
	zkd   bool     // a zkd target, whose mntr counts connection closes by reason
	// warnings collects a zkd target's log at WARN and above: why a connection closed for an
	// unexpected reason.
	warnings *logBuffer
}

// mixedTimeouts are the session timeouts the clients ask for.
type mixedTimeouts struct {
	hold, churn, victim time.Duration
}

// mixedRun is what one client program did on one target.
type mixedRun struct {
	target, client string
	skip           string
	err            error
	held           []heldSession
	created        map[string]int // parent → creates acknowledged, parent/n-00000000 on
	uncertain      map[string]bool
	churn          map[string]int  // the churners' counts (sessions=, locks=, ...)
	expired        int             // victims the test expired
	expiryWaits    []time.Duration // from each victim's cut or stall to its ephemeral gone
	stalls, cuts   int             // how: by stalling or cutting the victim's proxy
	churnCuts      int             // churners' connections cut under them
	faults         []string        // what went wrong in the test's own driving
	log            string
}

// startZooKeeperTick starts a standalone Apache ZooKeeper with the given tickTime (session
// timeouts from 2 to 20 ticks, ZooKeeper's defaults).
func startZooKeeperTick(t *testing.T, tick time.Duration) string {
	p := zktest.Launch(t, 1, func(ports []int) apachezk.ServerConfig {
		return apachezk.ServerConfig{Dir: t.TempDir(), ClientAddr: fmt.Sprintf("127.0.0.1:%d", ports[0]), HeapMB: 256,
			Extra: map[string]string{"tickTime": strconv.Itoa(int(tick.Milliseconds()))}}
	})
	return p.ClientAddr()
}

// mixedTargets starts zkd standalone, a 3-node zkd cluster and, when installed, a real
// ZooKeeper server with the given tickTime (and, if ensemble, a real 3-server ensemble with the
// stock tickTime).
func mixedTargets(t *testing.T, tick time.Duration, ensemble bool) []mixedTarget {
	warnLogs := func(b *logBuffer) zkdtest.Option {
		return zkdtest.WithConfig(func(c *server.Config) { c.Logger = b.logger() })
	}
	sw, cw := &logBuffer{}, &logBuffer{}
	s := zkdtest.Start(t, zkdHeldOption(t, tick, nil), warnLogs(sw))
	cl := zkdtest.StartCluster(t, 3, zkdHeldOption(t, tick, nil), warnLogs(cw))
	tgs := []mixedTarget{{"zkd-standalone", []string{s.Addr()}, true, sw}, {"zkd-cluster", cl.Addrs(), true, cw}}
	if zktest.Check() == nil {
		tgs = append(tgs, mixedTarget{"zookeeper", []string{startZooKeeperTick(t, tick)}, false, nil})
		if ensemble {
			tgs = append(tgs, mixedTarget{"zookeeper-ensemble", zktest.Ensemble(t).Addrs, false, nil})
		}
	}
	return tgs
}

// mixedClients runs both client programs on every target at once for hold, then checks each
// in a subtest per target and client.
func mixedClients(t *testing.T, tgs []mixedTarget, to mixedTimeouts, hold time.Duration) {
	start := time.Now()
	var runs []*mixedRun
	var wg sync.WaitGroup
	for _, tg := range tgs {
		for _, client := range []string{"curator", "kazoo"} {
			r := &mixedRun{target: tg.name, client: client}
			runs = append(runs, r)
			wg.Go(func() { runMixed(t, r, tg, to, hold) })
		}
	}
	wg.Wait()
	t.Logf("the clients ran for %v (hold %v)", time.Since(start).Round(time.Second), hold)
	for _, tg := range tgs {
		var mine []*mixedRun
		for _, r := range runs {
			if r.target == tg.name {
				mine = append(mine, r)
			}
		}
		t.Run(tg.name, func(t *testing.T) { checkMixed(t, tg, mine) })
	}
}

var (
	mixedCreated   = regexp.MustCompile(`(?m)^created busy (\S+) (\d+)$`)
	mixedUncertain = regexp.MustCompile(`(?m)^uncertain busy (\S+)$`)
	mixedChurn     = regexp.MustCompile(`(?m)^churn \S+ (.*)$`)
	mixedReady     = regexp.MustCompile(`^\s*[\d.]+ expire-ready (\S+)$`)
)

// runMixed runs one client program on tg for hold, expiring its victims and cutting its
// churners' connections as it goes.
func runMixed(t *testing.T, r *mixedRun, tg mixedTarget, to mixedTimeouts, hold time.Duration) {
	// The churners have a proxy per server, and so do the victims: a victim turned away by one
	// member (behind what the victim has seen, or not serving) tries another.
	proxies := func() ([]*tcpproxy.Proxy, string) {
		var ps []*tcpproxy.Proxy
		var addrs []string
		for _, a := range tg.addrs {
			p, err := tcpproxy.New(a)
			if err != nil {
				r.err = err
				continue
			}
			t.Cleanup(p.Close)
			ps = append(ps, p)
			addrs = append(addrs, p.Addr())
		}
		return ps, strings.Join(addrs, ",")
	}
	churn, churnAddrs := proxies()
	victims, victimAddrs := proxies()
	if r.err != nil {
		return
	}
	prefix := fmt.Sprintf("/mixed-%s-%d", r.client, os.Getpid())
	ms := func(d time.Duration) string { return strconv.Itoa(int(d.Milliseconds())) }
	args := []string{strings.Join(tg.addrs, ","), churnAddrs, victimAddrs, secs(hold),
		ms(to.hold), ms(to.churn), ms(to.victim), prefix}
	var name string
	switch r.client {
	case "kazoo":
		py, err := pyclient.Kazoo()
		if err != nil {
			r.skip = err.Error()
			return
		}
		name, args = py, append([]string{filepath.Join("testdata", "mixed_clients.py")}, args...)
	default:
		java, err := exec.LookPath("java")
		if err != nil {
			r.skip = "no java for Curator"
			return
		}
		cp, err := apachezk.CuratorClasspath()
		if err != nil {
			r.skip = err.Error()
			return
		}
		name, args = java, append([]string{"-Xmx160m", "-cp", cp, filepath.Join("testdata", "MixedClients.java")}, args...)
	}

	// The test's own session on the target sees when a victim's session has expired (its
	// ephemeral znode is gone).
	obs, _, err := zk.Connect(tg.addrs, to.hold, zk.WithLogInfo(false), zk.WithLogger(quietLogger{}))
	if err != nil {
		r.err = err
		return
	}
	defer obs.Close()

	ctx, cancel := context.WithTimeout(t.Context(), hold+3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		r.err = err
		return
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		r.err = err
		return
	}

	var mu sync.Mutex // guards r's counts and faults while the drivers run
	fault := func(format string, a ...any) {
		mu.Lock()
		r.faults = append(r.faults, fmt.Sprintf(format, a...))
		mu.Unlock()
	}
	ready := make(chan string, 64)
	stop := make(chan struct{})
	var drivers sync.WaitGroup
	drivers.Go(func() {
		// Each victim in turn: its proxy is stalled (nothing passes, as in a partition) or cut
		// (connections closed and refused) until the server has expired the session, then lets
		// the victim through to learn of it.
		for path := range ready {
			bound := 10*to.victim + time.Minute
			// The test's session watches the victim's znode before the fault. (A plain read
			// could come from a member that has not applied the victim's create yet and call
			// the znode gone at once; sync first.)
			var ev <-chan zk.Event
			if !testkit.Until(bound, func() bool {
				if _, err := obs.Sync(path); err != nil {
					return false
				}
				ok, _, w, err := obs.ExistsW(path)
				if err == nil && ok {
					ev = w
				}
				return err == nil
			}) {
				fault("could not watch victim %s: the test's own session failed for %v", path, bound)
				continue
			}
			mu.Lock()
			stallIt := (r.stalls+r.cuts)%2 == 0
			if stallIt {
				r.stalls++
			} else {
				r.cuts++
			}
			mu.Unlock()
			for _, p := range victims {
				if stallIt {
					p.Stall()
				} else {
					p.Cut()
				}
			}
			faulted := time.Now()
			gone := ev == nil // the session had expired already
			if !gone {
				select {
				case e := <-ev:
					gone = e.Type == zk.EventNodeDeleted
				case <-time.After(bound):
				}
			}
			if !gone && time.Since(faulted) < bound {
				// The watch ended without the deletion (the test's own connection dropped): look.
				gone = testkit.Until(bound-time.Since(faulted), func() bool {
					if _, err := obs.Sync(path); err != nil {
						return false
					}
					ok, _, err := obs.Exists(path)
					return err == nil && !ok
				})
			}
			for _, p := range victims {
				p.Resume()
			}
			if !gone {
				fault("victim %s was not expired within %v", path, bound)
				continue
			}
			mu.Lock()
			r.expired++
			r.expiryWaits = append(r.expiryWaits, time.Since(faulted))
			mu.Unlock()
		}
	})
	drivers.Go(func() {
		// Now and then one churner's connection is cut under it; it reconnects in its session.
		// Paced on the real clock: the churn runs for a span of real time.
		tick := time.NewTicker(max(to.churn/2, 2*time.Second))
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			var live []*tcpproxy.Conn
			for _, p := range churn {
				live = append(live, p.Conns()...)
			}
			if len(live) > 0 {
				live[rand.IntN(len(live))].Cut()
				mu.Lock()
				r.churnCuts++
				mu.Unlock()
			}
		}
	})

	var log strings.Builder
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		log.WriteString(line + "\n")
		if m := mixedReady.FindStringSubmatch(line); m != nil {
			select {
			case ready <- m[1]:
			default:
				fault("too many victims waiting: %s", m[1])
			}
		}
	}
	err = cmd.Wait()
	close(ready)
	close(stop)
	drivers.Wait()
	r.log = log.String()
	if err != nil {
		r.err = fmt.Errorf("%s: %v\n%s", r.client, err, r.log)
		return
	}
	r.parse(obs)
}

// parse reads the program's report, and looks up the long-lived client's creates on obs.
func (r *mixedRun) parse(obs *zk.Conn) {
	for _, m := range heldResult.FindAllStringSubmatch(r.log, -1) {
		n := func(i int) int { v, _ := strconv.Atoi(m[i]); return v }
		r.held = append(r.held, heldSession{client: r.client, name: m[1], connects: n(2), disconnects: n(3), sessions: n(4),
			errors: n(5), ops: n(6), log: r.log})
	}
	r.created, r.uncertain, r.churn = map[string]int{}, map[string]bool{}, map[string]int{}
	for _, m := range mixedCreated.FindAllStringSubmatch(r.log, -1) {
		r.created[m[1]], _ = strconv.Atoi(m[2])
	}
	for _, m := range mixedUncertain.FindAllStringSubmatch(r.log, -1) {
		r.uncertain[m[1]] = true
	}
	for _, m := range mixedChurn.FindAllStringSubmatch(r.log, -1) {
		for kv := range strings.FieldsSeq(m[1]) {
			k, v, _ := strings.Cut(kv, "=")
			r.churn[k], _ = strconv.Atoi(v)
		}
	}
	// Every create the client was told succeeded must be there. (sync first: obs may be on a
	// member that has not applied the last of them yet.)
	for parent, n := range r.created {
		if _, err := obs.Sync(parent); err != nil {
			r.faults = append(r.faults, fmt.Sprintf("sync %s: %v", parent, err))
			continue
		}
		kids, _, err := obs.Children(parent)
		if err != nil {
			r.faults = append(r.faults, fmt.Sprintf("children of %s: %v", parent, err))
			continue
		}
		have := map[string]bool{}
		for _, k := range kids {
			have[k] = true
		}
		var missing []string
		for i := range n {
			name := fmt.Sprintf("n-%08d", i)
			if !have[name] && !r.uncertain[parent+"/"+name] {
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 {
			r.faults = append(r.faults, fmt.Sprintf("%d of the %d creates acknowledged under %s are missing: %v",
				len(missing), n, parent, missing[:min(len(missing), 10)]))
		}
	}
}

// mixedChurnKinds are the churners' counts that must have moved, per client.
var mixedChurnKinds = map[string][]string{
	"curator": {"sessions", "locks", "latches", "semaphores", "expiries"},
	"kazoo":   {"sessions", "locks", "elections", "semaphores", "expiries"},
}

// Closes a zkd server makes for the churn: clients closing their sockets or sessions, sessions
// expired (and the victims' reconnects told so), a session moving to a newer connection after
// a cut, a write still on its way through a cut connection refused once the churner has moved
// its session to another cluster member (the stale connection is closed, as ZooKeeper closes
// it), a churner reconnecting after a cut to a cluster member behind what it has seen (turned
// away to try another, as ZooKeeper turns it away), and the test's own mntr. client_idle
// (nothing came within the session timeout) is how a stalled victim's connection usually ends,
// before its session expires; it is not bounded by the stalls, since a victim with its short
// timeout on a loaded machine may go quiet by itself. The long-lived clients' own counts show
// that none of these closes was theirs. Any other reason is a fault.
var mixedExpectedCloses = map[string]bool{
	"client_closed": true, "session_closed": true, "session_expired": true, "session_reconnected": true,
	"session_moved": true, "handshake_refused": true, "four_letter_word": true, "client_idle": true,
}

func checkMixed(t *testing.T, tg mixedTarget, runs []*mixedRun) {
	stalls := 0
	for _, r := range runs {
		stalls += r.stalls
	}
	for _, r := range runs {
		t.Run(r.client, func(t *testing.T) {
			if r.skip != "" {
				t.Skip(r.skip)
			}
			if r.err != nil {
				t.Fatal(r.err)
			}
			if len(r.held) != 1 {
				t.Fatalf("%d long-lived sessions reported; want 1\n%s", len(r.held), r.log)
			}
			r.held[0].check(t)
			created := 0
			for _, n := range r.created {
				created += n
			}
			slices.Sort(r.expiryWaits)
			var median, longest time.Duration
			if n := len(r.expiryWaits); n > 0 {
				median, longest = r.expiryWaits[n/2], r.expiryWaits[n-1]
			}
			t.Logf("long-lived: %d ops, %d creates, %d disconnects, %d errors; churn %v; victims expired %d (%d stalls, %d cuts; expiry took %v median, %v at most), churn connections cut %d",
				r.held[0].ops, created, r.held[0].disconnects, r.held[0].errors, r.churn, r.expired, r.stalls, r.cuts,
				median.Round(time.Millisecond), longest.Round(time.Millisecond), r.churnCuts)
			if created == 0 {
				t.Errorf("the long-lived client created nothing\n%s", r.log)
			}
			for _, f := range r.faults {
				t.Error(f)
			}
			for _, k := range mixedChurnKinds[r.client] {
				if r.churn[k] == 0 {
					t.Errorf("churn: no %s done\n%s", k, r.log)
				}
			}
			if r.churn["errors"] != 0 {
				t.Errorf("churn: %d errors that are not a lost connection or session\n%s", r.churn["errors"], r.log)
			}
		})
	}
	if !tg.zkd {
		return
	}
	closed := map[string]float64{}
	for _, a := range tg.addrs {
		for k, v := range mntr(t, a) {
			if reason, ok := strings.CutPrefix(k, "zk_connections_closed_"); ok && v > 0 {
				closed[reason] += v
			}
		}
	}
	t.Logf("connections closed by reason: %v (victims stalled: %d)", closed, stalls)
	for _, reason := range slices.Sorted(maps.Keys(closed)) {
		if !mixedExpectedCloses[reason] {
			t.Errorf("%v connections closed for %s; the churn closes none for that; the servers' closes of that kind:\n%s",
				closed[reason], reason, strings.Join(tg.warnings.matching("reason="+reason), ""))
		}
	}
}

// TestMixedClients runs the mixed clients for 75 s with a 500 ms tickTime (session timeouts up
// to 10 s) on zkd standalone, a zkd cluster and, if installed, real ZooKeeper.
func TestMixedClients(t *testing.T) {
	if testing.Short() {
		t.Skip("runs clients for 75 s")
	}
	const tick = 500 * time.Millisecond
	t.Parallel()
	// The long-lived clients and the recipes' clients ask for the longest timeout, so that a
	// loaded machine does not cost them their connection; the victims the shortest.
	mixedClients(t, mixedTargets(t, tick, false), mixedTimeouts{hold: 20 * tick, churn: 20 * tick, victim: 2 * tick}, 75*time.Second)
}

// TestMixedClientsSoak is the long form (make soak-clients): zoo.cfg's stock tickTime of 2 s
// and ZKD_SOAK of clients (a Go duration), on zkd standalone, a zkd cluster, and a real
// ZooKeeper server and ensemble. It runs only when ZKD_SOAK is set.
func TestMixedClientsSoak(t *testing.T) {
	v := os.Getenv("ZKD_SOAK")
	if v == "" {
		t.Skip("set ZKD_SOAK (a duration, as make soak-clients does) to run the mixed clients for that long")
	}
	hold, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("ZKD_SOAK: %v", err)
	}
	const tick = 2 * time.Second
	mixedClients(t, mixedTargets(t, tick, true), mixedTimeouts{hold: 20 * tick, churn: 20 * tick, victim: 2 * tick}, hold)
}
