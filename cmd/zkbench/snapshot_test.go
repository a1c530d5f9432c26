package main

import (
	"context"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/zkd-io/zkd/internal/testkit"
	"github.com/zkd-io/zkd/internal/testkit/zktest"
)

// zkdBesideZooKeeper skips t unless ZKBENCH_TARGET=zookeeper and a real ZooKeeper can run here;
// otherwise it builds the zkd binary into a temporary directory, and returns both.
func zkdBesideZooKeeper(t *testing.T) (work, bin string) {
	t.Helper()
	if os.Getenv("ZKBENCH_TARGET") != "zookeeper" {
		t.Skip("runs a real ZooKeeper: set ZKBENCH_TARGET=zookeeper")
	}
	zktest.Require(t)
	work = t.TempDir()
	bin = filepath.Join(work, "zkd")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/zkd-io/zkd/cmd/zkd").CombinedOutput(); err != nil {
		t.Fatalf("go build zkd: %v\n%s", err, out)
	}
	return work, bin
}

// TestCompareSnapshots runs the snapshot comparison in small against a real ZooKeeper and the
// zkd binary: with snapshots off neither server may take one during a run, with a small snapCount
// both must, and every run must complete without errors.
func TestCompareSnapshots(t *testing.T) {
	work, bin := zkdBesideZooKeeper(t)
	o := compareOptions{
		ZkdBin: bin, ZkdArgs: "-config {cfg}", Work: work,
		Repeat: 1, Duration: 5 * time.Second, SnapZnodes: 20000, SnapCount: 1000, SnapRate: 1000,
	}
	cmp := &comparison{Options: o}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := compareSnapshots(ctx, o, cmp, freePortBlock(t, 51), t.Logf); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range cmp.Snapshots {
		seen[r.Server+" "+r.Snapshots] = true
		if r.Err != "" || r.Result.Ops == 0 || r.Result.Errors != 0 {
			t.Errorf("%s, snapshots %s: %d ops, %d errors, %q", r.Server, r.Snapshots, r.Result.Ops, r.Result.Errors, r.Err)
		}
		if r.Snapshots == snapOff && r.Taken != 0 {
			t.Errorf("%s took %d snapshots with snapshots off", r.Server, r.Taken)
		}
		if r.Snapshots == snapOn && r.Taken < 1 {
			t.Errorf("%s took no snapshot in %v at %.0f writes/s with snapCount %d", r.Server, o.Duration, o.SnapRate, o.SnapCount)
		}
	}
	if len(seen) != 4 || len(cmp.Snapshots) != 4 {
		t.Errorf("runs: %v (%d records), want both servers in both modes", seen, len(cmp.Snapshots))
	}
}

// freePortBlock returns a loopback port p such that p..p+n-1 were all free a moment ago. The
// block lies below the kernel's ephemeral ports (32768 and up on Linux, where 127.0.0.1:0 binds
// and outgoing connections take theirs), so that no connection made by a test running beside
// this one takes a port of it before the servers bind it.
func freePortBlock(t *testing.T, n int) int {
	t.Helper()
	const low, high = 20000, 32000
	for range 100 {
		p := low + rand.IntN(high-low-n)
		var ls []net.Listener
		for i := range n {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+i))
			if err != nil {
				break
			}
			ls = append(ls, l)
		}
		for _, l := range ls {
			_ = l.Close()
		}
		if len(ls) == n {
			return p
		}
	}
	t.Fatalf("no %d free loopback ports in a row between %d and %d", n, low, high)
	return 0
}

// TestFollowerAddr starts three-node ZooKeeper and zkd ensembles as the comparison does and checks
// that followerAddr finds, on each, a server that srvr calls a follower, and finds none on a
// standalone server.
func TestFollowerAddr(t *testing.T) {
	work, bin := zkdBesideZooKeeper(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	base := freePortBlock(t, 74) // ZooKeeper's ports are base..base+23, zkd's base+50..base+73
	zk, err := startZooKeeper(ctx, filepath.Join(work, "zookeeper-cluster"), base, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = zk.stop() }()
	zd, err := startZkd(ctx, bin, "-config {cfg}", filepath.Join(work, "zkd-cluster"), base+50, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = zd.stop() }()
	for _, s := range []*server{zk, zd} {
		var addr string
		deadline, _ := ctx.Deadline()
		testkit.Until(time.Until(deadline), func() bool {
			addr, err = followerAddr(s.addrs)
			return err == nil
		})
		if err != nil {
			t.Fatalf("%s: %v", s.kind, err)
		}
		if !slices.Contains(s.addrs, addr) {
			t.Errorf("%s: follower %s is not one of %v", s.kind, addr, s.addrs)
		}
		if mode, err := serverMode(addr); err != nil || mode != "follower" {
			t.Errorf("%s: %s says mode %q (%v)", s.kind, addr, mode, err)
		}
	}
	if addr, err := followerAddr(smokeTarget(t)); err == nil {
		t.Errorf("a standalone server is taken for a follower: %s", addr)
	}
}
