package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/zkd-io/zkd/znode"
)

// ErrServerClosed is returned by operations on a server that was shut down.
var ErrServerClosed = errors.New("server: closed")

// Server is a ZooKeeper-compatible server: a client listener in front of a consensus node. It is
// created running by Start and stopped by Shutdown or Close. All its state is per instance, so
// any number of servers can run in one process.
type Server struct {
	cfg Config
	log *slog.Logger
	// cons is the replicated state: a consensus.Node, or its in-memory twin in tests.
	cons backend

	ln       net.Listener // the plain client listener; nil with NoPlainListener
	secureLn net.Listener // the TLS-only client listener; nil without one
	tlsLog   onceLog      // logs the first refused TLS handshake at INFO (tls.go)
	watches  *watchManager
	// published is the newest view whose watch events have all been queued; reads use it.
	published atomic.Pointer[znode.View]
	// viewWait wakes the reads waiting for a view to be published (awaitView).
	viewWait struct {
		waiting atomic.Bool // someone holds ch
		mu      sync.Mutex
		ch      chan struct{} // closed by the next publish; nil while no one waits
	}
	// afterFire, if set (tests only), runs in the apply hook between queueing a transaction's
	// watch events and publishing its view.
	afterFire atomic.Pointer[func(zxid int64)]
	// notServingSince is when the server stopped serving (unix ns), 0 while it serves.
	notServingSince atomic.Int64
	// maxConns is the most client connections held at once (connLimit; 0: no limit), set by
	// the file descriptor limit rather than MaxConns when maxConnsByFDs; limitWarned is when a
	// refusal at it was last logged (unix ns).
	maxConns      int
	maxConnsByFDs bool
	limitWarned   atomic.Int64
	started       time.Time

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// workers run the connections' goroutines (workers.go).
	workers *workers
	// readBufs holds the read buffers connections borrow while their stream fills one
	// (connreader.go) and give back once drained: an idle connection holds none.
	readBufs sync.Pool
	// outBudget bounds the bytes queued for all clients (Config.MaxTotalOutboundBytes; out.go).
	outBudget *outBudget

	mu struct {
		sync.Mutex
		conns    map[*conn]struct{}
		perIP    map[string]int
		sessions map[int64]*conn
		closing  bool
	}
	// clientAddrs are the members' client addresses and election ports by id, for
	// /zookeeper/config.
	clientAddrs struct {
		sync.Mutex
		m        map[int64]string
		election map[int64]int
	}
	// configSeen is the membership version whose change was last announced.
	configSeen struct {
		sync.Mutex
		version int64
	}
	m *serverMetrics
	// gate is the request throttler and the global outstanding limit; connThr throttles new
	// sessions (throttle.go).
	gate     *requestGate
	connThr  *connThrottle
	registry *prometheus.Registry
	slow     *slowLog
	intro    introspection // admin_commands.go
	// lastSnapshot is when the snapshot admin command last ran (backup.go).
	lastSnapshot struct {
		sync.Mutex
		at time.Time
	}
	admin   *http.Server
	adminLn net.Listener
	// shutOnce starts shutdown, which closes shutDone once the server stopped, with shutErr.
	shutOnce sync.Once
	shutDone chan struct{}
	shutErr  error
}

// Start starts a server as cfg describes: it opens the consensus node (a one-voter cluster when
// cfg.Peers is empty), binds the client listener and, if configured, the admin server, and serves
// until Shutdown or Close.
func Start(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return start(cfg.withDefaults(), openConsensus)
}

// start runs a server on the consensus that open returns for it (tests open a consensus.Memory).
func start(cfg Config, open func(*Server) (backend, error)) (*Server, error) {
	s := newServer(cfg)
	c, err := open(s)
	if err != nil {
		return nil, err
	}
	if err := s.run(c); err != nil {
		return nil, err
	}
	return s, nil
}

func newServer(cfg Config) *Server {
	s := &Server{cfg: cfg, log: cfg.Logger, started: time.Now()}
	s.maxConns, s.maxConnsByFDs = connLimit(cfg.MaxConns, maxFDs())
	s.slow = newSlowLog(cfg.SlowRequestThreshold, cfg.Logger)
	s.intro.traceMask.Store(defaultTraceMask)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.workers = newWorkers(s.ctx, &s.wg)
	s.outBudget = newOutBudget(cfg.MaxTotalOutboundBytes)
	s.m = newServerMetrics()
	s.gate = newRequestGate(&s.cfg, s.m.throttleWaits.Inc, s.m.staleDropped.Inc)
	s.connThr = newConnThrottle(&s.cfg, nil, nil)
	s.registry = newRegistry(s)
	s.watches = newWatchManager(0)
	s.watches.fired = s.m.watchFired
	s.mu.conns = make(map[*conn]struct{})
	s.mu.perIP = make(map[string]int)
	s.mu.sessions = make(map[int64]*conn)
	s.clientAddrs.m = make(map[int64]string)
	s.clientAddrs.election = make(map[int64]int)
	for _, p := range cfg.Peers {
		s.clientAddrs.m[p.ID] = p.ClientAddr
		s.clientAddrs.election[p.ID] = p.ElectionPort
	}
	return s
}

// run binds the listeners and starts the server's goroutines on top of c.
func (s *Server) run(c backend) error {
	s.cons = c
	stop := c.Shutdown
	v := c.View()
	s.publish(v)
	s.watches.advance(v.Zxid())
	if err := s.listen(); err != nil {
		_ = stop()
		return err
	}
	if err := s.startAdmin(); err != nil {
		s.closeListeners()
		_ = stop()
		return err
	}
	s.checkConfigChange() // records the starting membership
	if s.ln != nil {
		mode := modePlain
		if s.cfg.PortUnification {
			mode = modeUnified
		}
		s.wg.Go(func() { s.acceptLoop(s.ln, mode) })
	}
	if s.secureLn != nil {
		s.wg.Go(func() { s.acceptLoop(s.secureLn, modeTLS) })
	}
	s.wg.Go(s.housekeeping)
	if s.ln != nil {
		s.log.Info("serving clients", "addr", s.ln.Addr().String(), "portUnification", s.cfg.PortUnification, "serverID", s.cfg.ServerID)
	}
	if s.maxConnsByFDs {
		s.log.Info("client connections limited by the file descriptor limit, leaving the rest for storage and peers",
			"maxConns", s.maxConns, "fds", maxFDs(), "maxCnxns", s.cfg.MaxConns)
	}
	if s.secureLn != nil {
		s.log.Info("serving clients over TLS", "addr", s.secureLn.Addr().String(), "serverID", s.cfg.ServerID)
	}
	return nil
}

// listen binds the client listeners the config asks for.
func (s *Server) listen() error {
	// Go turns keep-alive on for accepted TCP connections unless told otherwise, at four
	// setsockopt calls a connection.
	lc := net.ListenConfig{KeepAlive: -1}
	if s.cfg.ClientTCPKeepAlive {
		lc.KeepAlive = 0
	}
	s.ln = s.cfg.Listener
	if s.ln == nil && !s.cfg.NoPlainListener {
		ln, err := lc.Listen(context.Background(), "tcp", s.cfg.Addr)
		if err != nil {
			return fmt.Errorf("server: listen %s: %w", s.cfg.Addr, err)
		}
		s.ln = ln
	}
	s.secureLn = s.cfg.SecureListener
	if s.secureLn == nil && s.cfg.SecureAddr != "" {
		ln, err := lc.Listen(context.Background(), "tcp", s.cfg.SecureAddr)
		if err != nil {
			s.closeListeners()
			return fmt.Errorf("server: listen %s (secure): %w", s.cfg.SecureAddr, err)
		}
		s.secureLn = ln
	}
	return nil
}

// closeListeners closes the client listeners.
func (s *Server) closeListeners() {
	if s.ln != nil {
		_ = s.ln.Close()
	}
	if s.secureLn != nil {
		_ = s.secureLn.Close()
	}
}

// Addr returns the plain client address the server listens on, or "" with NoPlainListener.
func (s *Server) Addr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// SecureAddr returns the TLS-only client address the server listens on, or "" without one.
func (s *Server) SecureAddr() string {
	if s.secureLn == nil {
		return ""
	}
	return s.secureLn.Addr().String()
}

// AdminAddr returns the admin HTTP address, or "" when the admin server is off.
func (s *Server) AdminAddr() string {
	if s.adminLn == nil {
		return ""
	}
	return s.adminLn.Addr().String()
}

// view returns the view reads are served from.
func (s *Server) view() *znode.View { return s.published.Load() }

// publish makes v the read view unless a newer one is already published.
func (s *Server) publish(v *znode.View) {
	for {
		cur := s.published.Load()
		if cur != nil && cur.Zxid() > v.Zxid() {
			return
		}
		if s.published.CompareAndSwap(cur, v) {
			s.wakeViewWaiters()
			return
		}
	}
}

// wakeViewWaiters wakes the reads waiting in awaitView, if any, to look at the view again.
func (s *Server) wakeViewWaiters() {
	if !s.viewWait.waiting.Load() {
		return
	}
	s.viewWait.mu.Lock()
	if s.viewWait.ch != nil {
		close(s.viewWait.ch)
		s.viewWait.ch = nil
	}
	s.viewWait.waiting.Store(false)
	s.viewWait.mu.Unlock()
}

// awaitView waits until the published view is at zxid or later, and returns it; it returns nil if
// stop is closed first. The apply hook queues a transaction's watch events before it publishes the
// view that holds it, so a connection's writer may send an event before that view is out: a read
// the client sends after the event waits here for it, as ZooKeeper's reads see the change of any
// event sent before them.
func (s *Server) awaitView(zxid int64, stop <-chan struct{}) *znode.View {
	for {
		if v := s.view(); v.Zxid() >= zxid {
			return v
		}
		s.viewWait.mu.Lock()
		if s.viewWait.ch == nil {
			s.viewWait.ch = make(chan struct{})
		}
		ch := s.viewWait.ch
		s.viewWait.waiting.Store(true)
		s.viewWait.mu.Unlock()
		// A publish between the look above and the flag being set has not seen the flag: look
		// again before waiting.
		if v := s.view(); v.Zxid() >= zxid {
			return v
		}
		select {
		case <-ch:
		case <-stop:
			return nil
		}
	}
}

// onApply is the consensus apply hook: it queues the transaction's watch events on the watching
// connections, then publishes the view v that contains it, and closes the connections of the
// sessions it closed. v is nil when more transactions of the same applied batch follow: the
// batch's last call publishes the view of them all, after all their events were queued. It runs
// on the FSM goroutine and never blocks on a client.
func (s *Server) onApply(zxid int64, r *znode.Result, v *znode.View) {
	if len(r.Events) > 0 {
		s.watches.fire(zxid, r.Events)
		if f := s.afterFire.Load(); f != nil {
			(*f)(zxid)
		}
	} else {
		s.watches.advance(zxid)
	}
	if v != nil {
		s.publish(v)
	}
	if len(r.Closed) > 0 {
		s.sessionsClosed(r.Closed)
	}
}

// sessionsClosed closes this server's connections of sessions that ended (expired, or closed
// through another connection). A connection that sent closeSession itself is left to its
// executor, which answers it and then closes.
func (s *Server) sessionsClosed(ids []int64) {
	var gone []*conn
	s.mu.Lock()
	for _, id := range ids {
		if c := s.mu.sessions[id]; c != nil && !c.closingSession.Load() {
			gone = append(gone, c)
		}
	}
	s.mu.Unlock()
	for _, c := range gone {
		c.abort(closeSessionExpired, nil)
	}
}

// onRestore handles the tree being replaced by a snapshot: watches may have missed events, so
// every client is disconnected and reconnects (re-registering its watches with setWatches).
func (s *Server) onRestore(v *znode.View) {
	s.watches.advance(v.Zxid())
	s.published.Store(v)
	s.wakeViewWaiters()
	s.dropClients(closeStateRestored, "state restored from a snapshot")
}

// servingChanged records when the server stopped serving. Clients are dropped only once it has
// not served for a whole tick (housekeeping), so a heartbeat that arrives late on a busy machine
// does not disconnect everyone; new clients are refused at once.
func (s *Server) servingChanged(serving bool) {
	if serving {
		s.notServingSince.Store(0)
		return
	}
	s.notServingSince.CompareAndSwap(0, time.Now().UnixNano())
}

// dropClients closes every client connection, for reason r, and logs why once.
func (s *Server) dropClients(r closeReason, why string) {
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.mu.conns))
	for c := range s.mu.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	if len(conns) > 0 {
		s.log.Info("closing client connections", "reason", why, "count", len(conns))
	}
	for _, c := range conns {
		c.abort(r, nil)
	}
}

// dropStranded closes the connections that have stayed on this server, which has not served for
// d, as long as their sessions allow (strandGrace), and logs how many once per sweep.
func (s *Server) dropStranded(d time.Duration) {
	var drop []*conn
	silence := s.leaderSilence()
	s.mu.Lock()
	for c := range s.mu.conns {
		if d >= strandGrace(s.cfg.TickTime, silence, c.timeout.Load()) {
			drop = append(drop, c)
		}
	}
	s.mu.Unlock()
	if len(drop) == 0 {
		return
	}
	s.log.Info("closing client connections", "reason", "lost contact with the leader", "count", len(drop), "notServingFor", d.Round(time.Millisecond))
	for _, c := range drop {
		c.abort(closeNotServing, nil)
	}
}

// strandGrace is how long a connection whose session timeout is timeoutMs (0 before its
// handshake) stays on a server that stopped serving before the server closes it; silence is how
// long before it stopped serving the server may have last heard from its leader.
//
// A server stops serving when it loses its leader: the leader died and an election is on, or
// this server is cut off from a leader that lives on. Only in the second case can sessions
// expire meanwhile (a new leader gives every session a full timeout), and there a client must
// move before its session times out: the leader last heard of it about when this server last
// heard from the leader. So a connection stays half its session timeout less that silence, and
// at least a tick: a client with a minimal session (two ticks) is closed after a tick, as before,
// while one with 30 s is kept through an election of up to 13 s instead of being sent, with every
// other client of the server, to reconnect at once.
func strandGrace(tick, silence time.Duration, timeoutMs int32) time.Duration {
	return max(tick, time.Duration(timeoutMs)*time.Millisecond/2-silence)
}

// leaderSilence bounds how long before it stops serving a follower may have last heard from its
// leader: two heartbeat timeouts (consensus' default heartbeat timeout is half a tick, at least
// 300 ms).
func (s *Server) leaderSilence() time.Duration {
	return max(s.cfg.TickTime, 2*s.cfg.Consensus.HeartbeatTimeout, 600*time.Millisecond)
}

// acceptRetryable reports whether an accept error passes: the process or the system is out of
// file descriptors or buffers for the moment, or the connection was gone before it was accepted.
// The listener keeps serving after them, as ZooKeeper's does: a reconnect storm after a leader
// change briefly took a member past its file limit, and its listener stopped for good.
func acceptRetryable(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.ECONNRESET} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func (s *Server) acceptLoop(ln net.Listener, mode listenMode) {
	var backoff time.Duration
	var warned time.Time
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.isClosing() {
				return
			}
			if acceptRetryable(err) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				if time.Since(warned) >= 10*time.Second {
					warned = time.Now()
					s.log.Warn("accept failed; retrying", "err", err, "backoff", backoff)
				}
				s.m.acceptRetries.Inc()
				select {
				case <-time.After(backoff):
				case <-s.ctx.Done():
					return
				}
				continue
			}
			s.log.Error("accept failed; client listener stopped", "err", err)
			return
		}
		backoff = 0 // (Go's TCP connections start with TCP_NODELAY on, as ZooKeeper sets it)
		s.m.connRequests.Inc()
		c := newConn(s, nc)
		c.mode = mode
		if reason := s.admit(c); reason != "" {
			s.m.connRejected.Inc()
			s.logRefused(c, reason)
			_ = nc.Close()
			continue
		}
		s.workers.Go(func() { c.serve(s.ctx) })
	}
}

// admit registers a new connection, or returns why it is refused.
func (s *Server) admit(c *conn) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.mu.closing:
		return "shutting down"
	case s.cfg.MaxClientConns > 0 && s.mu.perIP[c.ip] >= s.cfg.MaxClientConns:
		return "too many connections from this address (maxClientCnxns)"
	case s.maxConns > 0 && len(s.mu.conns) >= s.maxConns && s.maxConnsByFDs:
		return reasonTooManyForFDs
	case s.maxConns > 0 && len(s.mu.conns) >= s.maxConns:
		return "too many connections (maxCnxns)"
	}
	s.mu.conns[c] = struct{}{}
	s.mu.perIP[c.ip]++
	return ""
}

// reasonTooManyForFDs is admit's reason when the file descriptor limit bounds the connections.
const reasonTooManyForFDs = "too many connections for the file descriptor limit (ulimit -n)"

// logRefused logs a connection refused at accept. A refusal at the bound the file descriptor
// limit sets is something an operator must hear of (raise ulimit -n, or spread the clients), so
// it is logged as a warning, at most every ten seconds; the others at debug level, as before.
func (s *Server) logRefused(c *conn, reason string) {
	if reason != reasonTooManyForFDs {
		s.log.Debug("connection refused", "remote", c.remote, "reason", reason)
		return
	}
	now := time.Now().UnixNano()
	last := s.limitWarned.Load()
	if now-last < int64(10*time.Second) || !s.limitWarned.CompareAndSwap(last, now) {
		s.log.Debug("connection refused", "remote", c.remote, "reason", reason)
		return
	}
	s.log.Warn("connection refused: at the client connection limit the file descriptor limit allows; "+
		"raise ulimit -n to hold more", "remote", c.remote, "limit", s.maxConns, "fds", maxFDs())
}

// attach makes c the connection of its session, closing the session's previous connection on
// this server. It reports false when the server is shutting down.
func (s *Server) attach(c *conn) bool {
	s.mu.Lock()
	if s.mu.closing {
		s.mu.Unlock()
		return false
	}
	old := s.mu.sessions[c.session()]
	s.mu.sessions[c.session()] = c
	s.mu.Unlock()
	if old != nil && old != c {
		old.abort(closeSessionReconnected, nil)
	}
	// The apply hook publishes a view before it closes the connections of the sessions the view
	// no longer has; c is registered now, so either that hook finds it or this check does.
	if _, ok := s.view().Session(c.session()); !ok {
		c.abort(closeSessionExpired, nil)
	}
	return true
}

// detach forgets c as its session's connection.
func (s *Server) detach(c *conn) {
	s.mu.Lock()
	if sid := c.session(); sid != 0 && s.mu.sessions[sid] == c {
		delete(s.mu.sessions, sid)
	}
	s.mu.Unlock()
}

// connClosed is called once by a connection's serve when it ends.
func (s *Server) connClosed(c *conn) {
	c.logClosed()
	s.watches.removeConn(c)
	s.detach(c)
	s.mu.Lock()
	delete(s.mu.conns, c)
	if s.mu.perIP[c.ip]--; s.mu.perIP[c.ip] <= 0 {
		delete(s.mu.perIP, c.ip)
	}
	s.mu.Unlock()
	// A watch registered while the connection was closing would outlive it; drop again.
	s.watches.removeConn(c)
}

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.closing
}

// connections returns a snapshot of the open connections.
func (s *Server) connections() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*conn, 0, len(s.mu.conns))
	for c := range s.mu.conns {
		out = append(out, c)
	}
	return out
}

// housekeeping closes the client connections of a server that has stopped serving (no leader)
// once staying could cost their sessions (dropStranded), so that clients move to a healthy
// server, as a ZooKeeper follower that lost its leader does, and announces membership changes.
// (Connections of sessions that end are closed by the apply hook: sessionsClosed.)
func (s *Server) housekeeping() {
	interval := max(s.cfg.TickTime/2, 10*time.Millisecond)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		s.slow.flush(time.Now())
		if !s.cons.Serving() {
			s.servingChanged(false)
			if since := s.notServingSince.Load(); since != 0 {
				s.dropStranded(time.Since(time.Unix(0, since)))
			}
			continue
		}
		s.servingChanged(true)
		s.checkConfigChange()
	}
}

// Shutdown stops the server: it stops accepting connections, closes the client connections
// (their sessions live on and may reconnect elsewhere), waits for the connection goroutines and
// stops the consensus node. It returns once the server has stopped, or with ctx's error as soon
// as ctx ends, as http.Server.Shutdown does: the stop then goes on, and a later Shutdown or Close
// waits for it again. It is safe to call more than once, from any goroutine.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutOnce.Do(func() {
		s.shutDone = make(chan struct{})
		go s.shutdown()
	})
	select {
	case <-s.shutDone:
		return s.shutErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// shutdown is the one stop of the server Shutdown starts; it closes shutDone when it is done.
func (s *Server) shutdown() {
	defer close(s.shutDone)
	s.mu.Lock()
	s.mu.closing = true
	s.mu.Unlock()
	s.closeListeners()
	if s.admin != nil {
		// Admin requests are short; one still running after a few seconds is cut off.
		actx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := s.admin.Shutdown(actx); err != nil {
			_ = s.admin.Close()
		}
		cancel()
	}
	s.cancel()
	s.dropClients(closeShutdown, "shutting down")
	// Connection goroutines end once their contexts are cancelled; one that still waits on
	// consensus after the grace period is released by consensus stopping under it.
	waited := make(chan struct{})
	go func() { s.wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(shutdownGrace):
		s.log.Warn("connections still running at shutdown; stopping consensus under them", "after", shutdownGrace)
	}
	s.shutErr = s.cons.Shutdown()
	<-waited
	s.log.Info("server stopped")
}

// shutdownGrace is how long shutdown waits for the connection goroutines before it stops
// consensus anyway.
const shutdownGrace = 10 * time.Second

// Close stops the server at once. Client connections are always closed without waiting for
// clients, so Close is Shutdown without a deadline.
func (s *Server) Close() error {
	return s.Shutdown(context.Background())
}

// Serving reports whether the server currently accepts clients: it is (or hears from) an
// established leader and has caught up.
func (s *Server) Serving() bool { return s.cons.Serving() }

// WaitServing blocks until the server serves clients or ctx ends.
func (s *Server) WaitServing(ctx context.Context) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for !s.cons.Serving() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("server: not serving: %w", ctx.Err())
		case <-t.C:
		}
	}
	return nil
}
