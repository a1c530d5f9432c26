package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestScale runs the scale suite in small: against the zkd binary in every run, and beside a real
// ZooKeeper (with zkd importing its data directory) when ZKBENCH_TARGET=zookeeper. The wide node's
// reply is made to exceed the limited client's buffer, which must fail that call and keep its
// session, as it does on ZooKeeper.
func TestScale(t *testing.T) {
	if testing.Short() {
		t.Skip("starts server processes")
	}
	servers := []string{"zkd"}
	var bin string
	if os.Getenv("ZKBENCH_TARGET") == "zookeeper" {
		_, bin = zkdBesideZooKeeper(t)
		servers = []string{"zookeeper", "zkd"}
	} else {
		bin = filepath.Join(t.TempDir(), "zkd")
		if out, err := exec.Command("go", "build", "-o", bin, "github.com/zkd-io/zkd/cmd/zkd").CombinedOutput(); err != nil {
			t.Fatalf("go build zkd: %v\n%s", err, out)
		}
	}
	o := scaleOptions{
		ZkdBin: bin, ZkdArgs: "-config {cfg}", Work: t.TempDir(), PortBase: freePortBlock(t, 200), Servers: servers,
		Znodes: 25000, Conns: 4, Wide: 30000, WideLimit: 128 << 10,
		Sessions: 200, Watches: 1200, FanoutRounds: 3, ZKHeapMB: 1000, Command: "TestScale",
		Locks: 300, SnapRate: 500, SnapDuration: 3 * time.Second, SnapCount: 200,
		FollowerZnodes: 30000, FollowerRate: 300, FollowerZKHeapMB: 512,
		FailoverSessions: 300, HoldPerProcess: 150, FailoverSteady: 2 * time.Second, FailoverWindow: 12 * time.Second,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := scale(ctx, o, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Records) != len(servers) {
		t.Fatalf("%d records for %v", len(rep.Records), servers)
	}
	for _, r := range rep.Records {
		if r.Err != "" {
			t.Errorf("%s: %s", r.Server, r.Err)
		}
		if r.Znodes != o.Znodes || r.HeapMB <= 0 || r.RSSMB <= 0 {
			t.Errorf("%s tree: %d znodes, heap %.0f MB, RSS %.0f MB", r.Server, r.Znodes, r.HeapMB, r.RSSMB)
		}
		if r.Wide != o.Wide || r.AllChildrenMS <= 0 || r.WideReplyMB*(1<<20) <= float64(o.WideLimit) {
			t.Errorf("%s wide node: %d children, count in %.2f ms, reply %.2f MB", r.Server, r.Wide, r.AllChildrenMS, r.WideReplyMB)
		}
		if !strings.HasPrefix(r.WideLimited, "error") || !r.WideSessionKept {
			t.Errorf("%s: a reply over the client's buffer gave %q, session kept %v; want an error and the session kept", r.Server, r.WideLimited, r.WideSessionKept)
		}
		if r.Sessions != o.Sessions || r.Watches != o.Watches || r.FanoutMissed != 0 || r.SessionsLost != 0 || r.FanoutP99 <= 0 {
			t.Errorf("%s: %d sessions, %d watches, fan-out p99 %.1f ms, %d notifications missed, %d sessions lost",
				r.Server, r.Sessions, r.Watches, r.FanoutP99, r.FanoutMissed, r.SessionsLost)
		}
		if r.Locks != o.Locks || r.LockErrors != 0 || r.LockGrantsPerS <= 0 || r.LockPeakMB < r.LockBeforeMB {
			t.Errorf("%s: %d lock contenders, %.0f grants/s, %d errors, RSS %.0f then peak %.0f MB", r.Server, r.Locks, r.LockGrantsPerS, r.LockErrors, r.LockBeforeMB, r.LockPeakMB)
		}
		if r.SnapOff == nil || r.SnapOn == nil || r.SnapOff.Taken != 0 || r.SnapOn.Taken < 1 || r.SnapOff.Errors+r.SnapOn.Errors != 0 {
			t.Errorf("%s snapshot runs: off %+v, on %+v; want none taken with snapshots off, some with them on, no errors", r.Server, r.SnapOff, r.SnapOn)
		}
		if r.RestartMS <= 0 {
			t.Errorf("%s: no restart time", r.Server)
		}
		if r.Server == kindZkd && len(servers) == 2 && (r.ImportS <= 0 || r.ImportServeMS <= 0) {
			t.Errorf("zkd import of ZooKeeper's directory: %.1f s, serving after %.0f ms", r.ImportS, r.ImportServeMS)
		}
	}

	if len(rep.Failover) != len(servers) {
		t.Fatalf("%d fail-over records for %v", len(rep.Failover), servers)
	}
	for _, r := range rep.Failover {
		// Every session on the killed leader lost its connection and came back; none expired;
		// every read was answered.
		if r.Err != "" || r.Sessions != o.FailoverSessions || r.Processes != 2 || r.Expired != 0 || r.ReadErrors != 0 ||
			r.Lost < int64(o.FailoverSessions/3) || r.Reattached != int(r.Lost) || r.Reads == 0 || r.LeaderAfter == "" {
			t.Errorf("%s fail-over: %+v", r.Server, r)
		}
	}

	if len(rep.Follower) != len(servers) {
		t.Fatalf("%d follower records for %v", len(rep.Follower), servers)
	}
	for _, r := range rep.Follower {
		if r.Err != "" || r.Znodes != o.FollowerZnodes || r.ServeMS <= 0 || r.SteadyP999 <= 0 || r.DuringP999 <= 0 || r.Errors != 0 {
			t.Errorf("%s follower: %+v", r.Server, r)
		}
	}

	// The section lands in a benchmarks file and is replaced, not repeated, by the next run.
	out := filepath.Join(t.TempDir(), "benchmarks.md")
	if err := os.WriteFile(out, []byte("# Benchmarks\n\ntext\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	section := renderScale(rep)
	for range 2 {
		if err := spliceSection(out, section); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(out)
	if got := string(b); got != "# Benchmarks\n\ntext\n\n"+section || keptSection(out) != section {
		t.Errorf("after two splices the file is:\n%s", got)
	}
}

// testWriter sends a harness's log to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestChTreeShape checks the ClickHouse-shaped tree the issue asks for: paths of about 100 bytes,
// 50 bytes of data, leaves 4 to 6 deep, every leaf distinct and under an inner znode created
// before it.
func TestChTreeShape(t *testing.T) {
	tree := chTree{n: 30000}
	dirs := map[string]bool{}
	for _, level := range tree.dirs() {
		for _, d := range level {
			if parent := d[:strings.LastIndexByte(d, '/')]; parent != "" && !dirs[parent] {
				t.Errorf("inner znode %s comes before its parent", d)
			}
			dirs[d] = true
		}
	}
	seen := map[string]bool{}
	depths := map[int]int{}
	var pathBytes int
	for i := range tree.n {
		p := tree.leaf(i)
		if seen[p] || dirs[p] {
			t.Fatalf("leaf %d: %s twice", i, p)
		}
		seen[p] = true
		if !dirs[p[:strings.LastIndexByte(p, '/')]] {
			t.Fatalf("leaf %s has no inner znode above it", p)
		}
		if n := len(tree.data(i)); n != chDataBytes {
			t.Fatalf("leaf %d holds %d B of data", i, n)
		}
		depths[strings.Count(p, "/")]++
		pathBytes += len(p)
	}
	if avg := float64(pathBytes) / float64(tree.n); avg < 95 || avg > 105 {
		t.Errorf("paths average %.1f B, want about 100", avg)
	}
	if len(depths) != 3 || depths[4] == 0 || depths[5] == 0 || depths[6] == 0 {
		t.Errorf("leaf depths %v, want 4, 5 and 6", depths)
	}
	if raw, want := tree.rawBytes(), float64(pathBytes)/float64(tree.n)+chDataBytes; raw < want-2 || raw > want+2 {
		t.Errorf("rawBytes %.1f, the leaves average %.1f", raw, want)
	}
}
