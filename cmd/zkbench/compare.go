package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zkd-io/zkd/internal/testkit/apachezk"
)

// benchSpec is one row group of the comparison: a named run configuration.
type benchSpec struct {
	Name string `json:"name"`
	cfg  config
}

// compareSpecs returns the runs of a comparison, each lasting d.
func compareSpecs(d time.Duration) []benchSpec {
	base := config{Duration: d, Clients: 32, Conns: 8, Size: 128, Keys: 1000}
	with := func(name, workload string, f func(*config)) benchSpec {
		c := base
		c.Workload = workload
		if f != nil {
			f(&c)
		}
		return benchSpec{Name: name, cfg: c}
	}
	return []benchSpec{
		with("create", "create", nil),
		with("set", "set", nil),
		with("get", "get", nil),
		with("mixed 90% reads", "mixed", func(c *config) { c.ReadRatio = 0.9 }),
		with("multi of 4 setData", "multi", func(c *config) { c.MultiOps = 4 }),
		with("ephemeral-sequential churn", "churn", nil),
		with("large values (256 KiB)", "large", func(c *config) { c.Clients, c.Conns = 8, 4 }),
		with("lock, 64 contenders", "lock", func(c *config) { c.Clients = 64 }),
		with("watch fan-out, 64 watchers", "watch", func(c *config) { c.Watchers = 64 }),
		with("session open+close", "session", func(c *config) { c.Clients = 16 }),
		with("single-client set", "set", func(c *config) { c.Clients, c.Conns = 1, 1 }),
		with("single-client get", "get", func(c *config) { c.Clients, c.Conns = 1, 1 }),
	}
}

// compareOptions are the harness's settings.
type compareOptions struct {
	ZkdBin     string
	ZkdArgs    string
	ZkdMissing string
	Work       string
	Out        string
	RawOut     string
	PortBase   int
	Repeat     int
	Duration   time.Duration
	Warmup     time.Duration
	Topologies []string
	Only       []string
	Memory     []int
	SnapZnodes int     // tree size of the snapshot comparison (0: skip it)
	SnapCount  int     // snapCount while snapshots are on
	SnapRate   float64 // offered setData rate of the snapshot runs
	// DropCaches drops the clean page cache before every run (needs root). Log files of
	// earlier runs otherwise fill the cache, and reclaiming it is charged to whichever
	// server writes next.
	DropCaches bool
	// Floor also measures the floor server (floor.go) in the same rotation: standalone, and for 3
	// nodes replicated (floorrepl.go).
	Floor   bool
	Command string
}

// runRecord is one measured run.
type runRecord struct {
	Topology string `json:"topology"`
	Bench    string `json:"bench"`
	Server   string `json:"server"`
	Repeat   int    `json:"repeat"`
	Result   result `json:"result"`
	Err      string `json:"error,omitempty"`
	// ServerCPU is the CPU time (user and system) every server process of the topology used
	// during the run, in seconds; zero when it could not be read.
	ServerCPU float64 `json:"server_cpu_s,omitempty"`
	// LoadCPU is the CPU time (user and system) this process, the load generator, used during
	// the run, in seconds; zero when it could not be read.
	LoadCPU float64 `json:"load_cpu_s,omitempty"`
}

// memRecord is one memory, startup and recovery measurement.
type memRecord struct {
	Server    string  `json:"server"`
	Znodes    int     `json:"znodes"`
	StartupMS float64 `json:"startup_ms"` // empty data dir, launch to serving
	Populate  float64 `json:"populate_s"`
	RSSMB     float64 `json:"rss_mb"`
	HeapMB    float64 `json:"heap_mb"`
	RestartMS float64 `json:"restart_ms"` // after kill -9: launch to the last znode readable
	RSSAfter  float64 `json:"rss_after_restart_mb"`
	Err       string  `json:"error,omitempty"`
}

// comparison is everything a report is made from.
type comparison struct {
	Options   compareOptions `json:"options"`
	Started   time.Time      `json:"started"`
	Finished  time.Time      `json:"finished"`
	ZkdReason string         `json:"zkd_missing,omitempty"`
	Specs     []string       `json:"specs"`
	Runs      []runRecord    `json:"runs"`
	Memory    []memRecord    `json:"memory"`
	Snapshots []snapRecord   `json:"snapshots"`
	Notes     []string       `json:"notes,omitempty"`
}

func compareMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("zkbench compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o compareOptions
	var topo, only, mem string
	fs.StringVar(&o.ZkdBin, "zkd", "", "zkd binary (empty or missing: ZooKeeper only)")
	missing := fs.String("zkd-missing", "", "why zkd is not measured (for the report, when -zkd is empty)")
	fs.StringVar(&o.ZkdArgs, "zkd-args", "-config {cfg}", "zkd arguments; {cfg} {port} {data} {dir} are replaced")
	fs.StringVar(&o.Work, "work", "", "directory for servers' files (default: a new temporary directory, removed after)")
	fs.StringVar(&o.Out, "out", "docs/benchmarks.md", "report to write")
	fs.StringVar(&o.RawOut, "raw", "", "also write every measurement as JSON here")
	fs.IntVar(&o.PortBase, "port-base", 24100, "first of 400 loopback ports to use")
	fs.IntVar(&o.Repeat, "repeat", 3, "repeats of every run (the report gives medians)")
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "length of every run")
	fs.DurationVar(&o.Warmup, "warmup", 5*time.Second, "unrecorded mixed load on each server before the runs (JIT, caches)")
	fs.StringVar(&topo, "topologies", "standalone,cluster", "standalone, cluster (3 nodes), or both")
	fs.StringVar(&only, "only", "", "comma-separated workload names to run (default: all)")
	fs.StringVar(&mem, "memory", "100000,1000000", "znode counts for the memory and restart measurements (empty: skip)")
	fs.IntVar(&o.SnapZnodes, "snapshot-znodes", 1000000, "znodes in the tree of the snapshot comparison (0: skip it)")
	fs.IntVar(&o.SnapCount, "snapshot-count", 10000, "snapCount of the runs with snapshots on")
	fs.BoolVar(&o.DropCaches, "drop-caches", os.Geteuid() == 0, "drop the clean page cache before every run (root only; default: on when root)")
	fs.Float64Var(&o.SnapRate, "snapshot-rate", 5000, "offered setData rate (ops/s) of the snapshot runs")
	fs.BoolVar(&o.Floor, "floor", false, "also measure the floor server (zkbench floor: the least work a durable server does), standalone and replicated")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.Topologies = splitAddrs(topo)
	o.Only = splitAddrs(only)
	for _, s := range splitAddrs(mem) {
		n, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("zkbench: -memory %q: %w", s, err)
		}
		o.Memory = append(o.Memory, n)
	}
	o.Command = "zkbench compare " + strings.Join(args, " ")
	if label := os.Getenv("ZKBENCH_COMMAND"); label != "" {
		o.Command = label // set by scripts/bench/run.sh, whose own command line is the one to rerun
	}
	o.ZkdMissing = *missing
	if err := apachezk.Installed(); err != nil {
		return fmt.Errorf("zkbench: compare needs Apache ZooKeeper: %w", err)
	}
	if o.Work == "" {
		w, err := os.MkdirTemp("", "zkbench-compare-")
		if err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(w) }()
		o.Work = w
	}
	cmp, err := compare(ctx, o, stderr)
	if cmp == nil {
		return err
	}
	if o.RawOut != "" {
		b, _ := json.MarshalIndent(cmp, "", "  ")
		if werr := os.WriteFile(o.RawOut, b, 0o644); werr != nil {
			err = errors.Join(err, werr)
		}
	}
	// The scale section ("zkbench scale") is another command's: keep it.
	report := renderReport(cmp)
	if kept := keptSection(o.Out); kept != "" {
		report = strings.TrimRight(report, "\n") + "\n\n" + kept
	}
	if werr := os.WriteFile(o.Out, []byte(report), 0o644); werr != nil {
		return errors.Join(err, werr)
	}
	_, _ = fmt.Fprintf(stdout, "wrote %s\n", o.Out)
	return err
}

// zkdAvailable reports why zkd cannot be compared, or "" if it can.
func zkdAvailable(bin, missing string) string {
	if bin == "" {
		if missing != "" {
			return missing
		}
		return "no zkd binary was given"
	}
	st, err := os.Stat(bin)
	if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Sprintf("zkd binary %s is missing or not executable", bin)
	}
	return ""
}

// compare runs the whole comparison.
func compare(ctx context.Context, o compareOptions, log io.Writer) (*comparison, error) {
	cmp := &comparison{Options: o, Started: time.Now().UTC(), ZkdReason: zkdAvailable(o.ZkdBin, o.ZkdMissing)}
	logf := func(format string, a ...any) { _, _ = fmt.Fprintf(log, "compare: "+format+"\n", a...) }
	if cmp.ZkdReason != "" {
		logf("zkd missing: %s; measuring ZooKeeper only", cmp.ZkdReason)
	}
	specs := compareSpecs(o.Duration)
	if len(o.Only) > 0 {
		var keep []benchSpec
		for _, s := range specs {
			for _, w := range o.Only {
				if s.cfg.Workload == w {
					keep = append(keep, s)
					break
				}
			}
		}
		specs = keep
	}
	for _, s := range specs {
		cmp.Specs = append(cmp.Specs, s.Name)
	}
	var errs []error
	for ti, topo := range o.Topologies {
		nodes := 1
		if topo == "cluster" {
			nodes = 3
		} else if topo != "standalone" {
			return cmp, fmt.Errorf("zkbench: unknown topology %q", topo)
		}
		base := o.PortBase + ti*100
		if err := compareTopology(ctx, o, cmp, specs, topo, nodes, base, logf); err != nil {
			errs = append(errs, err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	if len(o.Memory) > 0 && ctx.Err() == nil {
		if err := compareMemory(ctx, o, cmp, o.PortBase+len(o.Topologies)*100, logf); err != nil {
			errs = append(errs, err)
		}
	}
	if o.SnapZnodes > 0 && ctx.Err() == nil {
		if err := compareSnapshots(ctx, o, cmp, o.PortBase+(len(o.Topologies)+1)*100, logf); err != nil {
			errs = append(errs, err)
		}
	}
	cmp.Finished = time.Now().UTC()
	return cmp, errors.Join(errs...)
}

// compareTopology starts both servers in one topology and runs every spec on each, repeatedly,
// alternating which goes first so that machine noise falls on both.
func compareTopology(ctx context.Context, o compareOptions, cmp *comparison, specs []benchSpec, topo string, nodes, base int, logf func(string, ...any)) error {
	servers := map[string]*server{}
	defer func() {
		for _, s := range servers {
			if err := s.stop(); err != nil {
				logf("stopping %s: %v", s.kind, err)
			}
		}
	}()
	logf("%s: starting ZooKeeper on port %d", topo, base)
	zk, err := startZooKeeper(ctx, filepath.Join(o.Work, topo+"-zookeeper"), base, nodes)
	if err != nil {
		return err
	}
	servers[kindZooKeeper] = zk
	order := []string{kindZooKeeper}
	if cmp.ZkdReason == "" {
		logf("%s: starting zkd on port %d", topo, base+50)
		z, err := startZkd(ctx, o.ZkdBin, o.ZkdArgs, filepath.Join(o.Work, topo+"-zkd"), base+50, nodes)
		if err != nil {
			cmp.ZkdReason = fmt.Sprintf("zkd failed to start (%s): %v", topo, err)
			logf("%s", cmp.ZkdReason)
		} else {
			servers[kindZkd] = z
			order = append(order, kindZkd)
		}
	}
	if o.Floor {
		logf("%s: starting the floor server on port %d", topo, base+90)
		f, err := startFloor(ctx, filepath.Join(o.Work, topo+"-floor"), base+90, nodes)
		if err != nil {
			return fmt.Errorf("zkbench: floor server: %w", err)
		}
		servers[kindFloor] = f
		order = append(order, kindFloor)
	}
	if o.Warmup > 0 {
		for _, kind := range order {
			cfg := config{Addrs: servers[kind].addrs, Workload: "mixed", ReadRatio: 0.5, Clients: 32, Conns: 8, Duration: o.Warmup, Size: 128}
			res, err := run(ctx, cfg, nil)
			logf("%s: warm-up of %s: %.0f ops/s (not recorded) %v", topo, kind, res.Throughput, errOrEmpty(err))
		}
	}
	for rep := range o.Repeat {
		for si, spec := range specs {
			for k := range order {
				kind := order[(k+rep+si)%len(order)]
				if ctx.Err() != nil {
					return ctx.Err()
				}
				cfg := spec.cfg
				cfg.Addrs = servers[kind].addrs
				if nodes > 1 && cfg.Clients == 1 && kind != kindFloor {
					// One client measures one path through the cluster, so it takes the same
					// one on both servers: through a follower, where a ZooKeeper client
					// usually is (two servers in three), and where a write costs a hop more.
					if addr, err := followerAddr(servers[kind].addrs); err == nil {
						cfg.Addrs = []string{addr}
					} else {
						logf("%s: %s: no follower found, the client takes the first server: %v", topo, kind, err)
					}
				}
				// Whatever the previous run left dirty in the page cache (snapshot files need
				// not be fsynced) is written back now, not during this run.
				syscall.Sync()
				// cmp.Options, not o: a failure stops the tries for the rest of the comparison
				// and the report says the cache was not dropped.
				if cmp.Options.DropCaches {
					if err := dropCaches(); err != nil {
						logf("%s: cannot drop the page cache, no longer trying: %v", topo, err)
						cmp.Options.DropCaches = false
					}
				}
				if !settle(ctx, servers) {
					logf("%s: the servers did not go idle within %v; running anyway", topo, settleMax)
				}
				cpu0, cpuErr := servers[kind].cpuSeconds()
				load0, loadErr := selfCPUSeconds()
				res, err := run(ctx, cfg, nil)
				rec := runRecord{Topology: topo, Bench: spec.Name, Server: kind, Repeat: rep, Result: res}
				if cpu1, err1 := servers[kind].cpuSeconds(); cpuErr == nil && err1 == nil {
					rec.ServerCPU = cpu1 - cpu0
				}
				if load1, err1 := selfCPUSeconds(); loadErr == nil && err1 == nil {
					rec.LoadCPU = load1 - load0
				}
				if err != nil {
					rec.Err = err.Error()
				}
				cmp.Runs = append(cmp.Runs, rec)
				logf("%s rep %d %-28s %-9s %9.0f/s p50 %7.0fus p99 %8.0fus cpu %.1fs load cpu %.1fs errors %d %s",
					topo, rep+1, spec.Name, kind, res.Throughput, res.Latency.P50, res.Latency.P99, rec.ServerCPU, rec.LoadCPU, res.Errors, rec.Err)
			}
		}
	}
	return nil
}

// compareMemory measures, standalone, for each znode count and each server: startup time on an
// empty directory, RSS and heap after creating the znodes, and the time until the last znode is
// readable again after kill -9 and a restart.
func compareMemory(ctx context.Context, o compareOptions, cmp *comparison, base int, logf func(string, ...any)) error {
	kinds := []string{kindZooKeeper}
	if cmp.ZkdReason == "" {
		kinds = append(kinds, kindZkd)
	}
	var errs []error
	for ni, n := range o.Memory {
		for k := range kinds {
			kind := kinds[(k+ni)%len(kinds)]
			rec, err := measureMemory(ctx, o, kind, n, base+ni*10+k*5, logf)
			if err != nil {
				rec.Err = err.Error()
				errs = append(errs, fmt.Errorf("zkbench: memory %s %d: %w", kind, n, err))
			}
			cmp.Memory = append(cmp.Memory, rec)
			logf("memory %-9s %8d znodes: startup %.0f ms, populate %.1f s, RSS %.0f MB, heap %.0f MB, restart %.0f ms %s",
				kind, n, rec.StartupMS, rec.Populate, rec.RSSMB, rec.HeapMB, rec.RestartMS, rec.Err)
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	return errors.Join(errs...)
}

// startStandalone starts one server of the given kind alone, with its files under dir.
func startStandalone(ctx context.Context, o compareOptions, kind, dir string, port int) (*server, error) {
	if kind == kindZooKeeper {
		return startZooKeeper(ctx, dir, port, 1)
	}
	return startZkd(ctx, o.ZkdBin, o.ZkdArgs, dir, port, 1)
}

func measureMemory(ctx context.Context, o compareOptions, kind string, n, port int, logf func(string, ...any)) (memRecord, error) {
	rec := memRecord{Server: kind, Znodes: n}
	dir := filepath.Join(o.Work, fmt.Sprintf("mem-%s-%d", strings.ToLower(kind), n))
	defer func() { _ = os.RemoveAll(dir) }()
	t0 := time.Now()
	s, err := startStandalone(ctx, o, kind, dir, port)
	if err != nil {
		return rec, err
	}
	if kind == kindZooKeeper {
		t0 = s.launchTime()
	}
	defer func() { _ = s.stop() }()
	rec.StartupMS = msSince(t0)
	logf("memory %s: creating %d znodes", kind, n)
	start := time.Now()
	last, err := populate(ctx, s.addrs, "/zkbench-mem", n, 128, 8)
	if err != nil {
		return rec, err
	}
	rec.Populate = time.Since(start).Seconds()
	time.Sleep(2 * time.Second) // let the servers settle (background snapshot, GC) before reading RSS
	pid, err := s.pid(0)
	if err != nil {
		return rec, err
	}
	if rec.RSSMB, err = rssMB(pid); err != nil {
		return rec, err
	}
	if rec.HeapMB, err = s.heapMB(ctx); err != nil {
		logf("memory %s: heap: %v", kind, err)
	}
	if err := s.kill9(); err != nil {
		return rec, err
	}
	launched, err := s.restart(ctx)
	if err != nil {
		return rec, err
	}
	ready, err := waitForNode(ctx, s.addrs[0], last, 10*time.Minute)
	if err != nil {
		return rec, err
	}
	rec.RestartMS = float64(ready.Sub(launched).Microseconds()) / 1000
	if pid, err := s.pid(0); err == nil {
		rec.RSSAfter, _ = rssMB(pid)
	}
	return rec, nil
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }

// errOrEmpty formats err, or nothing when it is nil.
func errOrEmpty(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// followerAddr returns the first of addrs whose server says (srvr) it is a follower.
func followerAddr(addrs []string) (string, error) {
	var errs []error
	for _, a := range addrs {
		mode, err := serverMode(a)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if mode == "follower" {
			return a, nil
		}
	}
	return "", errors.Join(append(errs, errors.New("zkbench: no server says it is a follower"))...)
}

// serverMode returns the Mode line of a server's srvr reply: standalone, leader or follower.
func serverMode(addr string) (string, error) {
	lines, err := fourLetter(addr, "srvr")
	if err != nil {
		return "", err
	}
	for _, line := range lines {
		if mode, ok := strings.CutPrefix(line, "Mode: "); ok {
			return strings.TrimSpace(mode), nil
		}
	}
	return "", fmt.Errorf("zkbench: srvr %s: no Mode line", addr)
}

// dropCaches asks the kernel to drop the clean page cache. It follows a sync, so nothing
// written is lost; both servers keep their data in memory, so neither reads it back.
func dropCaches() error {
	return os.WriteFile("/proc/sys/vm/drop_caches", []byte("1"), 0)
}

// settleMax bounds settle's wait.
const settleMax = 10 * time.Second

// settle waits until the servers are nearly idle (together under 15% of a core over 300 ms), for
// at most settleMax, and reports whether they were. In a large-value run the second server
// measured was up to 2x slower than when it went first, both ways round: the first one was still
// writing a snapshot, compacting its log or collecting garbage.
func settle(ctx context.Context, servers map[string]*server) bool {
	const window = 300 * time.Millisecond
	total := func() (float64, bool) {
		var sum float64
		for _, s := range servers {
			c, err := s.cpuSeconds()
			if err != nil {
				return 0, false
			}
			sum += c
		}
		return sum, true
	}
	deadline := time.Now().Add(settleMax)
	for time.Now().Before(deadline) {
		before, ok := total()
		if !ok {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(window):
		}
		after, ok := total()
		if !ok {
			return false
		}
		if after-before < 0.15*window.Seconds() {
			return true
		}
	}
	return false
}
