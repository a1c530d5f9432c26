package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkd-io/zkd/jute"
)

// config describes one benchmark run.
type config struct {
	Addrs          []string      `json:"addrs"`
	Workload       string        `json:"workload"`
	Clients        int           `json:"clients"`
	Conns          int           `json:"conns"`
	Duration       time.Duration `json:"duration_ns"`
	Ops            int64         `json:"ops_limit"`
	Rate           float64       `json:"rate"`
	MaxInFlight    int           `json:"max_in_flight"`
	Size           int           `json:"value_size"`
	Keys           int           `json:"keys"`
	ReadRatio      float64       `json:"read_ratio"`
	MultiOps       int           `json:"multi_ops"`
	Watchers       int           `json:"watchers"`
	Root           string        `json:"root"`
	SessionTimeout time.Duration `json:"session_timeout_ns"`
	Progress       time.Duration `json:"-"`
	Keep           bool          `json:"-"`
	// TLS, when set, makes every connection a TLS one (the server's secure port).
	TLS *tls.Config `json:"-"`
	// TLSOn is reported in results: whether the run used TLS.
	TLSOn bool `json:"tls,omitempty"`
	// The -tls-* flags: PEM files of the CA to trust, and a client certificate and key.
	tlsCA, tlsCert, tlsKey string
}

// dial opens a session on addr as this run's connections do (TLS or not).
func (c config) dial(addr string, onWatch func(jute.WatcherEvent)) (*client, error) {
	return dialClientTLS(addr, c.TLS, c.SessionTimeout, onWatch)
}

// withDefaults fills zero fields.
func (c config) withDefaults() config {
	if c.Clients <= 0 {
		c.Clients = 1
	}
	if c.Conns <= 0 {
		c.Conns = min(c.Clients, 8)
	}
	c.Conns = min(c.Conns, c.Clients)
	if c.Duration <= 0 && c.Ops <= 0 {
		c.Duration = 10 * time.Second
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 10000
	}
	if c.Size < 0 {
		c.Size = 0
	}
	if c.Keys <= 0 {
		c.Keys = 1000
	}
	if c.Workload == "large" {
		if c.Size < 64<<10 {
			c.Size = 256 << 10
		}
		c.Keys = min(c.Keys, 64)
	}
	if c.MultiOps <= 0 {
		c.MultiOps = 4
	}
	if c.Watchers <= 0 {
		c.Watchers = 16
	}
	if c.Root == "" {
		c.Root = "/zkbench"
	}
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 30 * time.Second
	}
	return c
}

// result is the outcome of one run, as printed and as written with -json.
type result struct {
	Workload   string           `json:"workload"`
	Mode       string           `json:"mode"` // "closed" or "open"
	Unit       string           `json:"unit"` // what one op is
	Addrs      []string         `json:"addrs"`
	Clients    int              `json:"clients"`
	Conns      int              `json:"conns"`
	Rate       float64          `json:"offered_rate,omitempty"`
	Size       int              `json:"value_size"`
	Ops        int64            `json:"ops"`
	Errors     int64            `json:"errors"`
	ErrorKinds map[string]int64 `json:"error_kinds,omitempty"`
	Elapsed    float64          `json:"elapsed_s"`
	Throughput float64          `json:"throughput"`
	Latency    latencySummary   `json:"latency"`
	Start      time.Time        `json:"start"`
	TLS        bool             `json:"tls,omitempty"`
	Lock       *lockCounts      `json:"lock,omitempty"`
}

// lockCounts is what the lock workload's contenders saw of the herd: how often a contender
// watched its predecessor, and how many watch notifications all of them received (herd-free:
// one per wait).
type lockCounts struct {
	Waits         int64 `json:"waits"`
	Notifications int64 `json:"notifications"`
}

// recorder collects latencies and errors from many goroutines.
type recorder struct {
	mu     sync.Mutex
	hist   *histogram
	kinds  map[string]int64
	ops    atomic.Int64
	errors atomic.Int64
}

func newRecorder() *recorder { return &recorder{hist: newHistogram(), kinds: map[string]int64{}} }

// done records one completed op that started (or was due) at start.
func (r *recorder) done(start time.Time, err error) {
	d := time.Since(start)
	r.ops.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.errors.Add(1)
		r.kinds[errorKind(err)]++
		return
	}
	r.hist.recordDuration(d)
}

// errorKind names an error for the report: the ZooKeeper code, or a short transport description.
func errorKind(err error) string {
	var code jute.Code
	if errors.As(err, &code) {
		return code.String()
	}
	if errors.Is(err, errClosed) {
		return "connection closed"
	}
	if errors.Is(err, errNoCloseReply) {
		return "closeSession unanswered: the server closed the connection first"
	}
	if errors.Is(err, errConnLost) {
		return "connection lost (" + strings.TrimPrefix(err.Error(), errConnLost.Error()+": ") + ")"
	}
	s := err.Error()
	if len(s) > 60 {
		s = s[:60]
	}
	return s
}

// env is what a workload runs in: its connections and configuration.
type env struct {
	cfg     config
	clients []*client
	base    string // this run's own node under cfg.Root
	rec     *recorder
	// valueBuf holds the value written by this run, built on first use.
	valueBuf atomic.Pointer[[]byte]
	// lockWaits counts the lock workload's waits on a predecessor's watch.
	lockWaits atomic.Int64
}

// conn returns the connection that client i uses.
func (e *env) conn(i int) *client { return e.clients[i%len(e.clients)] }

// workload is one kind of load. op performs one operation for client i (blocking) and returns its
// error; drive, when set, replaces the per-client loop entirely.
type workload struct {
	name  string
	unit  string
	open  bool // whether open-loop mode is supported
	conns func(cfg config) int
	setup func(e *env) error
	op    func(e *env, i int, seq int64) error
	drive func(ctx context.Context, e *env) error
}

// run executes one benchmark and returns its result. progress, if not nil, receives a line every
// cfg.Progress.
func run(ctx context.Context, cfg config, progress io.Writer) (result, error) {
	cfg = cfg.withDefaults()
	w, ok := workloads[cfg.Workload]
	if !ok {
		return result{}, fmt.Errorf("zkbench: unknown workload %q (have %s)", cfg.Workload, strings.Join(workloadNames(), ", "))
	}
	if cfg.Rate > 0 && !w.open {
		return result{}, fmt.Errorf("zkbench: workload %s has no open-loop mode", w.name)
	}
	if len(cfg.Addrs) == 0 {
		return result{}, errors.New("zkbench: no server address")
	}
	nconns := cfg.Conns
	if w.conns != nil {
		nconns = w.conns(cfg)
	}
	e := &env{cfg: cfg, rec: newRecorder()}
	defer func() {
		for _, c := range e.clients {
			_ = c.close()
		}
	}()
	for i := range nconns {
		c, err := cfg.dial(cfg.Addrs[i%len(cfg.Addrs)], nil)
		if err != nil {
			return result{}, err
		}
		e.clients = append(e.clients, c)
	}
	if err := ensurePath(e.clients[0], cfg.Root); err != nil {
		return result{}, err
	}
	e.base = fmt.Sprintf("%s/%s-%x", cfg.Root, w.name, time.Now().UnixNano())
	if err := create(e.clients[0], e.base, nil, jute.ModePersistent); err != nil {
		return result{}, err
	}
	if w.setup != nil {
		if err := w.setup(e); err != nil {
			return result{}, fmt.Errorf("zkbench: %s setup: %w", w.name, err)
		}
	}
	// Setup wrote through the first connection; on a cluster, make every connection's server
	// catch up with it before the run reads what setup made.
	for _, c := range e.clients {
		if err := c.call(jute.OpSync, &jute.SyncRequest{Path: e.base}).result(); err != nil {
			return result{}, fmt.Errorf("zkbench: sync after setup: %w", err)
		}
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if cfg.Duration > 0 {
		runCtx, cancel = context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
	}
	stopProgress := startProgress(runCtx, e.rec, cfg.Progress, progress)
	stopWatchdog := startWatchdog(runCtx, e.clients)
	start := time.Now()
	mode := "closed"
	var runErr error
	switch {
	case w.drive != nil:
		runErr = w.drive(runCtx, e)
	case cfg.Rate > 0:
		mode = "open"
		runOpen(runCtx, e, w)
	default:
		runClosed(runCtx, e, w)
	}
	elapsed := time.Since(start)
	stopProgress()
	if stopWatchdog() {
		return result{}, errors.New("zkbench: server stopped answering; connections closed")
	}

	e.rec.mu.Lock()
	res := result{
		TLS:        cfg.TLSOn,
		Workload:   w.name,
		Mode:       mode,
		Unit:       w.unit,
		Addrs:      cfg.Addrs,
		Clients:    cfg.Clients,
		Conns:      nconns,
		Rate:       cfg.Rate,
		Size:       cfg.Size,
		Ops:        int64(e.rec.hist.count),
		Errors:     e.rec.errors.Load(),
		ErrorKinds: e.rec.kinds,
		Elapsed:    math.Round(elapsed.Seconds()*1000) / 1000,
		Latency:    e.rec.hist.summary(),
		Start:      start.UTC(),
	}
	e.rec.mu.Unlock()
	if len(res.ErrorKinds) == 0 {
		res.ErrorKinds = nil
	}
	switch w.name {
	case "watch": // the watchers and the writer, each on its own session
		res.Clients, res.Conns = cfg.Watchers, cfg.Watchers+nconns
	case "session": // every op opens its own connection
		res.Conns = cfg.Clients
	case "lock":
		res.Lock = &lockCounts{Waits: e.lockWaits.Load()}
		for _, c := range e.clients {
			res.Lock.Notifications += c.notifications.Load()
		}
	}
	if elapsed > 0 {
		res.Throughput = math.Round(float64(res.Ops)/elapsed.Seconds()*10) / 10
	}
	if !cfg.Keep {
		if err := removeTree(e.clients[0], e.base); err != nil && runErr == nil {
			runErr = fmt.Errorf("zkbench: cleanup: %w", err)
		}
	}
	return res, runErr
}

// runClosed runs cfg.Clients goroutines, each issuing its next op as soon as the last completes,
// until the context ends or cfg.Ops ops have been issued.
func runClosed(ctx context.Context, e *env, w workload) {
	var issued atomic.Int64
	var wg sync.WaitGroup
	for i := range e.cfg.Clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				seq := issued.Add(1)
				if e.cfg.Ops > 0 && seq > e.cfg.Ops {
					return
				}
				start := time.Now()
				err := w.op(e, i, seq)
				if ctx.Err() != nil && err != nil {
					return // an op cut short by the end of the run is not an error
				}
				e.rec.done(start, err)
				if errors.Is(err, errConnLost) {
					// The connection is gone and every further op on it would fail at once:
					// this client stops rather than flood the error count.
					return
				}
			}
		})
	}
	wg.Wait()
}

// runOpen issues ops at cfg.Rate per second on a fixed schedule, each on its own goroutine,
// spreading them over the clients in turn; latency counts from each op's intended send time.
func runOpen(ctx context.Context, e *env, w workload) {
	s := schedule{start: time.Now(), rate: e.cfg.Rate}
	var wg sync.WaitGroup
	openLoop(ctx, s, e.cfg.Ops, e.cfg.MaxInFlight, func(i int64, intended time.Time, finish func()) {
		wg.Go(func() {
			defer finish()
			err := w.op(e, int(i%int64(e.cfg.Clients)), i+1)
			e.rec.done(intended, err)
		})
	})
	wg.Wait()
}

// startProgress prints a line every interval until stopped; the returned function stops it and
// waits for it.
func startProgress(ctx context.Context, r *recorder, interval time.Duration, out io.Writer) func() {
	if interval <= 0 || out == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		start := time.Now()
		var last int64
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				ops := r.ops.Load()
				r.mu.Lock()
				p99 := float64(r.hist.quantile(0.99)) / 1e3
				r.mu.Unlock()
				_, _ = fmt.Fprintf(out, "zkbench: %5.0fs  ops %d  rate %.0f/s  errors %d  p99(all) %.0fus\n",
					now.Sub(start).Seconds(), ops, float64(ops-last)/interval.Seconds(), r.errors.Load(), p99)
				last = ops
			}
		}
	}()
	return func() { cancel(); <-done }
}

// hangGrace is how long requests may stay unanswered after the end of a run before the watchdog
// closes the connections, failing them.
const hangGrace = 15 * time.Second

// startWatchdog closes clients if requests are still outstanding hangGrace after ctx ends, so a
// stalled server cannot keep a run from ending. The returned function stops it and reports
// whether it fired.
func startWatchdog(ctx context.Context, clients []*client) func() bool {
	stop := make(chan struct{})
	fired := make(chan bool, 1)
	go func() {
		select {
		case <-stop:
			fired <- false
			return
		case <-ctx.Done():
		}
		t := time.NewTimer(hangGrace)
		defer t.Stop()
		select {
		case <-stop:
			fired <- false
		case <-t.C:
			for _, c := range clients {
				c.fail(errClosed)
			}
			fired <- true
		}
	}()
	return func() bool { close(stop); return <-fired }
}
