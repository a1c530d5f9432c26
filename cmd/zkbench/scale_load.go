package main

import (
	"context"
	"fmt"
	"syscall"
	"time"
)

// snapFigures are the latencies (ms) of one snapshot run, and the snapshots it saw.
type snapFigures struct {
	P50, P99, P999, Max float64
	Errors              int64
	Taken               int64   // snapshots completed during the run (mntr cnt_snapshottime)
	Busy                float64 // share of the run spent writing them (sum_snapshottime)
}

// scaleSnapshots restarts s with snapshots off, then with snapCount=o.SnapCount, and in each
// mode offers setData at o.SnapRate for o.SnapDuration (after 5 s unrecorded) on top of the
// tree. With snapshots on, a new one is due every few seconds, so they follow one another and
// the run's latencies are those of writes during a snapshot.
func scaleSnapshots(ctx context.Context, o scaleOptions, s *server, rec *scaleRecord, logf func(string, ...any)) error {
	for _, mode := range []string{snapOff, snapOn} {
		logf("%s: restarting with snapshots %s; setData at %.0f/s for %v", s.kind, mode, o.SnapRate, o.SnapDuration)
		if err := s.relaunch(ctx, snapshotConfig(mode, o.SnapCount)); err != nil {
			return err
		}
		cfg := config{Workload: "set", Duration: o.SnapDuration, Clients: 32, Conns: 8, Size: chDataBytes, Keys: 1000,
			Rate: o.SnapRate, Addrs: s.addrs}
		warm := cfg
		warm.Duration = 5 * time.Second
		if _, err := run(ctx, warm, nil); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
		syscall.Sync()
		before, err := mntr(s.addrs[0])
		if err != nil {
			return err
		}
		res, err := run(ctx, cfg, nil)
		if err != nil {
			return err
		}
		after, err := mntr(s.addrs[0])
		if err != nil {
			return err
		}
		f := &snapFigures{
			P50: res.Latency.P50 / 1000, P99: res.Latency.P99 / 1000, P999: res.Latency.P999 / 1000, Max: res.Latency.Max / 1000,
			Errors: res.Errors,
			Taken:  after["zk_cnt_snapshottime"] - before["zk_cnt_snapshottime"],
			Busy:   float64(after["zk_sum_snapshottime"]-before["zk_sum_snapshottime"]) / 1000 / res.Elapsed,
		}
		if mode == snapOff {
			rec.SnapOff = f
		} else {
			rec.SnapOn = f
		}
		logf("%s: snapshots %s: p50 %.2f p99 %.2f p99.9 %.2f max %.1f ms, %d errors, %d snapshots, busy %.0f%%",
			s.kind, mode, f.P50, f.P99, f.P999, f.Max, f.Errors, f.Taken, 100*f.Busy)
	}
	return nil
}

// scaleLocks runs o.Locks lock contenders, each on its own connection, through one lock
// (zkbench's lock workload: each holds once), sampling the server's RSS every 200 ms.
func scaleLocks(ctx context.Context, o scaleOptions, s *server, rec *scaleRecord, logf func(string, ...any)) error {
	pid, err := s.pid(0)
	if err != nil {
		return err
	}
	settle(ctx, map[string]*server{s.kind: s})
	rec.Locks = o.Locks
	rec.LockBeforeMB, _ = rssMB(pid)
	logf("%s: %d lock contenders, RSS %.0f MB before", s.kind, o.Locks, rec.LockBeforeMB)
	stop := make(chan struct{})
	peak := make(chan float64, 1)
	go func() { // the sampler; scaleLocks waits for its figure
		top := rec.LockBeforeMB
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				peak <- top
				return
			case <-t.C:
				if mb, err := rssMB(pid); err == nil {
					top = max(top, mb)
				}
			}
		}
	}()
	res, err := run(ctx, config{Addrs: s.addrs, Workload: "lock", Clients: o.Locks, Conns: o.Locks, Ops: int64(o.Locks),
		SessionTimeout: 120 * time.Second, Root: "/zkbench-locks"}, nil)
	close(stop)
	rec.LockPeakMB = <-peak
	if err != nil {
		return err
	}
	rec.LockGrantsPerS, rec.LockErrors = res.Throughput, res.Errors
	settle(ctx, map[string]*server{s.kind: s})
	time.Sleep(2 * time.Second)
	rec.LockAfterMB, _ = rssMB(pid)
	logf("%s: %.0f grants/s, %d errors; RSS peak %.0f MB, after %.0f MB", s.kind, rec.LockGrantsPerS, rec.LockErrors, rec.LockPeakMB, rec.LockAfterMB)
	return nil
}
