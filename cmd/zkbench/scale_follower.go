package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// followerRecord is what the follower measurement of "zkbench scale" found on one server's 3-node
// cluster: a follower that lost its data rejoins and must be sent the whole tree while the leader
// takes writes.
type followerRecord struct {
	Server    string  `json:"server"`
	Znodes    int     `json:"znodes"`
	PopulateS float64 `json:"populate_s"`
	// ServeMS is the time from the follower's launch until a session on it reads the tree's last
	// znode.
	ServeMS float64 `json:"serve_ms"`
	// The leader's setData latencies (ms) before (steady) and while the follower is filled.
	SteadyP999 float64 `json:"steady_p999_ms"`
	SteadyMax  float64 `json:"steady_max_ms"`
	DuringP999 float64 `json:"during_p999_ms"`
	DuringMax  float64 `json:"during_max_ms"`
	Errors     int64   `json:"errors"`
	Err        string  `json:"error,omitempty"`
}

// scaleFollower starts a 3-node cluster of kind and fills it with a ClickHouse-shaped tree of
// o.FollowerZnodes znodes; then, with open-loop setData on the leader at o.FollowerRate, it
// measures a steady o.FailoverSteady, kills a follower, sets its data aside (ZooKeeper: its
// version-2 directories, keeping myid; zkd: its data directory, the member started again with
// -join, as the README tells an operator to restore a member), starts it, and measures until a
// session on it reads the tree's last znode.
func scaleFollower(ctx context.Context, o scaleOptions, kind, dir string, base int, logf func(string, ...any)) (followerRecord, error) {
	rec := followerRecord{Server: kind, Znodes: o.FollowerZnodes}
	s, err := startFollowerCluster(ctx, o, kind, dir, base)
	if err != nil {
		return rec, err
	}
	defer func() { _ = s.stop() }()
	rec.Server = s.kind
	tree := chTree{n: o.FollowerZnodes}
	logf("%s cluster: creating %d ClickHouse-shaped znodes", s.kind, tree.n)
	start := time.Now()
	if err := tree.populate(ctx, s.addrs[0], o.Conns); err != nil {
		return rec, err
	}
	rec.PopulateS = time.Since(start).Seconds()
	last := tree.leaf(tree.n - 1)
	leader, follower := -1, -1
	for i, a := range s.addrs {
		switch mode, _ := serverMode(a); mode {
		case "leader":
			leader = i
		case "follower":
			if follower < 0 {
				follower = i
			}
		}
	}
	if leader < 0 || follower < 0 {
		return rec, errors.New("zkbench: no leader and follower found")
	}
	settle(ctx, map[string]*server{s.kind: s})
	load := config{Workload: "set", Clients: 16, Conns: 4, Size: chDataBytes, Keys: 1000, Rate: o.FollowerRate,
		Addrs: []string{s.addrs[leader]}}
	steady := load
	steady.Duration = o.FailoverSteady
	res, err := run(ctx, steady, nil)
	if err != nil {
		return rec, fmt.Errorf("steady load: %w", err)
	}
	rec.SteadyP999, rec.SteadyMax = res.Latency.P999/1000, res.Latency.Max/1000
	rec.Errors = res.Errors
	logf("%s cluster: steady setData p99.9 %.2f ms on the leader (member %d); member %d loses its data",
		s.kind, rec.SteadyP999, leader+1, follower+1)

	if err := s.killNode(follower); err != nil {
		return rec, err
	}
	if err := s.wipeNode(follower); err != nil {
		return rec, err
	}
	during := load
	during.Duration = 30 * time.Minute // ended once the follower serves
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	type outcome struct {
		res result
		err error
	}
	loaded := make(chan outcome, 1)
	go func() { // the load during the install; scaleFollower waits for it
		r, err := run(loadCtx, during, nil)
		loaded <- outcome{r, err}
	}()
	time.Sleep(time.Second) // the load is running before the follower starts
	launched, err := s.relaunchNode(ctx, follower)
	var ready time.Time
	if err == nil {
		ready, err = waitForNode(ctx, s.addrs[follower], last, 30*time.Minute)
	}
	stopLoad()
	out := <-loaded
	if err != nil {
		return rec, err
	}
	if out.err != nil {
		return rec, fmt.Errorf("load during the install: %w", out.err)
	}
	rec.ServeMS = float64(ready.Sub(launched).Microseconds()) / 1000
	rec.DuringP999, rec.DuringMax = out.res.Latency.P999/1000, out.res.Latency.Max/1000
	rec.Errors += out.res.Errors
	logf("%s cluster: the follower serves %.0f ms after its launch; leader's setData p99.9 %.2f ms (steady %.2f), max %.1f ms, %d errors",
		s.kind, rec.ServeMS, rec.DuringP999, rec.SteadyP999, rec.DuringMax, rec.Errors)
	return rec, nil
}

// startFollowerCluster starts a 3-node cluster for the follower measurement: ZooKeeper with
// o.FollowerZKHeapMB of heap per member, or zkd.
func startFollowerCluster(ctx context.Context, o scaleOptions, kind, dir string, base int) (*server, error) {
	if kind != "zookeeper" {
		return startZkd(ctx, o.ZkdBin, o.ZkdArgs, dir, base, 3)
	}
	return startZooKeeperHeap(ctx, dir, base, 3, o.FollowerZKHeapMB)
}

// wipeNode sets aside the data of stopped member i, as an operator restoring a member that lost
// its disk would: ZooKeeper's version-2 directories (myid stays), or zkd's data directory (its
// config and myid written again).
func (s *server) wipeNode(i int) error {
	aside := func(p string) error {
		if err := os.Rename(p, p+".aside"); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	if s.kind == kindZooKeeper {
		for _, sub := range []string{"data", "txnlog"} {
			if err := aside(filepath.Join(s.nodes[i], sub, "version-2")); err != nil {
				return err
			}
		}
		return nil
	}
	if err := aside(filepath.Join(s.nodes[i], "data")); err != nil {
		return err
	}
	_, err := zkdConfig(s.nodes[i], s.ports[i], i, len(s.nodes), s.ports[0], s.cfgExtra)
	return err
}

// relaunchNode starts stopped member i again and returns when it was launched; a zkd member whose
// data was set aside starts with -join.
func (s *server) relaunchNode(ctx context.Context, i int) (time.Time, error) {
	if s.kind == kindZooKeeper {
		p := s.zk[i]
		if err := p.Restart(); err != nil {
			return time.Time{}, err
		}
		// A member filling its tree accepts connections but leaves handshakes unanswered;
		// WaitReady polls it the way that does not hang (see restart).
		wait, cancel := context.WithTimeout(ctx, 30*time.Minute)
		defer cancel()
		if err := p.WaitReady(wait); err != nil {
			return time.Time{}, err
		}
		return p.Launched(), nil
	}
	args := s.args
	if !strings.Contains(args, "-join") {
		s.args = args + " -join"
		defer func() { s.args = args }()
	}
	t := time.Now()
	return t, s.launchZkd(i)
}
