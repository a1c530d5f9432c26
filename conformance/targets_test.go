package conformance

import (
	"context"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkd-io/zkd/internal/testkit"
	"github.com/zkd-io/zkd/internal/testkit/zktest"
	"github.com/zkd-io/zkd/server"
	"go.uber.org/goleak"
)

// suite holds the targets built once for the whole test binary in TestMain.
type suite struct {
	targets []*Target
	// skip is why there is no target at all (the tests skip with it).
	skip string
	// runID makes this run's paths unique, so reruns against one server do not collide.
	runID string
	// external are the targets the suite did not start (CONFORMANCE_ADDR): their nodes are
	// deleted after the run.
	external []*Target
}

// theSuite is written once in TestMain before any test runs and only read afterwards.
var theSuite suite

// reapInterval is how often the in-process zkd targets reap empty containers and expired TTL
// nodes: short, so the reaping checks see it happen (ZooKeeper's default is 60 s).
const reapInterval = 500 * time.Millisecond

// zkdConfig is the configuration of the in-process zkd targets and the capabilities it gives:
// every four-letter word, TTL nodes, a super digest and reaping every reapInterval.
func zkdConfig() (server.Config, Capabilities) {
	const superUser, superPassword = "super", "conformance-secret"
	sum := sha1.Sum([]byte(superUser + ":" + superPassword))
	cfg := server.Config{
		TickTime:             2 * time.Second,
		MaxClientConns:       -1,
		FourLetterWords:      []string{"*"},
		ExtendedTypesEnabled: true,
		SuperDigest:          superUser + ":" + base64.StdEncoding.EncodeToString(sum[:]),
	}
	cfg.Consensus.ReapInterval = reapInterval
	// The suite checks semantics, not failover speed: a loose heartbeat keeps a loaded CI machine
	// (the race detector, other packages' tests, real ZooKeeper JVMs) from causing false elections
	// in the shared cluster target, which would show up as connection losses in unrelated checks.
	cfg.Consensus.HeartbeatTimeout = time.Second
	caps := Capabilities{TTL: true, SuperAuth: superUser + ":" + superPassword, AllFourLetterWords: true,
		FastReap: true}
	return cfg, caps
}

// inProcessTargets starts the in-process zkd targets: a standalone server and a 3-node cluster on
// 127.0.0.1:0, in memory, configured like a stock ZooKeeper (tickTime 2s, so sessions negotiate
// 4s..40s) with the switches the suite can check turned on: every four-letter word, TTL nodes, a
// super digest, and reconfig on the cluster. CONFORMANCE_ZKD=0 leaves them out (to run only
// against CONFORMANCE_ADDR or the real ZooKeeper).
func inProcessTargets() (targets []*Target, stop func(), err error) {
	if os.Getenv("CONFORMANCE_ZKD") == "0" {
		return nil, func() {}, nil
	}
	cfg, caps := zkdConfig()

	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	shutdown := func(f func(context.Context) error) func() {
		return func() {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			_ = f(ctx)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	s, err := server.Start(cfg)
	if err != nil {
		return nil, stop, fmt.Errorf("start zkd: %w", err)
	}
	stops = append(stops, shutdown(s.Shutdown))
	if err := s.WaitServing(ctx); err != nil {
		return nil, stop, fmt.Errorf("zkd: %w", err)
	}
	targets = append(targets, &Target{Name: "zkd", Addrs: []string{s.Addr()}, Caps: caps,
		Version: ServerVersion(s.Addr(), 3*time.Second)})

	ccfg := cfg
	ccfg.ReconfigEnabled = true
	cl, err := server.StartCluster(ccfg, 3)
	if err != nil {
		return nil, stop, fmt.Errorf("start zkd cluster: %w", err)
	}
	stops = append(stops, shutdown(cl.Shutdown))
	for _, m := range cl.Servers {
		if err := m.WaitServing(ctx); err != nil {
			return nil, stop, fmt.Errorf("zkd cluster: %w", err)
		}
	}
	ccaps := caps
	ccaps.Reconfig = true
	targets = append(targets, &Target{Name: "zkd-cluster", Addrs: cl.Addrs(), Caps: ccaps,
		Version: ServerVersion(cl.Addrs()[0], 3*time.Second)})
	return targets, stop, nil
}

func TestMain(m *testing.M) {
	flag.Parse()
	// Checks spend most of their time waiting on the network; run more of them at once than the
	// default GOMAXPROCS, unless -parallel was given.
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		_ = flag.Set("test.parallel", "8")
	}
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	theSuite.runID = fmt.Sprintf("%x", time.Now().UnixNano())
	stop, err := buildTargets()
	if err != nil {
		stop()
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	for _, tg := range theSuite.external {
		if err := deleteTree(tg.Addrs[:1], "/zkconf-"+theSuite.runID); err != nil {
			fmt.Fprintf(os.Stderr, "conformance: clean up on %s: %v\n", tg.Name, err)
		}
		if err := deleteTree(tg.Addrs[:1], "/zookeeper/quota/zkconf-"+theSuite.runID); err != nil {
			fmt.Fprintf(os.Stderr, "conformance: clean up quotas on %s: %v\n", tg.Name, err)
		}
	}
	stop()
	if code == 0 {
		// Every goroutine the checks start must be gone. go-zookeeper winds its connection down
		// asynchronously after Close returns, so its loops are not counted; nor is the goroutine
		// consensus parks on a hashicorp/raft future that raft never answers because it shut down
		// with the future still queued (the server and consensus suites make the same exception).
		if err := goleak.Find(
			goleak.IgnoreTopFunction("github.com/go-zookeeper/zk.(*Conn).loop"),
			goleak.IgnoreTopFunction("github.com/go-zookeeper/zk.(*Conn).sendLoop"),
			goleak.IgnoreTopFunction("github.com/go-zookeeper/zk.(*Conn).recvLoop"),
			goleak.IgnoreTopFunction("github.com/zkd-io/zkd/internal/third_party/raft.(*deferError).Error"),
		); err != nil {
			fmt.Fprintln(os.Stderr, "conformance: leaked goroutines:", err)
			return 1
		}
	}
	return code
}

// buildTargets fills theSuite.targets: the in-process zkd targets, then CONFORMANCE_ADDR if set,
// else a real standalone ZooKeeper started here when one is installed, plus a real 3-server
// ensemble when CONFORMANCE_ZK_ENSEMBLE is set.
func buildTargets() (stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	inproc, stopInproc, err := inProcessTargets()
	if err != nil {
		return stop, fmt.Errorf("conformance: start in-process targets: %w", err)
	}
	stops = append(stops, stopInproc)
	theSuite.targets = append(theSuite.targets, inproc...)

	if addr := os.Getenv("CONFORMANCE_ADDR"); addr != "" {
		addrs, err := ParseAddrs(addr)
		if err != nil {
			return stop, err
		}
		caps, err := ParseCapabilities(os.Getenv("CONFORMANCE_CAPS"))
		if err != nil {
			return stop, err
		}
		tg := &Target{Name: "addr", Addrs: addrs, Caps: caps, Version: ServerVersion(addrs[0], 3*time.Second),
			Reference: os.Getenv("CONFORMANCE_REFERENCE") != ""}
		theSuite.targets = append(theSuite.targets, tg)
		theSuite.external = append(theSuite.external, tg)
		return stop, nil
	}
	if err := zktest.Check(); err != nil {
		if len(theSuite.targets) == 0 {
			theSuite.skip = "no target: CONFORMANCE_ADDR is unset and " + err.Error()
		} else {
			fmt.Fprintf(os.Stderr, "conformance: SKIPPING the real ZooKeeper target: %v\n", err)
		}
		return stop, nil
	}
	dir, err := os.MkdirTemp("", "conformance-zk-")
	if err != nil {
		return stop, fmt.Errorf("conformance: temp dir: %w", err)
	}
	if os.Getenv("CONFORMANCE_KEEP_DIR") != "" {
		fmt.Fprintf(os.Stderr, "conformance: ZooKeeper files kept in %s\n", dir)
	} else {
		stops = append(stops, func() { _ = os.RemoveAll(dir) })
	}
	zkSrv, err := zktest.StartZooKeeper(dir)
	if err != nil {
		return stop, fmt.Errorf("conformance: start ZooKeeper: %w", err)
	}
	stops = append(stops, func() { _ = zkSrv.Stop() })
	tg := &Target{
		Name:  "zookeeper",
		Addrs: zkSrv.Addrs,
		// zktest (internal/testkit/apachezk) whitelists every four-letter word and leaves
		// extendedTypesEnabled, reconfigEnabled and superDigest at their stock defaults (off).
		Caps:      Capabilities{AllFourLetterWords: true},
		Version:   ServerVersion(zkSrv.Addrs[0], 3*time.Second),
		Reference: true,
	}
	theSuite.targets = append(theSuite.targets, tg)

	if os.Getenv("CONFORMANCE_ZK_ENSEMBLE") == "" {
		return stop, nil
	}
	ensDir := filepath.Join(dir, "ensemble")
	ens, err := zktest.StartEnsemble(ensDir)
	if err != nil {
		return stop, fmt.Errorf("conformance: start ZooKeeper ensemble: %w", err)
	}
	stops = append(stops, func() { _ = ens.Stop() })
	if err := waitServing(ens.Addrs, time.Minute); err != nil {
		return stop, err
	}
	theSuite.targets = append(theSuite.targets, &Target{
		Name:    "zookeeper-ensemble",
		Addrs:   ens.Addrs,
		Caps:    Capabilities{AllFourLetterWords: true},
		Version: ServerVersion(ens.Addrs[0], 3*time.Second),
	})
	return stop, nil
}

// waitServing polls srvr on every address until each reports a leader or follower mode, so a
// server still settling after the election does not fail the first checks.
func waitServing(addrs []string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for _, a := range addrs {
		var out string
		var err error
		if !testkit.Until(time.Until(deadline), func() bool { // the server offers no event to wait on
			out, err = FourLetterWord(a, "srvr", 3*time.Second)
			return err == nil && (strings.Contains(out, "\nMode: leader") || strings.Contains(out, "\nMode: follower"))
		}) {
			return fmt.Errorf("conformance: %s not serving after %v: %q, %v", a, within, out, err)
		}
	}
	return nil
}

// deleteTree deletes path and everything below it, children first; a missing path is no error.
func deleteTree(addrs []string, path string) error {
	c, events, err := zk.Connect(addrs, 10*time.Second, zk.WithLogger(discardLogger{}), zk.WithLogInfo(false))
	if err != nil {
		return err
	}
	defer c.Close()
	deadline := time.After(10 * time.Second)
	for ev := range events {
		if ev.State == zk.StateHasSession {
			break
		}
		select {
		case <-deadline:
			return fmt.Errorf("conformance: no session for clean-up")
		default:
		}
	}
	var walk func(p string) error
	walk = func(p string) error {
		kids, _, err := c.Children(p)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, k := range kids {
			if err := walk(p + "/" + k); err != nil {
				return err
			}
		}
		if err := c.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		return nil
	}
	return walk(path)
}
