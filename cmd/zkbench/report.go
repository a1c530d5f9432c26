package main

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
)

// aggregate is the median over repeats of one (topology, bench, server).
type aggregate struct {
	n                             int
	errors                        int64
	failed                        int
	tput, p50, p90, p99, p999, mx float64
	unit                          string
	clients, conns                int
	kinds                         map[string]int64 // errors by kind, over all runs
	// cpuPerK is the servers' CPU seconds per 1,000 operations (median); zero when unknown.
	cpuPerK float64
	// loadPerK is the load generator's CPU seconds per 1,000 operations (median); zero when
	// unknown.
	loadPerK float64
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// aggregateRuns returns the medians of the successful runs matching topology, bench and server.
func aggregateRuns(runs []runRecord, topo, bench, kind string) (aggregate, bool) {
	var a aggregate
	var tp, p50, p90, p99, p999, mx, cpu, load []float64
	for _, r := range runs {
		if r.Topology != topo || r.Bench != bench || r.Server != kind {
			continue
		}
		if r.Err != "" || r.Result.Ops == 0 {
			a.failed++
			continue
		}
		l := r.Result.Latency
		tp = append(tp, r.Result.Throughput)
		if r.ServerCPU > 0 {
			cpu = append(cpu, r.ServerCPU/float64(r.Result.Ops)*1000)
		}
		if r.LoadCPU > 0 {
			load = append(load, r.LoadCPU/float64(r.Result.Ops)*1000)
		}
		p50, p90, p99 = append(p50, l.P50), append(p90, l.P90), append(p99, l.P99)
		p999, mx = append(p999, l.P999), append(mx, l.Max)
		a.errors += r.Result.Errors
		for k, n := range r.Result.ErrorKinds {
			if a.kinds == nil {
				a.kinds = map[string]int64{}
			}
			a.kinds[k] += n
		}
		a.unit, a.clients, a.conns = r.Result.Unit, r.Result.Clients, r.Result.Conns
		a.n++
	}
	if a.n == 0 {
		return a, a.failed > 0
	}
	a.tput, a.p50, a.p90, a.p99, a.p999, a.mx = median(tp), median(p50), median(p90), median(p99), median(p999), median(mx)
	a.cpuPerK, a.loadPerK = median(cpu), median(load)
	return a, true
}

// cpuPerK formats CPU seconds per 1,000 operations; – when unknown.
func cpuPerK(s float64) string {
	if s <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.3f", s)
}

// ms formats microseconds as milliseconds.
func ms(us float64) string {
	switch {
	case us >= 100e3:
		return fmt.Sprintf("%.0f", us/1e3)
	case us >= 10e3:
		return fmt.Sprintf("%.1f", us/1e3)
	default:
		return fmt.Sprintf("%.2f", us/1e3)
	}
}

// ratio formats a/b.
func ratio(a, b float64) string {
	if a == 0 || b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// goal is one goal of issue 7 or 17, checked against the medians.
type goal struct {
	topo, bench, what string
	check             func(zk, zkd aggregate) (string, bool)
}

func throughputAtLeast(x float64, p99 bool) func(zk, zkd aggregate) (string, bool) {
	return func(zk, zkd aggregate) (string, bool) {
		r := zkd.tput / zk.tput
		ok := r >= x && (!p99 || zkd.p99 <= zk.p99)
		s := fmt.Sprintf("throughput %.2f×", r)
		if p99 {
			s += fmt.Sprintf(", p99 %s vs %s ms", ms(zkd.p99), ms(zk.p99))
		}
		return s, ok
	}
}

func p50NotAbove(zk, zkd aggregate) (string, bool) {
	return fmt.Sprintf("p50 %s vs %s ms", ms(zkd.p50), ms(zk.p50)), zkd.p50 <= zk.p50
}

var goals = []goal{
	{"standalone", "create", "≥2× throughput, p99 not above", throughputAtLeast(2, true)},
	{"cluster", "create", "≥2× throughput, p99 not above", throughputAtLeast(2, true)},
	{"standalone", "set", "≥2× throughput, p99 not above", throughputAtLeast(2, true)},
	{"cluster", "set", "≥2× throughput, p99 not above", throughputAtLeast(2, true)},
	{"standalone", "get", "≥3× throughput", throughputAtLeast(3, false)},
	{"cluster", "get", "≥3× throughput", throughputAtLeast(3, false)},
	{"standalone", "lock, 64 contenders", "≥3× acquisitions/s", throughputAtLeast(3, false)},
	{"standalone", "watch fan-out, 64 watchers", "≥3× notifications/s", throughputAtLeast(3, false)},
	{"standalone", "session open+close", "≥3× sessions/s", throughputAtLeast(3, false)},
	{"standalone", "single-client set", "p50 not above", p50NotAbove},
	{"standalone", "single-client get", "p50 not above", p50NotAbove},
	{"cluster", "single-client set", "p50 not above", p50NotAbove},
}

// cpuTargets checks, for each topology, issue 17's goal of server CPU per operation at most half
// of ZooKeeper's on every workload, in one line that names the workloads missing it.
func cpuTargets(c *comparison) []string {
	var out []string
	for _, topo := range c.Options.Topologies {
		var all int
		var missed []string
		for _, spec := range c.Specs {
			zk, ok1 := aggregateRuns(c.Runs, topo, spec, kindZooKeeper)
			zd, ok2 := aggregateRuns(c.Runs, topo, spec, kindZkd)
			if !ok1 || !ok2 || zk.cpuPerK <= 0 || zd.cpuPerK <= 0 {
				continue
			}
			all++
			if r := zd.cpuPerK / zk.cpuPerK; r > 0.5 {
				missed = append(missed, fmt.Sprintf("%s %.2f×", spec, r))
			}
		}
		if all == 0 {
			continue
		}
		s := fmt.Sprintf("%d of %d workloads", all-len(missed), all)
		if len(missed) > 0 {
			s += "; not: " + strings.Join(missed, ", ")
		}
		out = append(out, fmt.Sprintf("| %s | every workload | server CPU per op ≤ ½ | %s | %s |", topo, s, yesNo(len(missed) == 0)))
	}
	return out
}

// renderReport writes the comparison as Markdown.
func renderReport(c *comparison) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("# Benchmarks: zkd against Apache ZooKeeper\n\n")
	p("Generated by `%s` (started %s, finished %s). Do not edit by hand: run it again.\n\n",
		c.Options.Command, c.Started.Format("2006-01-02 15:04 UTC"), c.Finished.Format("15:04 UTC"))
	if c.ZkdReason != "" {
		p("> **zkd is missing from this run:** %s. Only ZooKeeper was measured; the zkd columns are empty.\n\n", c.ZkdReason)
	}
	p("## Conditions\n\n")
	for _, line := range conditions(c) {
		p("- %s\n", line)
	}
	p("\n")

	if c.ZkdReason == "" && len(c.Runs) > 0 {
		p("## Targets (issues 7 and 17)\n\n| topology | workload | goal | measured | met |\n|---|---|---|---|---|\n")
		for _, t := range goals {
			zk, ok1 := aggregateRuns(c.Runs, t.topo, t.bench, kindZooKeeper)
			zd, ok2 := aggregateRuns(c.Runs, t.topo, t.bench, kindZkd)
			if !ok1 || !ok2 || zk.n == 0 || zd.n == 0 {
				continue
			}
			s, ok := t.check(zk, zd)
			p("| %s | %s | %s | %s | %s |\n", t.topo, t.bench, t.what, s, yesNo(ok))
		}
		for _, line := range append(cpuTargets(c), memoryTargets(c)...) {
			p("%s\n", line)
		}
		p("\n")
	}

	if lines := floorTable(c); len(lines) > 0 {
		p("## What this machine allows: the floor server\n\n")
		p("The floor server (`zkbench floor`, cmd/zkbench/floor.go) is a yardstick, not a ZooKeeper: the tree in one map under one lock, every write and every session's start and end logged with one fdatasync per batch to a pre-zeroed file, no snapshots, ACLs or session expiry. For 3 nodes it is replicated (cmd/zkbench/floorrepl.go): every client on node 1, which sends each batch to the other two as it logs it and answers once a majority has it durable; the other nodes log with their own fdatasync and do nothing else, and there is no election. What it reaches, measured in the same rotation, is about the most any durable server (replicated, for 3 nodes) can reach here with this load generator on the same processors; for 3 nodes it is an optimistic bound, since zkd's and ZooKeeper's clients are spread over all three servers. The last columns say how much of that zkd reaches.\n\n")
		for _, line := range lines {
			p("%s\n", line)
		}
		p("\n")
	}

	if len(c.Runs) > 0 {
		p("## Throughput and latency\n\n")
		p("Medians of %d runs of %v each; latencies in milliseconds. The ratio row is zkd/ZooKeeper: above 1 is better for throughput, below 1 is better for latency. Server CPU is the user and system time of the topology's server processes during the run; load CPU is zkbench's own (its clients, on the same processors as the servers): no server can go faster than the processors the load generator leaves it.\n\n",
			c.Options.Repeat, c.Options.Duration)
		for _, spec := range c.Specs {
			var header bool
			var errNotes []string
			for _, topo := range c.Options.Topologies {
				zk, okZK := aggregateRuns(c.Runs, topo, spec, kindZooKeeper)
				zd, okZd := aggregateRuns(c.Runs, topo, spec, kindZkd)
				if !okZK && !okZd {
					continue
				}
				if !header {
					u := zk
					if u.n == 0 {
						u = zd
					}
					p("### %s\n\n%s per op; %d clients over %d connections.\n\n", spec, u.unit, u.clients, u.conns)
					p("| topology | server | ops/s | p50 | p90 | p99 | p99.9 | max | server CPU s per 1k ops | load CPU s per 1k ops | errors | failed runs |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
					header = true
				}
				row := func(name string, a aggregate) {
					if a.n == 0 {
						p("| %s | %s | – | – | – | – | – | – | – | – | – | %d |\n", topo, name, a.failed)
						return
					}
					p("| %s | %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %d | %d |\n", topo, name, a.tput,
						ms(a.p50), ms(a.p90), ms(a.p99), ms(a.p999), ms(a.mx), cpuPerK(a.cpuPerK), cpuPerK(a.loadPerK), a.errors, a.failed)
				}
				row(kindZooKeeper, zk)
				for _, a := range []struct {
					name string
					agg  aggregate
				}{{kindZooKeeper, zk}, {kindZkd, zd}} {
					for _, k := range slices.Sorted(maps.Keys(a.agg.kinds)) {
						errNotes = append(errNotes, fmt.Sprintf("%s, %s: %d × %s", topo, a.name, a.agg.kinds[k], k))
					}
				}
				ratioRow := func(name string, a aggregate) {
					if zk.n > 0 && a.n > 0 {
						p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | | |\n", topo, name, ratio(a.tput, zk.tput),
							ratio(a.p50, zk.p50), ratio(a.p90, zk.p90), ratio(a.p99, zk.p99), ratio(a.p999, zk.p999), ratio(a.mx, zk.mx),
							ratio(a.cpuPerK, zk.cpuPerK), ratio(a.loadPerK, zk.loadPerK))
					}
				}
				if c.ZkdReason == "" || okZd {
					row(kindZkd, zd)
					ratioRow("zkd/ZooKeeper", zd)
				}
				if fl, ok := aggregateRuns(c.Runs, topo, spec, kindFloor); ok {
					row(kindFloor, fl)
					ratioRow("floor/ZooKeeper", fl)
				}
			}
			if header {
				p("\n")
				if len(errNotes) > 0 {
					p("Errors: %s.\n\n", strings.Join(errNotes, "; "))
				}
			}
		}
	}

	if len(c.Memory) > 0 {
		p("## Memory, startup and recovery (standalone)\n\n")
		p("Znodes of 128 B, created in multis of 100 over 8 connections. RSS is read from /proc after a 2 s pause; the harness forces no GC, but the zkd binary returns free heap to the OS by itself once it has been idle for 750 ms after a burst (internal/runtimepolicy), so its figure is taken after that. ")
		p("Heap: ZooKeeper's Java heap in use after a full GC (`jcmd GC.run`, `GC.heap_info`); zkd's live heap after its last GC (`GODEBUG=gctrace=1`). ")
		p("Startup: launch (the JVM's exec for ZooKeeper) to the first successful write, on an empty data directory. ")
		p("Restart: `kill -9`, relaunch on the same directory, time from launch until a new session reads the last znode created.\n\n")
		p("| znodes | server | startup ms | populate s | RSS MB | heap MB | restart after kill -9 ms | RSS after restart MB | error |\n|---:|---|---:|---:|---:|---:|---:|---:|---|\n")
		for _, m := range c.Memory {
			p("| %d | %s | %.0f | %.1f | %.0f | %.0f | %.0f | %.0f | %s |\n", m.Znodes, m.Server, m.StartupMS, m.Populate, m.RSSMB, m.HeapMB, m.RestartMS, m.RSSAfter, m.Err)
		}
		p("\n")
	}
	if len(c.Notes) > 0 {
		p("## Notes\n\n")
		for _, n := range c.Notes {
			p("- %s\n", n)
		}
	}
	if len(c.Snapshots) > 0 {
		renderSnapshots(p, c)
	} else {
		p("## Not measured\n\n- p99.9 while snapshots are taken against without (run without `-snapshot-znodes 0`).\n")
	}
	return b.String()
}

// renderSnapshots writes the snapshot comparison: per server, the medians with snapshots off and
// on, the on/off ratio, and zkd against ZooKeeper in each mode.
func renderSnapshots(p func(string, ...any), c *comparison) {
	o := c.Options
	p("## Latency while snapshots are taken (standalone)\n\n")
	p("setData of 128 B at a fixed offered rate of %.0f/s (open loop: latency counts from each op's intended send time, so a stall is not hidden) from 32 clients over 8 connections, ", o.SnapRate)
	p("on a tree of %d znodes of 128 B; medians of %d runs of %v. ", o.SnapZnodes, o.Repeat, o.Duration)
	p("Each run restarts the server on the same data with its mode's zoo.cfg lines, then gives it %v of the same load unrecorded. ", o.Warmup)
	p("Snapshots off: `snapCount=1000000000`, `snapSizeLimitInKb=-1`. On: `snapCount=%d`: ", o.SnapCount)
	p("ZooKeeper starts a snapshot after snapCount/2 plus a random part of snapCount/2 transactions (skipping one while the last is still being written); ")
	p("zkd starts one once snapCount operations were applied since the last (a multi's each counted; Raft's own check of its log every 2-4 s stays as a backstop). ")
	p("\"Taken\" counts the snapshots completed during the measured run (mntr's `cnt_snapshottime`), and \"busy\" is the share of the run spent writing them (`sum_snapshottime`). ")
	p("The on/off rows are each server against itself; the last rows are zkd/ZooKeeper.\n\n")
	p("| server | snapshots | ops/s | p50 | p90 | p99 | p99.9 | max | taken | busy | errors | failed runs |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	var runs []runRecord
	taken := map[string][]float64{}
	busy := map[string][]float64{}
	for _, r := range c.Snapshots {
		runs = append(runs, runRecord{Topology: "snapshots " + r.Snapshots, Bench: "set", Server: r.Server, Repeat: r.Repeat, Result: r.Result, Err: r.Err})
		if r.Err == "" && r.Result.Elapsed > 0 {
			key := r.Server + " " + r.Snapshots
			taken[key] = append(taken[key], float64(r.Taken))
			busy[key] = append(busy[key], float64(r.TakenMS)/(r.Result.Elapsed*1000))
		}
	}
	aggs := map[string]aggregate{}
	for _, kind := range []string{kindZooKeeper, kindZkd} {
		for _, mode := range []string{snapOff, snapOn} {
			a, ok := aggregateRuns(runs, "snapshots "+mode, "set", kind)
			if !ok {
				continue
			}
			key := kind + " " + mode
			aggs[key] = a
			if a.n == 0 {
				p("| %s | %s | – | – | – | – | – | – | – | – | – | %d |\n", kind, mode, a.failed)
				continue
			}
			p("| %s | %s | %.0f | %s | %s | %s | %s | %s | %.0f | %.0f%% | %d | %d |\n", kind, mode, a.tput, ms(a.p50), ms(a.p90),
				ms(a.p99), ms(a.p999), ms(a.mx), median(taken[key]), 100*median(busy[key]), a.errors, a.failed)
		}
		off, on := aggs[kind+" "+snapOff], aggs[kind+" "+snapOn]
		if off.n > 0 && on.n > 0 {
			p("| %s | on/off | %s | %s | %s | %s | %s | %s | | | | |\n", kind, ratio(on.tput, off.tput), ratio(on.p50, off.p50),
				ratio(on.p90, off.p90), ratio(on.p99, off.p99), ratio(on.p999, off.p999), ratio(on.mx, off.mx))
		}
	}
	for _, mode := range []string{snapOff, snapOn} {
		zk, zd := aggs[kindZooKeeper+" "+mode], aggs[kindZkd+" "+mode]
		if zk.n > 0 && zd.n > 0 {
			p("| zkd/ZooKeeper | %s | %s | %s | %s | %s | %s | %s | | | | |\n", mode, ratio(zd.tput, zk.tput), ratio(zd.p50, zk.p50),
				ratio(zd.p90, zk.p90), ratio(zd.p99, zk.p99), ratio(zd.p999, zk.p999), ratio(zd.mx, zk.mx))
		}
	}
	p("\n")
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

// memoryTargets checks RSS ≤ ¼ and restart ≤ ⅓ of ZooKeeper's at each znode count.
func memoryTargets(c *comparison) []string {
	var out []string
	for _, m := range c.Memory {
		if m.Server != kindZkd || m.Err != "" {
			continue
		}
		for _, z := range c.Memory {
			if z.Server != kindZooKeeper || z.Znodes != m.Znodes || z.Err != "" {
				continue
			}
			out = append(out, fmt.Sprintf("| standalone | %d znodes | RSS ≤ ¼ | %.0f vs %.0f MB (%.2f×) | %s |",
				m.Znodes, m.RSSMB, z.RSSMB, m.RSSMB/z.RSSMB, yesNo(m.RSSMB*4 <= z.RSSMB)))
			out = append(out, fmt.Sprintf("| standalone | %d znodes | restart ≤ ⅓ | %.0f vs %.0f ms (%.2f×) | %s |",
				m.Znodes, m.RestartMS, z.RestartMS, m.RestartMS/z.RestartMS, yesNo(m.RestartMS*3 <= z.RestartMS)))
		}
	}
	return out
}

// conditions describes the machine and software of the run.
func conditions(c *comparison) []string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0]); len(f) >= 2 {
			mem = f[1] + " kB RAM"
		}
	}
	kernel := strings.TrimSpace(cmdOut("uname", "-r"))
	java := strings.SplitN(strings.TrimSpace(cmdOut("java", "-version")), "\n", 2)[0]
	// scripts/bench/run.sh reads the commit when it builds zkd: the tree may move on during a run.
	commit := os.Getenv("ZKBENCH_COMMIT")
	if commit == "" {
		commit = strings.TrimSpace(cmdOut("git", "rev-parse", "--short", "HEAD"))
		if strings.TrimSpace(cmdOut("git", "status", "--porcelain", "--untracked-files=all", "--", "cmd/zkd", "server", "consensus", "znode", "jute")) != "" {
			commit += " plus uncommitted changes in the server packages"
		}
	}
	zkdLine := "not measured (" + c.ZkdReason + ")"
	if c.ZkdReason == "" {
		zkdLine = fmt.Sprintf("`%s %s`, repository commit %s; fsync on every Raft log append", c.Options.ZkdBin, c.Options.ZkdArgs, commit)
	}
	cache := "the page cache is synced"
	if c.Options.DropCaches {
		cache = "the page cache is synced and its clean pages dropped (earlier runs' log files would otherwise fill it, and reclaiming them is charged to whichever server writes next)"
	}
	lines := []string{
		fmt.Sprintf("Machine: %s, %d logical CPUs, %s, Linux %s; load generator and servers share it, all traffic on loopback.", cpu, runtime.NumCPU(), mem, kernel),
		"Apache ZooKeeper 3.8.0 (Debian package), launched by zkbench (internal/testkit/apachezk) as upstream's zkServer.sh does: forceSync=yes (fsync on every write), -Xmx1000m, tickTime 2000, " + java + ".",
		"zkd: " + zkdLine + ".",
		fmt.Sprintf("Load: zkbench (cmd/zkbench, a raw-protocol client on the jute package, %s), closed loop, 128-byte values unless stated; for 3 nodes the connections are spread over all servers, except in the single-client rows, whose client talks to a follower (asked with srvr) on both servers, as most of a ZooKeeper ensemble's clients do.", runtime.Version()),
		fmt.Sprintf("Topologies: standalone, and cluster = 3 nodes on loopback; before the runs each server gets %v of unrecorded mixed load (JIT warm-up).", c.Options.Warmup),
		fmt.Sprintf("Both servers run at once in each topology; every workload runs %d times per server, alternating which server goes first. Before each run %s, and the harness waits (up to 10 s) until the servers together use under 15%% of a core, so that a run does not pay for work the previous one left running (a snapshot being written, log compaction, garbage collection).", c.Options.Repeat, cache),
	}
	if c.Options.Floor {
		lines = append(lines, "The floor server (`zkbench floor`) runs beside them in each topology, in the same rotation.")
	}
	return lines
}

// cmdOut runs a command and returns its combined output, or "" on failure.
func cmdOut(name string, args ...string) string {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return ""
	}
	return string(out)
}

// floorTable compares, for every workload and topology the floor server ran, its throughput and
// CPU per operation with ZooKeeper's and zkd's.
func floorTable(c *comparison) []string {
	var lines []string
	for _, topo := range c.Options.Topologies {
		for _, spec := range c.Specs {
			fl, ok := aggregateRuns(c.Runs, topo, spec, kindFloor)
			zk, ok1 := aggregateRuns(c.Runs, topo, spec, kindZooKeeper)
			zd, ok2 := aggregateRuns(c.Runs, topo, spec, kindZkd)
			if !ok || !ok1 || !ok2 || fl.n == 0 || zk.n == 0 || zd.n == 0 {
				continue
			}
			if len(lines) == 0 {
				lines = append(lines, "| topology | workload | ZooKeeper ops/s | zkd ops/s | floor ops/s | zkd/ZooKeeper | floor/ZooKeeper | zkd/floor | server CPU s per 1k ops: zkd, floor |",
					"|---|---|---:|---:|---:|---:|---:|---:|---:|")
			}
			lines = append(lines, fmt.Sprintf("| %s | %s | %.0f | %.0f | %.0f | %s | %s | %s | %s, %s |", topo, spec, zk.tput, zd.tput, fl.tput,
				ratio(zd.tput, zk.tput), ratio(fl.tput, zk.tput), ratio(zd.tput, fl.tput), cpuPerK(zd.cpuPerK), cpuPerK(fl.cpuPerK)))
		}
	}
	return lines
}
