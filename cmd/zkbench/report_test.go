package main

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// fakeRun is a made-up standalone setData run of 1000 ops: server CPU 1000/tput seconds, load
// CPU 400/tput.
func fakeRun(server string, rep int, tput, p50, p99 float64) runRecord {
	return runRecord{Topology: "standalone", Bench: "set", Server: server, Repeat: rep, ServerCPU: 1000 / tput, LoadCPU: 400 / tput, Result: result{
		Unit: "setData", Clients: 32, Conns: 8, Ops: 1000, Throughput: tput,
		Latency: latencySummary{Count: 1000, P50: p50, P90: p99 / 2, P99: p99, P999: p99 * 2, Max: p99 * 3},
	}}
}

// reportHas fails t for each of wants that md lacks.
func reportHas(t *testing.T, md string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q\n%s", want, md)
		}
	}
}

// TestReportMediansAndRatios renders a comparison of made-up runs and checks the medians, the
// zkd/ZooKeeper ratios and the goal verdicts that appear in the Markdown.
func TestReportMediansAndRatios(t *testing.T) {
	mk := fakeRun
	c := &comparison{
		Options: compareOptions{Topologies: []string{"standalone"}, Repeat: 3, Duration: time.Second, ZkdBin: "zkd"},
		Specs:   []string{"set"},
		Runs: []runRecord{
			mk(kindZooKeeper, 0, 1000, 2000, 10000), mk(kindZooKeeper, 1, 3000, 1000, 30000), mk(kindZooKeeper, 2, 2000, 1500, 20000),
			mk(kindZkd, 0, 5000, 500, 4000), mk(kindZkd, 1, 4000, 600, 5000),
			{Topology: "standalone", Bench: "set", Server: kindZkd, Repeat: 2, Err: "zkbench: boom"},
		},
		Memory: []memRecord{
			{Server: kindZooKeeper, Znodes: 100000, RSSMB: 400, RestartMS: 3000},
			{Server: kindZkd, Znodes: 100000, RSSMB: 80, RestartMS: 1500},
		},
	}
	md := renderReport(c)
	reportHas(t, md, []string{
		// ZooKeeper medians: 2000 ops/s, p50 1.5 ms, p99 20 ms; zkd (two good runs): 4500, 0.55 ms, 4.5 ms.
		// Server CPU over the 1000 ops of each run: 1000/tput seconds, so per 1k ops ZooKeeper's
		// median is 0.500 s and zkd's (runs of 0.200 and 0.250) 0.225 s. The load generator's is
		// 400/tput: ZooKeeper's median 0.200 s, zkd's (0.080 and 0.100) 0.090 s.
		"| standalone | ZooKeeper | 2000 | 1.50 | 10.0 | 20.0 | 40.0 | 60.0 | 0.500 | 0.200 | 0 | 0 |",
		"| standalone | zkd | 4500 | 0.55 | 2.25 | 4.50 | 9.00 | 13.5 | 0.225 | 0.090 | 0 | 1 |",
		"| standalone | zkd/ZooKeeper | 2.25× | 0.37× | 0.23× | 0.23× | 0.23× | 0.23× | 0.45× | 0.45× | | |",
		"| standalone | set | ≥2× throughput, p99 not above | throughput 2.25×, p99 4.50 vs 20.0 ms | yes |",
		"| standalone | 100000 znodes | RSS ≤ ¼ | 80 vs 400 MB (0.20×) | yes |",
		"| standalone | 100000 znodes | restart ≤ ⅓ | 1500 vs 3000 ms (0.50×) | **no** |",
		// Server CPU per 1k ops 0.225 against 0.500: 0.45×, within half.
		"| standalone | every workload | server CPU per op ≤ ½ | 1 of 1 workloads | yes |",
	}...)
	// Twice the server CPU for zkd's runs: 0.450 s per 1k ops, 0.90× ZooKeeper's.
	for i := range c.Runs {
		if c.Runs[i].Server == kindZkd {
			c.Runs[i].ServerCPU *= 2
		}
	}
	reportHas(t, renderReport(c), "| standalone | every workload | server CPU per op ≤ ½ | 0 of 1 workloads; not: set 0.90× | **no** |")
	c.ZkdReason = "cmd/zkd does not exist yet"
	if md := renderReport(c); !strings.Contains(md, "zkd is missing from this run:** cmd/zkd does not exist yet") || strings.Contains(md, "## Targets") {
		t.Errorf("report without zkd does not say so plainly:\n%s", md)
	}
}

// TestReportSnapshots renders made-up snapshot runs and checks the medians, the on/off ratios of
// each server, and zkd against ZooKeeper.
func TestReportSnapshots(t *testing.T) {
	mk := func(server, mode string, rep int, p999 float64, taken, takenMS int64) snapRecord {
		return snapRecord{Server: server, Snapshots: mode, Repeat: rep, Taken: taken, TakenMS: takenMS, Result: result{
			Unit: "setData", Clients: 32, Conns: 8, Ops: 5000, Throughput: 1000, Elapsed: 5,
			Latency: latencySummary{Count: 5000, P50: 1000, P90: 2000, P99: p999 / 2, P999: p999, Max: p999 * 2},
		}}
	}
	c := &comparison{
		Options: compareOptions{Repeat: 2, Duration: 5 * time.Second, SnapZnodes: 1000, SnapCount: 100, SnapRate: 1000},
		Snapshots: []snapRecord{
			mk(kindZooKeeper, snapOff, 0, 10000, 0, 0), mk(kindZooKeeper, snapOff, 1, 20000, 0, 0),
			mk(kindZooKeeper, snapOn, 0, 100000, 4, 2000), mk(kindZooKeeper, snapOn, 1, 140000, 6, 3000),
			mk(kindZkd, snapOff, 0, 5000, 0, 0), mk(kindZkd, snapOff, 1, 5000, 0, 0),
			mk(kindZkd, snapOn, 0, 6000, 1, 100), {Server: kindZkd, Snapshots: snapOn, Repeat: 1, Err: "zkbench: boom"},
		},
	}
	md := renderReport(c)
	reportHas(t, md, []string{
		"| ZooKeeper | off | 1000 | 1.00 | 2.00 | 7.50 | 15.0 | 30.0 | 0 | 0% | 0 | 0 |",
		"| ZooKeeper | on | 1000 | 1.00 | 2.00 | 60.0 | 120 | 240 | 5 | 50% | 0 | 0 |",
		"| ZooKeeper | on/off | 1.00× | 1.00× | 1.00× | 8.00× | 8.00× | 8.00× | | | | |",
		"| zkd | on | 1000 | 1.00 | 2.00 | 3.00 | 6.00 | 12.0 | 1 | 2% | 0 | 1 |",
		"| zkd | on/off | 1.00× | 1.00× | 1.00× | 1.20× | 1.20× | 1.20× | | | | |",
		"| zkd/ZooKeeper | on | 1.00× | 1.00× | 1.00× | 0.05× | 0.05× | 0.05× | | | | |",
	}...)
	if strings.Contains(md, "## Not measured") {
		t.Errorf("a report with snapshot runs says they were not measured")
	}
}

// cpuSeconds reads a server's CPU time from /proc: this test process stands in for the server
// (zkd, or the floor, which zkbench runs as it runs zkd) and burns CPU between two readings.
func TestServerCPUSeconds(t *testing.T) {
	for _, kind := range []string{kindZkd, kindFloor} {
		t.Run(kind, func(t *testing.T) { testServerCPUSeconds(t, kind) })
	}
}

func testServerCPUSeconds(t *testing.T, kind string) {
	self, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	s := &server{kind: kind, cmds: []*exec.Cmd{{Process: self}}}
	before, err := s.cpuSeconds()
	if err != nil {
		t.Fatal(err)
	}
	// Spin until the kernel itself has charged this process 300 ms more CPU (however loaded the
	// machine is), then the reading must show it.
	used := func() float64 {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
	}
	x, start := 0, used()
	for used()-start < 0.3 {
		for i := range 100000 {
			x ^= i
		}
	}
	after, err := s.cpuSeconds()
	if err != nil {
		t.Fatal(err)
	}
	if after-before < 0.25 {
		t.Errorf("cpu %.2fs then %.2fs (x=%d): 300 ms of spinning should show", before, after, x)
	}
}

// With floor runs the report gives the floor's rows and a table of how much of the floor zkd
// reaches, in each topology; without them there is no such table.
func TestReportFloor(t *testing.T) {
	mk := func(topo, server string, tput float64) runRecord {
		r := fakeRun(server, 0, tput, 500, 1000)
		r.Topology = topo
		return r
	}
	c := &comparison{
		Options: compareOptions{Topologies: []string{"standalone", "cluster"}, Repeat: 1, Duration: time.Second, ZkdBin: "zkd", Floor: true},
		Specs:   []string{"set"},
		Runs: []runRecord{mk("standalone", kindZooKeeper, 2000), mk("standalone", kindZkd, 3000),
			mk("cluster", kindZooKeeper, 1000), mk("cluster", kindZkd, 1600),
			mk("standalone", kindFloor, 4000), mk("cluster", kindFloor, 4000)},
	}
	md := renderReport(c)
	reportHas(t, md, []string{
		"## What this machine allows: the floor server",
		"| standalone | set | 2000 | 3000 | 4000 | 1.50× | 2.00× | 0.75× | 0.333, 0.250 |",
		"| cluster | set | 1000 | 1600 | 4000 | 1.60× | 4.00× | 0.40× | 0.625, 0.250 |",
		"| standalone | floor | 4000 |",
		"| standalone | floor/ZooKeeper | 2.00× |",
		"| cluster | floor/ZooKeeper | 4.00× |",
	}...)
	c.Runs = c.Runs[:4]
	c.Options.Floor = false
	if md := renderReport(c); strings.Contains(md, "floor") {
		t.Errorf("a report without floor runs mentions the floor:\n%s", md)
	}
}
