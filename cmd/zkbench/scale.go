package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// scaleOptions are the settings of "zkbench scale".
type scaleOptions struct {
	ZkdBin   string `json:"zkd_bin"`
	ZkdArgs  string `json:"zkd_args"`
	Work     string `json:"-"`
	PortBase int    `json:"port_base"`
	Servers  []string
	// Znodes is the size of the ClickHouse-shaped tree (chTree).
	Znodes int `json:"znodes"`
	Conns  int `json:"conns"`
	// Wide is the number of children of the wide node; WideLimit the largest reply the client
	// reading them accepts (its jute.maxbuffer).
	Wide      int `json:"wide"`
	WideLimit int `json:"wide_limit"`
	// Sessions idle sessions are opened; Watches watches are then spread over them, and
	// FanoutRounds writes of one node all of them watch are timed.
	Sessions     int `json:"sessions"`
	Watches      int `json:"watches"`
	FanoutRounds int `json:"fanout_rounds"`
	ZKHeapMB     int `json:"zookeeper_heap_mb"`
	// Snapshot runs: open-loop setData at SnapRate for SnapDuration, with snapshots off and
	// with snapCount=SnapCount (small enough that snapshots of the tree follow one another).
	SnapRate     float64       `json:"snapshot_rate"`
	SnapDuration time.Duration `json:"snapshot_duration"`
	SnapCount    int           `json:"snapshot_count"`
	// Locks lock contenders, each on its own connection, take one lock once; every waiter reads
	// the whole lock directory (as many children as contenders) when it queues and when it wakes.
	Locks int `json:"locks"`
	// FailoverSessions sessions are held on a 3-node cluster, by child processes of at most
	// HoldPerProcess sessions each, while its leader is killed.
	FailoverSessions int           `json:"failover_sessions"`
	HoldPerProcess   int           `json:"hold_per_process"`
	FailoverSteady   time.Duration `json:"failover_steady"` // measured before the kill (and before a follower loses its data)
	FailoverWindow   time.Duration `json:"failover_window"` // measured after it
	// A follower of a 3-node cluster holding a FollowerZnodes tree loses its data and is filled
	// again while the leader takes setData at FollowerRate; ZooKeeper's members get
	// FollowerZKHeapMB of heap each.
	FollowerZnodes   int     `json:"follower_znodes"`
	FollowerRate     float64 `json:"follower_rate"`
	FollowerZKHeapMB int     `json:"follower_zookeeper_heap_mb"`
	Command          string
}

// scaleRecord is what one server measured in "zkbench scale".
type scaleRecord struct {
	Server string `json:"server"`
	// The tree.
	Znodes    int     `json:"znodes"`
	PopulateS float64 `json:"populate_s"`
	RSSMB     float64 `json:"rss_mb"`
	HeapMB    float64 `json:"heap_mb"` // live heap after a full collection
	// The wide node.
	Wide            int     `json:"wide"`
	WideCreateS     float64 `json:"wide_create_s"`
	AllChildrenMS   float64 `json:"all_children_ms"` // getAllChildrenNumber, median of 5
	WideReplyMB     float64 `json:"wide_reply_mb"`   // the getChildren reply, read in full
	WideReadMS      float64 `json:"wide_read_ms"`
	WideLimited     string  `json:"wide_limited"` // what a client with WideLimit saw
	WideSessionKept bool    `json:"wide_session_kept"`
	// Sessions and watches.
	Sessions       int     `json:"sessions"`
	SessionKiB     float64 `json:"session_heap_kib"` // live heap per idle session
	SessionRSSKiB  float64 `json:"session_rss_kib"`
	HandshakeCPUus float64 `json:"handshake_cpu_us"` // server CPU per session opened
	Watches        int     `json:"watches"`
	WatchBytes     float64 `json:"watch_heap_bytes"` // live heap per watch
	FanoutP50      float64 `json:"fanout_p50_ms"`
	FanoutP99      float64 `json:"fanout_p99_ms"`
	FanoutMissed   int64   `json:"fanout_missed"`
	SessionsLost   int     `json:"sessions_lost"`
	// Lock contenders: the server's RSS before, at its peak (sampled every 200 ms) and after.
	Locks          int     `json:"locks,omitempty"`
	LockBeforeMB   float64 `json:"lock_rss_before_mb,omitempty"`
	LockPeakMB     float64 `json:"lock_rss_peak_mb,omitempty"`
	LockAfterMB    float64 `json:"lock_rss_after_mb,omitempty"`
	LockGrantsPerS float64 `json:"lock_grants_per_s,omitempty"`
	LockErrors     int64   `json:"lock_errors,omitempty"`
	// Writes with snapshots off (steady state) and on.
	SnapOff *snapFigures `json:"snapshots_off,omitempty"`
	SnapOn  *snapFigures `json:"snapshots_on,omitempty"`
	// Restart and import.
	RestartMS     float64 `json:"restart_ms"`
	RSSAfterMB    float64 `json:"rss_after_restart_mb"`
	ImportS       float64 `json:"import_s,omitempty"` // zkd import of ZooKeeper's data directory
	ImportServeMS float64 `json:"import_serve_ms,omitempty"`
	Err           string  `json:"error,omitempty"`
}

// scaleReport is everything "zkbench scale" measured.
type scaleReport struct {
	Options  scaleOptions     `json:"options"`
	Started  time.Time        `json:"started"`
	Finished time.Time        `json:"finished"`
	Records  []scaleRecord    `json:"records"`
	Failover []failoverRecord `json:"failover"`
	Follower []followerRecord `json:"follower"`
}

func scaleMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("zkbench scale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o scaleOptions
	fs.StringVar(&o.ZkdBin, "zkd", "", "zkd binary (required unless -servers zookeeper)")
	fs.StringVar(&o.ZkdArgs, "zkd-args", "-config {cfg}", "zkd arguments; {cfg} {port} {data} {dir} are replaced")
	fs.StringVar(&o.Work, "work", "", "directory for servers' files (default: a new temporary directory, removed after)")
	fs.IntVar(&o.PortBase, "port-base", 24600, "first of 200 loopback ports to use")
	servers := fs.String("servers", "zookeeper,zkd", "servers to measure, in order")
	fs.IntVar(&o.Znodes, "znodes", 10_000_000, "znodes in the ClickHouse-shaped tree of the standalone measurements (0: skip them)")
	fs.IntVar(&o.Conns, "conns", 8, "connections the tree is created over")
	fs.IntVar(&o.Wide, "wide", 1_000_000, "children of the wide node (0: skip)")
	fs.IntVar(&o.WideLimit, "wide-limit", 4<<20, "largest reply the client reading the wide node accepts (the Java client's jute.maxbuffer)")
	fs.IntVar(&o.Sessions, "sessions", 10_000, "idle sessions, one connection each (0: skip sessions and watches)")
	fs.IntVar(&o.Watches, "watches", 1_000_000, "watches spread over the sessions: a third each data, persistent, persistent recursive")
	fs.IntVar(&o.FanoutRounds, "fanout-rounds", 10, "writes of a node every session watches")
	fs.IntVar(&o.ZKHeapMB, "zookeeper-heap-mb", 14336, "ZooKeeper's -Xmx in MiB")
	fs.Float64Var(&o.SnapRate, "snapshot-rate", 2000, "offered setData rate of the snapshot runs (0: skip them)")
	fs.DurationVar(&o.SnapDuration, "snapshot-duration", time.Minute, "length of each snapshot run")
	fs.IntVar(&o.SnapCount, "snapshot-count", 10000, "snapCount of the run with snapshots on")
	fs.IntVar(&o.Locks, "locks", 6000, "lock contenders, each reading the whole lock directory (0: skip)")
	// 36 k, not the 50 k: once the leader is gone its clients land on the other two
	// members, and ulimit -n (a hard 20,000 on the project's machine) caps what each can hold.
	fs.IntVar(&o.FailoverSessions, "failover-sessions", 36_000, "sessions held on a 3-node cluster whose leader is killed (0: skip); after the kill the two members left hold them all, so keep it under twice ulimit -n")
	fs.DurationVar(&o.FailoverSteady, "failover-steady", 10*time.Second, "steady state measured before the leader is killed")
	fs.DurationVar(&o.FailoverWindow, "failover-window", 45*time.Second, "time measured after the leader is killed")
	fs.IntVar(&o.FollowerZnodes, "follower-znodes", 3_000_000, "znodes of the tree a follower that lost its data is sent (0: skip)")
	fs.Float64Var(&o.FollowerRate, "follower-rate", 1000, "offered setData rate on the leader while the follower is filled")
	fs.IntVar(&o.FollowerZKHeapMB, "follower-zookeeper-heap-mb", 4096, "-Xmx of each ZooKeeper member in the follower measurement")
	fs.IntVar(&o.HoldPerProcess, "hold-per-process", 15_000, "most sessions one client process holds (each is an open file)")
	out := fs.String("out", "", "markdown file whose scale section to write (docs/benchmarks.md); empty: print it")
	raw := fs.String("raw", "", "also write every measurement as JSON here")
	render := fs.String("render", "", "measure nothing: render the report of earlier runs' -raw JSON files (comma-separated: their measurements together)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *render != "" {
		var all *scaleReport
		for _, name := range splitAddrs(*render) {
			b, err := os.ReadFile(name)
			if err != nil {
				return err
			}
			var rep scaleReport
			if err := json.Unmarshal(b, &rep); err != nil {
				return fmt.Errorf("zkbench scale: %s: %w", name, err)
			}
			all = mergeScale(all, &rep)
		}
		return writeScale(all, *out, stdout)
	}
	o.Servers = splitAddrs(*servers)
	o.Command = "zkbench scale " + strings.Join(args, " ")
	if label := os.Getenv("ZKBENCH_COMMAND"); label != "" {
		o.Command = label
	}
	if o.Work == "" {
		w, err := os.MkdirTemp("", "zkbench-scale-")
		if err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(w) }()
		o.Work = w
	}
	rep, err := scale(ctx, o, stderr)
	if *raw != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if werr := os.WriteFile(*raw, b, 0o644); werr != nil {
			err = errors.Join(err, werr)
		}
	}
	return errors.Join(err, writeScale(rep, *out, stdout))
}

// writeScale writes the report's section into the file out, or to stdout when out is empty.
func writeScale(rep *scaleReport, out string, stdout io.Writer) error {
	section := renderScale(rep)
	if out == "" {
		_, err := io.WriteString(stdout, section)
		return err
	}
	if err := spliceSection(out, section); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(stdout, "wrote the scale section of %s\n", out)
	return nil
}

// scale measures each server in turn, then zkd importing ZooKeeper's data directory.
func scale(ctx context.Context, o scaleOptions, log io.Writer) (*scaleReport, error) {
	rep := &scaleReport{Options: o, Started: time.Now().UTC()}
	logf := func(format string, a ...any) {
		_, _ = fmt.Fprintf(log, "scale %s: "+format+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
	}
	var errs []error
	var zkDir, lastLeaf string
	for i, kind := range o.Servers {
		if o.Znodes <= 0 {
			break
		}
		rec := scaleRecord{Server: kind}
		dir := filepath.Join(o.Work, kind)
		last, err := scaleServer(ctx, o, kind, dir, o.PortBase+i*5, &rec, logf)
		if err != nil {
			rec.Err = err.Error()
			errs = append(errs, fmt.Errorf("zkbench: scale %s: %w", kind, err))
		} else if kind == strings.ToLower(kindZooKeeper) {
			zkDir, lastLeaf = dir, last
		}
		rep.Records = append(rep.Records, rec)
		if ctx.Err() != nil {
			break
		}
	}
	if zkDir != "" && o.ZkdBin != "" && ctx.Err() == nil {
		for i := range rep.Records {
			if rep.Records[i].Server != kindZkd {
				continue
			}
			if err := scaleImport(ctx, o, zkDir, lastLeaf, o.PortBase+15, &rep.Records[i], logf); err != nil {
				rep.Records[i].Err = strings.TrimPrefix(rep.Records[i].Err+"; ", "; ") + "import: " + err.Error()
				errs = append(errs, fmt.Errorf("zkbench: scale import: %w", err))
			}
		}
	}
	if o.FailoverSessions > 0 {
		for i, kind := range o.Servers {
			if ctx.Err() != nil {
				break
			}
			rec, err := scaleFailover(ctx, o, kind, failoverDir(o.Work, kind), o.PortBase+30+i*30, logf)
			if err != nil {
				rec.Err = err.Error()
				errs = append(errs, fmt.Errorf("zkbench: scale fail-over %s: %w", kind, err))
			}
			rep.Failover = append(rep.Failover, rec)
			_ = os.RemoveAll(failoverDir(o.Work, kind))
		}
	}
	if o.FollowerZnodes > 0 {
		for i, kind := range o.Servers {
			if ctx.Err() != nil {
				break
			}
			dir := filepath.Join(o.Work, kind+"-follower")
			rec, err := scaleFollower(ctx, o, kind, dir, o.PortBase+100+i*30, logf)
			if err != nil {
				rec.Err = err.Error()
				errs = append(errs, fmt.Errorf("zkbench: scale follower %s: %w", kind, err))
			}
			rep.Follower = append(rep.Follower, rec)
			_ = os.RemoveAll(dir)
		}
	}
	rep.Finished = time.Now().UTC()
	return rep, errors.Join(errs...)
}

// scaleServer runs every measurement on one server, started afresh under dir, and returns the
// path of the tree's last znode. ZooKeeper is left stopped with its files in place, for the
// import.
func scaleServer(ctx context.Context, o scaleOptions, kind, dir string, port int, rec *scaleRecord, logf func(string, ...any)) (string, error) {
	s, err := startScaleServer(ctx, o, kind, dir, port)
	if err != nil {
		return "", err
	}
	defer func() { _ = s.stop() }()
	rec.Server = s.kind
	pid, _ := s.pid(0)
	logf("%s pid %d on %s: creating %d ClickHouse-shaped znodes", s.kind, pid, s.addrs[0], o.Znodes)
	tree := chTree{n: o.Znodes}
	start := time.Now()
	if err := tree.populate(ctx, s.addrs[0], o.Conns); err != nil {
		return "", err
	}
	rec.Znodes = o.Znodes
	rec.PopulateS = time.Since(start).Seconds()
	logf("%s: populated in %.1f s; measuring memory", s.kind, rec.PopulateS)
	// RSS is read once the server is idle and 2 s more have passed, as zkbench compare reads
	// it: the zkd binary returns its free heap to the OS once idle after a burst.
	settle(ctx, map[string]*server{s.kind: s})
	time.Sleep(2 * time.Second)
	if rec.HeapMB, err = s.liveHeapMB(ctx); err != nil {
		return "", err
	}
	if rec.RSSMB, err = rssMB(pid); err != nil {
		return "", err
	}
	logf("%s: heap %.0f MB, RSS %.0f MB (%.0f B per znode live, %.0f B raw)", s.kind, rec.HeapMB, rec.RSSMB,
		rec.HeapMB*(1<<20)/float64(rec.Znodes), tree.rawBytes())
	if o.Wide > 0 {
		if err := scaleWide(ctx, o, s, rec, logf); err != nil {
			return "", fmt.Errorf("wide node: %w", err)
		}
	}
	if o.Sessions > 0 {
		if err := scaleSessions(ctx, o, s, tree, rec, logf); err != nil {
			return "", fmt.Errorf("sessions: %w", err)
		}
	}
	if o.Locks > 0 {
		if err := scaleLocks(ctx, o, s, rec, logf); err != nil {
			return "", fmt.Errorf("locks: %w", err)
		}
	}
	if o.SnapRate > 0 {
		if err := scaleSnapshots(ctx, o, s, rec, logf); err != nil {
			return "", fmt.Errorf("snapshots: %w", err)
		}
	}
	last := tree.leaf(o.Znodes - 1)
	logf("%s: kill -9 and restart", s.kind)
	if err := s.kill9(); err != nil {
		return "", err
	}
	launched, err := s.restart(ctx)
	if err != nil {
		return "", err
	}
	ready, err := waitForNode(ctx, s.addrs[0], last, 30*time.Minute)
	if err != nil {
		return "", err
	}
	rec.RestartMS = float64(ready.Sub(launched).Microseconds()) / 1000
	if pid, err := s.pid(0); err == nil {
		rec.RSSAfterMB, _ = rssMB(pid)
	}
	logf("%s: serving %.0f ms after the restart", s.kind, rec.RestartMS)
	return last, nil
}

// startScaleServer starts a standalone ZooKeeper with o.ZKHeapMB of heap, or a zkd with its admin
// server on port+1 (pprof on, for a full collection before the heap is read).
func startScaleServer(ctx context.Context, o scaleOptions, kind, dir string, port int) (*server, error) {
	switch kind {
	case "zookeeper":
		return startZooKeeperHeap(ctx, dir, port, 1, o.ZKHeapMB)
	case "zkd":
		if o.ZkdBin == "" {
			return nil, errors.New("zkbench: no zkd binary (-zkd)")
		}
		extra := fmt.Sprintf("admin.enableServer=true\nadmin.serverAddress=127.0.0.1\nadmin.serverPort=%d\nadmin.enablePprof=true\n", port+1)
		if _, err := zkdConfig(dir, port, 0, 1, port, extra); err != nil {
			return nil, err
		}
		s := &server{kind: kindZkd, dir: dir, bin: o.ZkdBin, args: o.ZkdArgs, nodes: []string{dir},
			ports: []int{port}, addrs: []string{fmt.Sprintf("127.0.0.1:%d", port)}, adminPort: port + 1, cfgExtra: extra}
		return s, s.launchAll(ctx)
	}
	return nil, fmt.Errorf("zkbench: unknown server %q (zookeeper or zkd)", kind)
}

// gcLine matches one collection of the Go runtime's GC trace.
var gcLine = regexp.MustCompile(`gc \d+ @`)

// liveHeapMB returns the server's live heap after a full collection: ZooKeeper's Java heap in use
// after jcmd GC.run; for zkd, a collection is forced through pprof (heap?gc=1) and the live heap
// is read from the GC trace line it printed.
func (s *server) liveHeapMB(ctx context.Context) (float64, error) {
	if s.kind == kindZooKeeper {
		return s.heapMB(ctx)
	}
	if s.adminPort == 0 {
		return 0, errors.New("zkbench: zkd started without its admin server")
	}
	logPath := filepath.Join(s.nodes[0], "zkd.log")
	count := func() int {
		b, _ := os.ReadFile(logPath)
		return len(gcLine.FindAllIndex(b, -1))
	}
	before := count()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap?gc=1", s.adminPort), nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("zkbench: force a collection: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("zkbench: force a collection: %s", resp.Status)
	}
	// The trace line is written as the collection ends, before the profile is served; allow
	// for the log file's buffering all the same.
	deadline := time.Now().Add(5 * time.Second)
	for count() <= before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	return s.heapMB(ctx)
}

// scaleImport times `zkd import` of ZooKeeper's data directory (zkDir, left by scaleServer) into a
// new zkd data directory, then a zkd started on it until last is readable.
func scaleImport(ctx context.Context, o scaleOptions, zkDir, last string, port int, rec *scaleRecord, logf func(string, ...any)) error {
	dir := filepath.Join(o.Work, "zkd-imported")
	if _, err := zkdConfig(dir, port, 0, 1, port, ""); err != nil {
		return err
	}
	logf("zkd import of ZooKeeper's data directory")
	start := time.Now()
	cmd := exec.CommandContext(ctx, o.ZkdBin, "import", "-from", filepath.Join(zkDir, "data"),
		"-from-log", filepath.Join(zkDir, "txnlog"), "-data", filepath.Join(dir, "data"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	rec.ImportS = time.Since(start).Seconds()
	s := &server{kind: kindZkd, dir: dir, bin: o.ZkdBin, args: o.ZkdArgs, nodes: []string{dir},
		ports: []int{port}, addrs: []string{fmt.Sprintf("127.0.0.1:%d", port)}}
	s.cmds, s.waits = make([]*exec.Cmd, 1), make([]chan error, 1)
	launched := time.Now()
	if err := s.launchZkd(0); err != nil {
		return err
	}
	defer func() { _ = s.stop() }()
	ready, err := waitForNode(ctx, s.addrs[0], last, 30*time.Minute)
	if err != nil {
		return err
	}
	rec.ImportServeMS = float64(ready.Sub(launched).Microseconds()) / 1000
	logf("zkd: imported in %.1f s, serving the import %.0f ms after launch", rec.ImportS, rec.ImportServeMS)
	return nil
}

// mergeScale adds b's measurements to a's (nil: b alone): the options that describe the
// standalone measurements come from the report that made them, the others from the one that made
// those, and the commands of both are kept.
func mergeScale(a, b *scaleReport) *scaleReport {
	if a == nil {
		return b
	}
	m := *a
	m.Records = append(m.Records, b.Records...)
	m.Failover = append(m.Failover, b.Failover...)
	m.Follower = append(m.Follower, b.Follower...)
	if len(b.Records) > 0 && len(a.Records) == 0 {
		m.Options.Znodes, m.Options.Wide, m.Options.WideLimit = b.Options.Znodes, b.Options.Wide, b.Options.WideLimit
		m.Options.Sessions, m.Options.Watches, m.Options.FanoutRounds = b.Options.Sessions, b.Options.Watches, b.Options.FanoutRounds
		m.Options.Locks, m.Options.ZKHeapMB, m.Options.Conns = b.Options.Locks, b.Options.ZKHeapMB, b.Options.Conns
		m.Options.SnapRate, m.Options.SnapDuration, m.Options.SnapCount = b.Options.SnapRate, b.Options.SnapDuration, b.Options.SnapCount
	}
	if len(b.Failover) > 0 && len(a.Failover) == 0 {
		m.Options.FailoverSessions, m.Options.HoldPerProcess = b.Options.FailoverSessions, b.Options.HoldPerProcess
		m.Options.FailoverSteady, m.Options.FailoverWindow = b.Options.FailoverSteady, b.Options.FailoverWindow
	}
	if len(b.Follower) > 0 && len(a.Follower) == 0 {
		m.Options.FollowerZnodes, m.Options.FollowerRate, m.Options.FollowerZKHeapMB = b.Options.FollowerZnodes, b.Options.FollowerRate, b.Options.FollowerZKHeapMB
		if len(a.Failover) == 0 {
			m.Options.FailoverSteady = b.Options.FailoverSteady
		}
	}
	m.Options.Command = a.Options.Command + "`, then `" + b.Options.Command
	if b.Finished.After(m.Finished) {
		m.Finished = b.Finished
	}
	return &m
}
