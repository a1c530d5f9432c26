package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// RunConfig describes one run: one ensemble, the workloads, the fault schedule, the checks.
type RunConfig struct {
	Target   string        // TargetZkd or TargetZooKeeper
	Run      int           // run number within the test process (0-25): names and subnet
	Seed     uint64        // the fault schedule and the workloads' choices
	Duration time.Duration // how long faults are injected
	Dir      string        // run directory: server data and logs, the client log
	ZkdBin   string        // TargetZkd: the binary
	TickMs   int           // zero means 2000
	Workload WorkloadConfig
	// Logf receives the run's progress (the test's log).
	Logf func(format string, args ...any)
}

// RunResult is what a run found.
type RunResult struct {
	Target       string
	Run          int
	Seed         uint64
	Elapsed      time.Duration
	Faults       map[string]int
	Serve        map[string][]time.Duration // time to serve again, per fault kind, one per server and heal
	VictimServe  map[string][]time.Duration // the same for the servers the fault hit only
	Violations   []Violation
	Inconclusive []string
	Stats        []string // what the workloads did
	Dir          string
	Cluster      *Cluster // for log tails after a failure; its processes are gone
}

// Count returns the number of violations of check.
func (r *RunResult) Count(check string) int {
	n := 0
	for _, v := range r.Violations {
		if v.Check == check {
			n++
		}
	}
	return n
}

// Run starts the ensemble in fresh namespaces, runs the workloads under the nemesis for
// cfg.Duration, heals everything, stops the workloads and runs every check. An error means the
// run could not be carried out (the infrastructure failed), not that a check failed.
func Run(ctx context.Context, cfg RunConfig) (res *RunResult, err error) {
	began := time.Now()
	res = &RunResult{Target: cfg.Target, Run: cfg.Run, Seed: cfg.Seed, Dir: cfg.Dir}
	logf := cfg.Logf
	clientLog, err := os.Create(filepath.Join(cfg.Dir, "clients.log"))
	if err != nil {
		return res, fmt.Errorf("chaos: %w", err)
	}
	defer clientLog.Close()
	log := slog.New(slog.NewTextHandler(clientLog, &slog.HandlerOptions{Level: slog.LevelInfo}))

	nt, err := NewNet(ctx, cfg.Run, 3)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, nt.Close()) }()
	logf("%s run %d: network %s0/24 on bridge %s, namespaces %s..%s", cfg.Target, cfg.Run, nt.Subnet, nt.Bridge, nt.Nodes[0].NS, nt.Nodes[2].NS)
	c, err := StartCluster(ClusterConfig{Target: cfg.Target, Dir: cfg.Dir, ZkdBin: cfg.ZkdBin, TickMs: cfg.TickMs, Net: nt})
	if err != nil {
		return res, err
	}
	res.Cluster = c
	defer func() { err = errors.Join(err, c.Close()) }()
	rctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := c.WaitReady(rctx); err != nil {
		return res, err
	}
	if _, err := c.Leader(rctx); err != nil {
		return res, err
	}
	if err := retry(rctx, func() error { return createPaths(c.Servers[0].Addr, basePaths...) }); err != nil {
		return res, err
	}
	logf("%s run %d: ensemble ready after %v; servers %s", cfg.Target, cfg.Run, time.Since(began).Round(time.Millisecond), strings.Join(c.Addrs(), " "))

	h := NewHistory()
	wctx, stopWorkloads := context.WithCancel(ctx)
	defer stopWorkloads()
	w, err := StartWorkloads(wctx, h, log, c.Addrs(), cfg.Workload, cfg.Seed)
	if err != nil {
		return res, err
	}
	timeout := time.Duration(cfg.Workload.TimeoutMs) * time.Millisecond
	n := newNemesis(c, w, cfg.Seed, timeout, logf)
	nerr := n.run(ctx, time.Now().Add(cfg.Duration))

	// Heal whatever is left, bring every server back, let the workloads finish.
	herr := errors.Join(nt.Heal(context.Background()), c.resumeAll())
	stopWorkloads()
	w.Wait()
	if err := errors.Join(nerr, herr); err != nil {
		return res, err
	}
	hctx, cancelHeal := context.WithTimeout(ctx, 3*time.Minute)
	defer cancelHeal()
	if err := c.WaitReady(hctx); err != nil {
		return res, err
	}
	stopped := time.Now()
	logf("%s run %d: workloads stopped; checking", cfg.Target, cfg.Run)

	n.mu.Lock()
	res.Faults, res.Serve, res.VictimServe = n.mu.counts, n.mu.serve, n.mu.victims
	res.Violations = append(res.Violations, n.mu.violations...)
	n.mu.Unlock()

	// Ephemerals of ended sessions: every workload session has ended now; give the slowest
	// expiry its session timeout plus two ticks and a margin.
	tick := time.Duration(cmp.Or(cfg.TickMs, 2000)) * time.Millisecond
	dead := map[int64]string{}
	for _, s := range h.sessions {
		if s.ID != 0 {
			dead[s.ID] = fmt.Sprintf("%s session %s, %s", s.Kind, s.Name, s.End)
		}
	}
	// Poll the subtrees that hold the workloads' ephemerals until those of ended sessions are
	// gone or the deadline passes, then judge on a full dump.
	edeadline := stopped.Add(timeout + 2*tick + 15*time.Second)
	for time.Now().Before(edeadline) {
		d, err := dumpAny(ctx, c, markersRoot, "/locks")
		if err != nil {
			return res, err
		}
		if len(checkEphemerals(dead, d)) == 0 {
			break
		}
		sleepCtx(ctx, 500*time.Millisecond) // poll until the expiries land or the deadline passes
	}
	final, err := dumpAny(ctx, c, "/")
	if err != nil {
		return res, err
	}
	res.Violations = append(res.Violations, checkEphemerals(dead, final)...)

	// Convergence: the same zxid and the same tree on every server.
	res.Violations = append(res.Violations, converge(ctx, c, logf)...)

	// The history checks, on the final tree.
	for _, f := range h.fifo {
		res.Violations = append(res.Violations, checkFIFO(f, final)...)
	}
	res.Violations = append(res.Violations, checkSessionEnd(h.sessions, final, append(slices.Clone(registerKeys), resource))...)
	res.Violations = append(res.Violations, checkFencing(h.guarded)...)
	res.Violations = append(res.Violations, checkReads(h.obs)...)
	regs, inconclusive := checkRegisters(h.regOps, final, registerKeys, 2*time.Minute)
	res.Violations = append(res.Violations, regs...)
	if inconclusive {
		res.Inconclusive = append(res.Inconclusive, fmt.Sprintf("registers: porcupine gave up on %d operations", len(h.regOps)))
	}
	for _, r := range c.RaceReports() {
		res.Violations = append(res.Violations, Violation{CheckRace, r})
	}
	if n := w.contenders.races.Load(); n > 0 {
		res.Violations = append(res.Violations, Violation{CheckRace, fmt.Sprintf("lock contender processes reported %d data races (clients.log)", n)})
	}
	res.Stats = append(stats(h), frozenStats(h, final)...)
	if len(w.procs) > 0 {
		res.Stats = append(res.Stats, w.contenderStats(h))
	}
	res.Elapsed = time.Since(began)
	return res, nil
}

// resumeAll sends SIGCONT to every server and restarts any that is not running.
func (c *Cluster) resumeAll() error {
	var errs []error
	for i, s := range c.Servers {
		if !s.p.Running() {
			errs = append(errs, c.Restart(i))
			continue
		}
		errs = append(errs, c.Resume(i))
	}
	return errors.Join(errs...)
}

// dumpAny dumps the subtrees at roots from the first server that answers.
func dumpAny(ctx context.Context, c *Cluster, roots ...string) (Dump, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var d Dump
	err := retry(ctx, func() error {
		var errs []error
		for _, s := range c.Servers {
			var err error
			if d, err = DumpSubtrees(ctx, s.Addr, roots...); err == nil {
				return nil
			}
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	})
	return d, err
}

// converge polls until every server gives an identical full dump and then reports the same zxid,
// and reports the differences left when the deadline passes. The dumps' own sessions are
// transactions, so the zxids are compared after them, polled until the last one has reached
// every server.
func converge(ctx context.Context, c *Cluster, logf func(string, ...any)) []Violation {
	deadline := time.Now().Add(60 * time.Second)
	var last []string
	for {
		dumps := make([]Dump, len(c.Servers))
		var problems []string
		for i, s := range c.Servers {
			d, err := DumpTree(ctx, s.Addr)
			if err != nil {
				problems = append(problems, fmt.Sprintf("server %d: %v", i+1, err))
				continue
			}
			dumps[i] = d
		}
		if len(problems) == 0 {
			for i := 1; i < len(c.Servers); i++ {
				problems = append(problems, diffDumps(dumps[0], dumps[i], "server 1", fmt.Sprintf("server %d", i+1), 10)...)
			}
		}
		var zxid int64
		if len(problems) == 0 {
			zxid, problems = sameZxid(ctx, c, 10*time.Second)
		}
		if len(problems) == 0 {
			logf("converged: %d znodes, zxid %s on every server", len(dumps[0]), hex(zxid))
			return nil
		}
		last = problems
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		sleepCtx(ctx, time.Second) // poll until the servers agree or the deadline passes
	}
	out := make([]Violation, 0, len(last))
	for _, p := range last {
		out = append(out, Violation{CheckConvergence, p})
	}
	return out
}

// sameZxid polls srvr on every server until all report the same zxid or within passes, and
// returns it or the differences.
func sameZxid(ctx context.Context, c *Cluster, within time.Duration) (int64, []string) {
	deadline := time.Now().Add(within)
	for {
		var problems []string
		zxids := make([]int64, len(c.Servers))
		for i := range c.Servers {
			z, err := c.Zxid(ctx, i)
			if err != nil {
				problems = append(problems, fmt.Sprintf("server %d: srvr: %v", i+1, err))
			}
			zxids[i] = z
		}
		for i := 1; i < len(zxids) && len(problems) == 0; i++ {
			if zxids[i] != zxids[0] {
				problems = append(problems, fmt.Sprintf("server %d reports zxid %s, server 1 %s", i+1, hex(zxids[i]), hex(zxids[0])))
			}
		}
		if len(problems) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return zxids[0], problems
		}
		sleepCtx(ctx, 100*time.Millisecond) // poll
	}
}

// retry calls f until it succeeds or ctx ends, pausing between attempts.
func retry(ctx context.Context, f func() error) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stats summarises what the workloads did.
func stats(h *History) []string {
	var sent, ok, failed, unknown, epochs int
	for _, f := range h.fifo {
		seen := map[int]bool{}
		for _, w := range f.Writes {
			sent++
			seen[w.Epoch] = true
			switch w.Outcome {
			case OK:
				ok++
			case Failed:
				failed++
			default:
				unknown++
			}
		}
		epochs += len(seen)
	}
	ends := map[string]map[SessionEnd]int{}
	for _, s := range h.sessions {
		if ends[s.Kind] == nil {
			ends[s.Kind] = map[SessionEnd]int{}
		}
		ends[s.Kind][s.End]++
	}
	var sess []string
	for _, kind := range []string{"fifo", "silent", "doomed", "register", "lock"} {
		if m := ends[kind]; m != nil {
			sess = append(sess, fmt.Sprintf("%s closed %d expired %d abandoned %d alive %d", kind, m[EndClosed], m[EndExpired], m[EndAbandoned], m[EndAlive]))
		}
	}
	var regOK, regFailed, regUnknown int
	for _, op := range h.regOps {
		switch op.Outcome {
		case OK:
			regOK++
		case Failed:
			regFailed++
		default:
			regUnknown++
		}
	}
	out := []string{
		fmt.Sprintf("fifo: %d sessions, %d connections, %d creates sent: %d ok, %d failed, %d unknown", len(h.fifo), epochs, sent, ok, failed, unknown),
		fmt.Sprintf("registers: %d setData (%d ok, %d failed, %d unknown)", len(h.regOps), regOK, regFailed, regUnknown),
		fmt.Sprintf("locks: %d guarded writes", len(h.guarded)),
		fencedStats(h.sections),
		"sessions: " + strings.Join(sess, "; "),
	}
	return out
}

// fencedStats says what the lock holders did at the external fenced resource: the critical
// sections that overlapped in time (two holders each believing it held the lock: what a resource
// without fencing would have let through) and the writes the fence refused as stale.
func fencedStats(secs []Section) string {
	secs = slices.Clone(secs)
	slices.SortFunc(secs, func(a, b Section) int { return a.Start.Compare(b.Start) })
	overlaps, accepted, rejected := 0, 0, 0
	for i, a := range secs {
		accepted += a.Accepted
		rejected += a.Rejected
		for _, b := range secs[i+1:] {
			if !b.Start.Before(a.End) {
				break
			}
			if b.Token != a.Token {
				overlaps++
			}
		}
	}
	return fmt.Sprintf("fenced resource: %d critical sections, %d pairs overlapping in time (unfenced, both would have written), %d writes taken, %d refused as stale",
		len(secs), overlaps, accepted, rejected)
}

// frozenStats describes what became of the writes the frozen sessions (doomed and silent) left
// outstanding: how many were applied, and when relative to the session's end.
func frozenStats(h *History, d Dump) []string {
	kinds := map[string]string{}
	ends := map[string]string{}
	for _, s := range h.sessions {
		kinds[s.Name] = s.Kind
		if s.Marker == "" {
			continue
		}
		if _, alive := d[s.Marker]; alive {
			ends[s.Name] = "still alive"
		} else if p, ok := d[path.Dir(s.Marker)]; ok {
			ends[s.Name] = "ended at zxid " + hex(p.Stat.Pzxid)
		}
	}
	var out []string
	for _, f := range h.fifo {
		if k := kinds[f.Name]; k != "doomed" && k != "silent" {
			continue
		}
		applied := map[int]int64{}
		for _, p := range d.Children(f.Dir) {
			if _, n, ok := parseFIFOData(d[p].Data); ok {
				applied[n] = d[p].Stat.Czxid
			}
		}
		var unknown, landed int
		var last int64
		for n, w := range f.Writes {
			if w.Outcome != Unknown {
				continue
			}
			unknown++
			if z, ok := applied[n]; ok {
				landed++
				last = max(last, z)
			}
		}
		out = append(out, fmt.Sprintf("%s session %s: %d writes, %d without a reply, %d of those applied (the last at zxid %s); session %s",
			kinds[f.Name], f.Name, len(f.Writes), unknown, landed, hex(last), ends[f.Name]))
	}
	return out
}
