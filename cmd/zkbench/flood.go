package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkd-io/zkd/jute"
)

// The flood: a server under abuse, and the clients that behave. Probe clients (one request at a
// time: a setData, then a getData) measure their latency alone, then again while
//   - flooders, each on its own connection, pipeline creates as fast as the server takes them,
//   - one client asks for large replies and never reads them,
//   - a connect storm opens and closes sessions as fast as it can;
// afterwards every create a flooder was told succeeded must exist. With -pid, the server's
// resident size is sampled throughout.

// floodConfig is one flood run.
type floodConfig struct {
	Addr           string
	Flooders       int
	Depth          int
	Storm          int
	Probes         int
	Baseline       time.Duration
	Duration       time.Duration
	NonReaderReqs  int
	NonReaderBytes int
	SessionTimeout time.Duration
	PID            int
	Root           string
}

// floodResult is what a flood run measured.
type floodResult struct {
	Config floodConfig `json:"config"`
	// The probes' latency alone and under the flood.
	BaselineWrite latencySummary `json:"baseline_write"`
	BaselineRead  latencySummary `json:"baseline_read"`
	FloodWrite    latencySummary `json:"flood_write"`
	FloodRead     latencySummary `json:"flood_read"`
	// ProbeErrors are errors the probes saw, ProbeDisconnects the probes that lost their connection.
	ProbeErrors      int `json:"probe_errors"`
	ProbeDisconnects int `json:"probe_disconnects"`
	// Flooders' acknowledged creates, their errors by text, and the flooders whose connection was lost.
	FloodAcked       int64          `json:"flood_acked"`
	FloodPerSec      float64        `json:"flood_acked_per_s"`
	FloodErrors      map[string]int `json:"flood_errors,omitempty"`
	FloodDisconnects int            `json:"flood_disconnects"`
	// Lost are acknowledged creates missing afterwards (must be 0).
	Lost int `json:"lost"`
	// The connect storm's completed sessions, and its failures by text.
	StormSessions int64          `json:"storm_sessions"`
	StormPerSec   float64        `json:"storm_sessions_per_s"`
	StormErrors   map[string]int `json:"storm_errors,omitempty"`
	// NonReaderClosed says whether the server closed the client that never read.
	NonReaderClosed bool `json:"non_reader_closed"`
	// Server resident size in MiB (with -pid): before the flood, its peak, and after.
	RSSBeforeMiB int `json:"rss_before_mib,omitempty"`
	RSSPeakMiB   int `json:"rss_peak_mib,omitempty"`
	RSSAfterMiB  int `json:"rss_after_mib,omitempty"`
}

func floodMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("zkbench flood", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg floodConfig
	fs.StringVar(&cfg.Addr, "addr", "127.0.0.1:2181", "server address")
	fs.IntVar(&cfg.Flooders, "flooders", 1000, "connections pipelining creates")
	fs.IntVar(&cfg.Depth, "depth", 16, "creates each flooder keeps outstanding")
	fs.IntVar(&cfg.Storm, "storm", 32, "goroutines opening and closing sessions")
	fs.IntVar(&cfg.Probes, "probes", 4, "well-behaved clients measuring latency")
	fs.DurationVar(&cfg.Baseline, "baseline", 10*time.Second, "how long the probes run alone")
	fs.DurationVar(&cfg.Duration, "duration", 20*time.Second, "how long the flood lasts")
	fs.IntVar(&cfg.NonReaderReqs, "nonreader-requests", 512, "getData requests the client that never reads sends")
	fs.IntVar(&cfg.NonReaderBytes, "nonreader-bytes", 512<<10, "size of the node it reads")
	fs.DurationVar(&cfg.SessionTimeout, "session-timeout", 30*time.Second, "session timeout asked for")
	fs.IntVar(&cfg.PID, "pid", 0, "the server's process id, to sample its resident size")
	fs.StringVar(&cfg.Root, "root", "/zkbench-flood", "parent node of the flood's nodes")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	res, err := flood(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	printFlood(stdout, res)
	return nil
}

func printFlood(w io.Writer, r floodResult) {
	c := r.Config
	fmt.Fprintf(w, "flood on %s: %d flooders x %d outstanding creates, a client that never reads (%d x %d KiB), a %d-way connect storm, %d probes; %v alone, %v flooded\n",
		c.Addr, c.Flooders, c.Depth, c.NonReaderReqs, c.NonReaderBytes>>10, c.Storm, c.Probes, c.Baseline, c.Duration)
	ratio := func(a, b float64) string {
		if b == 0 {
			return "-"
		}
		return strconv.FormatFloat(a/b, 'f', 2, 64) + "x"
	}
	fmt.Fprintf(w, "  probe setData us: alone p50 %.0f p99 %.0f; flooded p50 %.0f p99 %.0f (p99 %s)\n",
		r.BaselineWrite.P50, r.BaselineWrite.P99, r.FloodWrite.P50, r.FloodWrite.P99, ratio(r.FloodWrite.P99, r.BaselineWrite.P99))
	fmt.Fprintf(w, "  probe getData us: alone p50 %.0f p99 %.0f; flooded p50 %.0f p99 %.0f (p99 %s)\n",
		r.BaselineRead.P50, r.BaselineRead.P99, r.FloodRead.P50, r.FloodRead.P99, ratio(r.FloodRead.P99, r.BaselineRead.P99))
	fmt.Fprintf(w, "  probes: %d errors, %d disconnects\n", r.ProbeErrors, r.ProbeDisconnects)
	fmt.Fprintf(w, "  flooders: %d creates acknowledged (%.0f/s), %d lost, %d disconnected, errors %v\n",
		r.FloodAcked, r.FloodPerSec, r.Lost, r.FloodDisconnects, r.FloodErrors)
	fmt.Fprintf(w, "  storm: %d sessions (%.0f/s), errors %v\n", r.StormSessions, r.StormPerSec, r.StormErrors)
	fmt.Fprintf(w, "  non-reader closed by the server: %v\n", r.NonReaderClosed)
	if c.PID != 0 {
		fmt.Fprintf(w, "  server RSS MiB: before %d, peak %d, after %d\n", r.RSSBeforeMiB, r.RSSPeakMiB, r.RSSAfterMiB)
	}
}

// rssSampler samples a process's resident size every 100 ms and keeps the peak.
type rssSampler struct {
	pid  int
	peak atomic.Int64
}

// rssKiB reads pid's VmRSS in KiB (0 if it cannot).
func rssKiB(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

func (s *rssSampler) run(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		if v := rssKiB(s.pid); v > s.peak.Load() {
			s.peak.Store(v)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// probe is one well-behaved client: one request at a time.
type probe struct {
	c           *client
	path        string
	write, read *histogram
	errors      int
}

// runProbe does setData then getData until ctx ends, recording each into the probe's histograms.
func (p *probe) run(ctx context.Context) {
	data := make([]byte, 128)
	for ctx.Err() == nil {
		start := time.Now()
		r := p.c.call(jute.OpSetData, &jute.SetDataRequest{Path: p.path, Data: data, Version: -1})
		if r.result() != nil {
			p.errors++
			if errors.Is(r.err, errConnLost) {
				return
			}
			continue
		}
		p.write.recordDuration(time.Since(start))
		start = time.Now()
		r = p.c.call(jute.OpGetData, &jute.GetDataRequest{Path: p.path})
		if r.result() != nil {
			p.errors++
			if errors.Is(r.err, errConnLost) {
				return
			}
			continue
		}
		p.read.recordDuration(time.Since(start))
	}
}

// flooder pipelines sequential creates under its own parent and remembers what was acknowledged.
type flooder struct {
	c      *client
	parent string
	mu     sync.Mutex
	acked  []string
	errs   map[string]int
	lost   bool
	wg     sync.WaitGroup
}

// run keeps depth creates outstanding until ctx ends, then waits for the outstanding ones.
func (f *flooder) run(ctx context.Context, depth int) {
	slots := make(chan struct{}, depth)
	data := make([]byte, 64)
	for ctx.Err() == nil {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		f.wg.Add(1)
		f.c.send(jute.OpCreate, &jute.CreateRequest{Path: f.parent + "/n-", Data: data, ACL: openACL, Flags: jute.ModePersistentSequential}, func(r reply) {
			defer f.wg.Done()
			defer func() { <-slots }()
			f.mu.Lock()
			defer f.mu.Unlock()
			if err := r.result(); err != nil {
				if errors.Is(err, errConnLost) {
					f.lost = true
				}
				f.errs[errText(err)]++
				return
			}
			if resp, ok := r.body.(*jute.CreateResponse); ok {
				f.acked = append(f.acked, resp.Path)
			}
		})
		f.mu.Lock()
		lost := f.lost
		f.mu.Unlock()
		if lost {
			break
		}
	}
	f.wg.Wait()
}

// errText names an error for counting: the first line, without addresses.
func errText(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if errors.Is(err, errConnLost) {
		return "connection lost"
	}
	return s
}

// nonReader opens a session, asks for n large replies and never reads anything.
func nonReader(addr string, path string, n int, timeout time.Duration) (net.Conn, error) {
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	out := jute.AppendFrame(nil, &jute.ConnectRequest{TimeOut: int32(timeout / time.Millisecond), Passwd: make([]byte, 16)})
	for i := range n {
		out = jute.AppendRequest(out, jute.RequestHeader{Xid: int32(i + 1), Type: jute.OpGetData}, &jute.GetDataRequest{Path: path})
	}
	// The requests are small: they fit in the socket's buffers, so this write does not block
	// on a server that stops reading.
	_ = nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write(out); err != nil {
		_ = nc.Close()
		return nil, err
	}
	return nc, nil
}

// closedByServer reports whether the server closed nc: a read finds end of file or a reset
// rather than data or nothing within a short wait.
func closedByServer(nc net.Conn) bool {
	_ = nc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	var b [1]byte
	_, err := nc.Read(b[:])
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// storm opens a session and closes it, again and again, until ctx ends.
func storm(ctx context.Context, addr string, sessions *atomic.Int64, errs map[string]int, mu *sync.Mutex) {
	for ctx.Err() == nil {
		c, err := dialClient(addr, 4*time.Second, nil)
		if err == nil {
			err = c.close()
		}
		if err != nil {
			mu.Lock()
			errs[errText(err)]++
			mu.Unlock()
			continue
		}
		sessions.Add(1)
	}
}

func flood(ctx context.Context, cfg floodConfig, progress io.Writer) (floodResult, error) {
	res := floodResult{Config: cfg, FloodErrors: map[string]int{}, StormErrors: map[string]int{}}
	admin, err := dialClient(cfg.Addr, cfg.SessionTimeout, nil)
	if err != nil {
		return res, err
	}
	defer func() { _ = admin.close() }()
	if err := ensurePath(admin, cfg.Root); err != nil {
		return res, err
	}
	big := cfg.Root + "/big"
	if err := create(admin, big, make([]byte, cfg.NonReaderBytes), jute.ModePersistent); err != nil && !errors.Is(err, jute.CodeNodeExists) {
		return res, err
	}
	run := fmt.Sprintf("%s/run-%d", cfg.Root, time.Now().UnixNano())
	if err := create(admin, run, nil, jute.ModePersistent); err != nil {
		return res, err
	}

	var sampler *rssSampler
	sctx, stopSampler := context.WithCancel(ctx)
	defer stopSampler()
	var samplerDone sync.WaitGroup
	if cfg.PID != 0 {
		sampler = &rssSampler{pid: cfg.PID}
	}

	// Probes, alone.
	probes := make([]*probe, cfg.Probes)
	for i := range probes {
		c, err := dialClient(cfg.Addr, cfg.SessionTimeout, nil)
		if err != nil {
			return res, err
		}
		defer func() { _ = c.close() }()
		p := &probe{c: c, path: fmt.Sprintf("%s/probe-%d", run, i), write: newHistogram(), read: newHistogram()}
		if err := create(c, p.path, nil, jute.ModePersistent); err != nil {
			return res, err
		}
		probes[i] = p
	}
	runProbes := func(d time.Duration) (write, read *histogram) {
		pctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		var wg sync.WaitGroup
		for _, p := range probes {
			p.write, p.read = newHistogram(), newHistogram()
			wg.Go(func() { p.run(pctx) })
		}
		wg.Wait()
		write, read = newHistogram(), newHistogram()
		for _, p := range probes {
			write.merge(p.write)
			read.merge(p.read)
		}
		return write, read
	}
	fmt.Fprintf(progress, "flood: probes alone for %v\n", cfg.Baseline)
	w, r := runProbes(cfg.Baseline)
	res.BaselineWrite, res.BaselineRead = w.summary(), r.summary()
	if cfg.PID != 0 {
		res.RSSBeforeMiB = int(rssKiB(cfg.PID) >> 10)
		samplerDone.Go(func() { sampler.run(sctx) })
	}

	// The flood.
	fmt.Fprintf(progress, "flood: %d flooders connecting\n", cfg.Flooders)
	flooders := make([]*flooder, 0, cfg.Flooders)
	for i := range cfg.Flooders {
		c, err := dialClient(cfg.Addr, cfg.SessionTimeout, nil)
		if err != nil {
			res.FloodErrors["connect: "+errText(err)]++
			continue
		}
		f := &flooder{c: c, parent: fmt.Sprintf("%s/f-%d", run, i), errs: map[string]int{}}
		if err := create(c, f.parent, nil, jute.ModePersistent); err != nil {
			_ = c.close()
			res.FloodErrors["setup: "+errText(err)]++
			continue
		}
		flooders = append(flooders, f)
	}
	nr, err := nonReader(cfg.Addr, big, cfg.NonReaderReqs, cfg.SessionTimeout)
	if err != nil {
		return res, fmt.Errorf("zkbench: flood: the client that never reads: %w", err)
	}
	defer func() { _ = nr.Close() }()
	fctx, stopFlood := context.WithCancel(ctx)
	var fwg sync.WaitGroup
	for _, f := range flooders {
		fwg.Go(func() { f.run(fctx, cfg.Depth) })
	}
	var stormSessions atomic.Int64
	var stormMu sync.Mutex
	for range cfg.Storm {
		fwg.Go(func() { storm(fctx, cfg.Addr, &stormSessions, res.StormErrors, &stormMu) })
	}
	fmt.Fprintf(progress, "flood: flooded for %v\n", cfg.Duration)
	start := time.Now()
	w, r = runProbes(cfg.Duration)
	stopFlood()
	fwg.Wait()
	elapsed := time.Since(start)
	res.FloodWrite, res.FloodRead = w.summary(), r.summary()
	res.NonReaderClosed = closedByServer(nr)
	_ = nr.Close()
	for _, p := range probes {
		res.ProbeErrors += p.errors
		if p.c.err() != nil {
			res.ProbeDisconnects++
		}
	}
	res.StormSessions = stormSessions.Load()
	res.StormPerSec = float64(res.StormSessions) / elapsed.Seconds()

	// Nothing acknowledged is lost: every flooder's acknowledged creates are there.
	fmt.Fprintf(progress, "flood: checking %d flooders' creates\n", len(flooders))
	for _, f := range flooders {
		res.FloodAcked += int64(len(f.acked))
		for k, v := range f.errs {
			res.FloodErrors[k] += v
		}
		if f.lost {
			res.FloodDisconnects++
		}
		_ = f.c.close()
		kids, err := children(admin, f.parent)
		if err != nil {
			return res, err
		}
		slices.Sort(kids)
		for _, p := range f.acked {
			if _, found := slices.BinarySearch(kids, p[len(f.parent)+1:]); !found {
				res.Lost++
			}
		}
	}
	res.FloodPerSec = float64(res.FloodAcked) / elapsed.Seconds()
	if cfg.PID != 0 {
		stopSampler()
		samplerDone.Wait()
		res.RSSPeakMiB = int(sampler.peak.Load() >> 10)
		res.RSSAfterMiB = int(rssKiB(cfg.PID) >> 10)
	}
	return res, nil
}
