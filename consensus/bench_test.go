package consensus

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zkd-io/zkd/jute"
)

// BenchmarkWrites measures write throughput on real disk (bbolt, fsync on every append) with 1,
// 16 and 64 concurrent proposers, on a single node and on 3 nodes (proposers spread over all
// nodes, so two thirds of the writes are forwarded).
//
//	go test -run '^$' -bench Writes -benchtime 3000x ./consensus/
func BenchmarkWrites(b *testing.B) {
	for _, nodes := range []int{1, 3} {
		for _, proposers := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("nodes=%d/proposers=%d", nodes, proposers), func(b *testing.B) {
				c := newCluster(b, nodes, false, nil)
				c.leader()
				ns := c.running()
				var next atomic.Int64
				var failed atomic.Int64
				data := make([]byte, 128)
				b.ResetTimer()
				var wg sync.WaitGroup
				for p := range proposers {
					n := ns[p%len(ns)]
					wg.Go(func() {
						ctx := ctxT(b, time.Minute)
						for {
							i := next.Add(1)
							if i > int64(b.N) {
								return
							}
							res, err := n.Propose(ctx, createReq(fmt.Sprintf("/b%09d", i), data, jute.ModePersistent))
							if err != nil || res.Err != nil {
								failed.Add(1)
							}
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				if f := failed.Load(); f > 0 {
					b.Fatalf("%d writes failed", f)
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
			})
		}
	}
}

// BenchmarkFollowerApplyLag measures how long after the leader's Propose returns an idle
// follower has applied the write (CommitTimeout bounds it).
func BenchmarkFollowerApplyLag(b *testing.B) {
	c := newCluster(b, 3, false, nil)
	l := c.leader()
	f := c.followers()[0]
	ctx := ctxT(b, 5*time.Minute)
	lags := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		res, err := l.Propose(ctx, createReq(fmt.Sprintf("/lag%d", i), nil, jute.ModePersistent))
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if err := f.WaitApplied(ctx, res.Zxid); err != nil {
			b.Fatal(err)
		}
		lags = append(lags, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lags)
	b.ReportMetric(float64(lags[len(lags)/2].Microseconds()), "p50-lag-µs")
	b.ReportMetric(float64(lags[len(lags)*99/100].Microseconds()), "p99-lag-µs")
}

// BenchmarkForwardedWrite measures one client writing through a follower, one write at a time:
// the follower answers only after applying the write, so this is the latency the commit relay
// (relay.go) exists for.
//
//	go test -run '^$' -bench ForwardedWrite -benchtime 500x ./consensus/
func BenchmarkForwardedWrite(b *testing.B) {
	c := newCluster(b, 3, false, nil)
	c.leader()
	f := c.followers()[0]
	ctx := ctxT(b, 5*time.Minute)
	relayed := f.Stats().Relayed
	b.ResetTimer()
	for i := range b.N {
		res, err := f.Propose(ctx, createReq(fmt.Sprintf("/fw%d", i), nil, jute.ModePersistent))
		if err != nil || res.Err != nil {
			b.Fatal(err, res.Err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
	b.ReportMetric(float64(f.Stats().Relayed-relayed)/float64(b.N), "relayed/op")
}

// BenchmarkLeaderFailover measures the time from killing the leader (a Shutdown without
// handing leadership over) to the first write committed by the next leader.
func BenchmarkLeaderFailover(b *testing.B) {
	c := newCluster(b, 3, false, func(cfg *Config) { cfg.HeartbeatTimeout = 0 }) // production timing
	ctx := ctxT(b, 10*time.Minute)
	var total time.Duration
	var worst time.Duration
	for i := range b.N {
		l := c.leader()
		var survivor *Node
		for _, n := range c.running() {
			if n != l {
				survivor = n
				break
			}
		}
		if _, err := survivor.Propose(ctx, createReq(fmt.Sprintf("/pre%d", i), nil, jute.ModePersistent)); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		c.stop(l.ID())
		for {
			res, err := survivor.Propose(ctx, createReq(fmt.Sprintf("/post%d", i), nil, jute.ModePersistent))
			if err == nil && res.Err == nil {
				break
			}
		}
		d := time.Since(t0)
		total += d
		worst = max(worst, d)
		c.start(l.ID())
		c.converge()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/failover")
	b.ReportMetric(float64(worst.Milliseconds()), "worst-ms")
}

// BenchmarkRestart measures how long a node restarts from a snapshot of 100k znodes (set
// ZKD_BENCH_ZNODES=1000000 for a million): New until the restored tree is served.
//
//	ZKD_BENCH_ZNODES=1000000 go test -run '^$' -bench Restart -benchtime 3x -timeout 30m ./consensus/
func BenchmarkRestart(b *testing.B) {
	count := 100_000
	if s := os.Getenv("ZKD_BENCH_ZNODES"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			b.Fatal(err)
		}
		count = v
	}
	dir := b.TempDir()
	cfg := Config{ID: "solo", Dir: dir, Logger: testLogger(b)}
	n, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx := ctxT(b, 30*time.Minute)
	eventually(b, time.Minute, "the first election", func() bool { return n.Stats().State == "Leader" && n.IsLeader() })
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(count) {
					return
				}
				// 1000 parents with up to 1000 children each keeps child lists realistic.
				var p Proposal
				if i <= 1000 {
					p = createReq(fmt.Sprintf("/p%04d", i), []byte("parent"), jute.ModePersistent)
				} else {
					p = createReq(fmt.Sprintf("/p%04d/c%07d", i%1000+1, i), make([]byte, 32), jute.ModePersistent)
				}
				if res, err := n.Propose(ctx, p); err != nil || (res.Err != nil && i <= 1000) {
					b.Errorf("create %d: %v %v", i, err, res.Err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := n.Snapshot(); err != nil {
		b.Fatal(err)
	}
	want := n.LastZxid()
	nodes := n.View().NodeCount()
	if err := n.Shutdown(); err != nil {
		b.Fatal(err)
	}
	b.Logf("%d znodes, zxid %d", nodes, want)
	b.ResetTimer()
	for range b.N {
		n, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		if n.LastZxid() < want {
			b.Fatalf("restored zxid %d; want %d", n.LastZxid(), want)
		}
		b.StopTimer()
		if err := n.Shutdown(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/restart")
}
