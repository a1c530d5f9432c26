package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Snapshot modes of the snapshot comparison.
const (
	snapOff = "off"
	snapOn  = "on"
)

// snapRecord is one run of the snapshot comparison: open-loop setData on a large tree with
// snapshots turned off, or with a snapCount small enough that snapshots run throughout.
type snapRecord struct {
	Server    string `json:"server"`
	Znodes    int    `json:"znodes"`
	Snapshots string `json:"snapshots"` // snapOff or snapOn
	Repeat    int    `json:"repeat"`
	Result    result `json:"result"`
	// Taken and TakenMS are the snapshots completed during the run and the time they took
	// (mntr's cnt_snapshottime and sum_snapshottime, read before and after).
	Taken   int64  `json:"snapshots_taken"`
	TakenMS int64  `json:"snapshot_ms"`
	Err     string `json:"error,omitempty"`
}

// snapshotConfig returns the zoo.cfg keys of a snapshot mode; both servers read the same keys.
func snapshotConfig(mode string, snapCount int) map[string]string {
	if mode == snapOff {
		return map[string]string{"snapCount": "1000000000", "snapSizeLimitInKb": "-1"}
	}
	return map[string]string{"snapCount": strconv.Itoa(snapCount)}
}

// snapshotSpec is the load of every snapshot run: setData at a fixed offered rate, so a stall
// while a snapshot is written shows in the latencies instead of slowing the load down.
func snapshotSpec(o compareOptions) config {
	return config{Workload: "set", Duration: o.Duration, Clients: 32, Conns: 8, Size: 128, Keys: 1000, Rate: o.SnapRate}
}

// compareSnapshots runs, standalone, each server on a tree of o.SnapZnodes znodes with snapshots
// off and on, alternating servers and modes, and records the latencies and the snapshots taken.
func compareSnapshots(ctx context.Context, o compareOptions, cmp *comparison, base int, logf func(string, ...any)) error {
	kinds := []string{kindZooKeeper}
	if cmp.ZkdReason == "" {
		kinds = append(kinds, kindZkd)
	}
	servers := map[string]*server{}
	defer func() {
		for _, s := range servers {
			if err := s.stop(); err != nil {
				logf("stopping %s: %v", s.kind, err)
			}
			_ = os.RemoveAll(s.dir)
		}
	}()
	for k, kind := range kinds {
		dir := filepath.Join(o.Work, "snap-"+strings.ToLower(kind))
		s, err := startStandalone(ctx, o, kind, dir, base+k*50)
		if err != nil {
			return fmt.Errorf("zkbench: snapshot %s: %w", kind, err)
		}
		servers[kind] = s
		logf("snapshot %s: creating %d znodes", kind, o.SnapZnodes)
		if _, err := populate(ctx, s.addrs, "/zkbench-snap", o.SnapZnodes, 128, 8); err != nil {
			return fmt.Errorf("zkbench: snapshot %s: populate: %w", kind, err)
		}
		if err := s.stop(); err != nil {
			return err
		}
	}
	var errs []error
	modes := []string{snapOff, snapOn}
	for rep := range o.Repeat {
		for mi := range modes {
			mode := modes[(mi+rep)%len(modes)]
			for k := range kinds {
				kind := kinds[(k+rep+mi)%len(kinds)]
				if ctx.Err() != nil {
					return ctx.Err()
				}
				rec, err := snapshotRun(ctx, o, servers[kind], mode)
				rec.Repeat = rep
				if err != nil {
					rec.Err = err.Error()
					errs = append(errs, fmt.Errorf("zkbench: snapshot %s %s: %w", kind, mode, err))
				}
				cmp.Snapshots = append(cmp.Snapshots, rec)
				logf("snapshot rep %d %-9s snapshots %-3s %7.0f/s p99 %7.0fus p99.9 %8.0fus max %8.0fus, %d snapshots taken (%d ms) %s",
					rep+1, kind, mode, rec.Result.Throughput, rec.Result.Latency.P99, rec.Result.Latency.P999,
					rec.Result.Latency.Max, rec.Taken, rec.TakenMS, rec.Err)
			}
		}
	}
	return errors.Join(errs...)
}

// snapshotRun restarts s in the given mode, warms it up, and measures one run.
func snapshotRun(ctx context.Context, o compareOptions, s *server, mode string) (snapRecord, error) {
	rec := snapRecord{Server: s.kind, Znodes: o.SnapZnodes, Snapshots: mode}
	defer func() { _ = s.stop() }()
	if err := s.relaunch(ctx, snapshotConfig(mode, o.SnapCount)); err != nil {
		return rec, err
	}
	cfg := snapshotSpec(o)
	cfg.Addrs = s.addrs
	if o.Warmup > 0 {
		warm := cfg
		warm.Duration = o.Warmup
		if _, err := run(ctx, warm, nil); err != nil {
			return rec, fmt.Errorf("warm-up: %w", err)
		}
	}
	// Snapshots of earlier runs and of the warm-up may still be dirty in the page cache (a
	// snapshot file need not be fsynced); their writeback would land on this run.
	syscall.Sync()
	before, err := mntr(s.addrs[0])
	if err != nil {
		return rec, err
	}
	res, runErr := run(ctx, cfg, nil)
	rec.Result = res
	after, err := mntr(s.addrs[0])
	if err != nil {
		return rec, errors.Join(runErr, err)
	}
	rec.Taken = after["zk_cnt_snapshottime"] - before["zk_cnt_snapshottime"]
	rec.TakenMS = after["zk_sum_snapshottime"] - before["zk_sum_snapshottime"]
	return rec, runErr
}

// fourLetter sends a four-letter command (mntr, srvr) to the server at addr and returns its
// reply's lines.
func fourLetter(addr, cmd string) ([]string, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("zkbench: %s: %w", cmd, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, cmd); err != nil {
		return nil, fmt.Errorf("zkbench: %s %s: %w", cmd, addr, err)
	}
	var lines []string
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("zkbench: %s %s: %w", cmd, addr, err)
	}
	return lines, nil
}

// mntr reads the integer keys of a server's mntr reply.
func mntr(addr string) (map[string]int64, error) {
	lines, err := fourLetter(addr, "mntr")
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, line := range lines {
		k, v, ok := strings.Cut(line, "\t")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			out[k] = n
		}
	}
	if _, ok := out["zk_cnt_snapshottime"]; !ok {
		return nil, errors.New("zkbench: mntr has no zk_cnt_snapshottime")
	}
	return out, nil
}
