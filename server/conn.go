package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/sasl"
)

// errClosedByServer is the error a connection's queue reports when the server closed it on
// purpose; the close's reason says why (closereason.go).
var errClosedByServer = errors.New("server: connection closed by server")

// conn is one client connection. Up to three goroutines own it: serve (the reader, which admits
// requests in arrival order, and answers a plain read itself when nothing is queued before it),
// the executor (executor, which completes the rest in that order, running only while it has
// requests to answer) and the writer (out.writeLoop). The one that answers a request writes its reply itself when nothing else is
// queued, and leaves it to the writer otherwise; only one goroutine writes the socket at a time
// (out.go). See pipeline.go. The apply hook and the server's housekeeping only push frames onto
// out and may close the connection.
type conn struct {
	s *Server
	// raw is the accepted socket; abort closes it. nc is what requests are read from and replies
	// written to: raw, or the TLS connection over it, chosen by serve before the reader and the
	// writer start (tls.go), and never changed after.
	raw  net.Conn
	mode listenMode
	nc   net.Conn
	// br reads nc: plain, or the decrypted stream of a TLS connection (startTLS).
	br *connReader
	// fr reads the requests' frames from br once the handshake began; only the reader uses it.
	fr     *jute.FrameReader
	out    *outQueue
	remote string
	ip     string
	log    *slog.Logger

	sid     atomic.Int64
	timeout atomic.Int32
	// attach is the token of this connection's attachment to its session (set by the handshake);
	// writeSeq counts the writes the reader started on it. Each write carries both, so every
	// replica applies the connection's writes only in order (backend.Start). Only the reader
	// touches writeSeq.
	attach   uint64
	writeSeq uint64
	touched  [1]int64 // the reader's argument to backend.Touch
	// touchedAt is when the reader last touched the session (the arrival of that request).
	touchedAt time.Time
	// eventZxid is the zxid of the newest watch event queued on the connection: its reads wait
	// for a view at least that new (Server.awaitView). Written by watchManager.fire, under its
	// lock; read without it.
	eventZxid atomic.Int64
	// fireMark is the watch manager's: the last event that made c a target (watchManager.fire,
	// under its lock).
	fireMark uint64
	// saslEx is the connection's SASL exchange once the client sent a sasl request; only the
	// reader touches it.
	saslEx sasl.Exchange
	auth   atomic.Pointer[[]jute.Id]
	closed atomic.Bool
	// closingSession is set once the client sent closeSession: the executor answers it and
	// closes the connection itself, so housekeeping must not drop it (and its reply) first.
	closingSession atomic.Bool
	// flw marks a connection that sent a four-letter word. cons and stat list it as ZooKeeper
	// does: "[0](queued=0,recved=1,sent=0)".
	flw     atomic.Bool
	stopped chan struct{} // closed by abort and finish: reader and executor stop
	// exec holds the admitted requests, reader → executor, in arrival order. The executor is a
	// goroutine only while it has requests to answer: the reader starts one when it queues a
	// request and none runs, and it ends once the queue is empty. So an idle connection holds
	// one goroutine (its reader) and no queue, and its memory follows what it has in flight.
	exec struct {
		sync.Mutex
		q       []*request
		head    int  // q[head:] are waiting
		running bool // an executor is answering the queue
		ended   bool // the executor stopped because the connection ended: none starts again
	}
	// execRuns counts the executor's runs; only the reader adds to it and waits for it.
	execRuns sync.WaitGroup
	// execCtx is the context the executor waits for writes with; serve sets it before the
	// reader admits anything.
	execCtx context.Context
	// plain reads raw; startTLS reads the handshake and the TLS records through it and puts a
	// reader of the decrypted stream in br.
	plain connReader
	// readsQueued counts admitted requests the executor has yet to execute itself (reads and
	// the like); readsDone is signalled after each. Writes wait for it to reach zero.
	readsQueued atomic.Int32
	readsDone   chan struct{}
	// pausing is set while the reader waits for an answer: for the server to get back under its
	// global outstanding limit (pauseForLimit), or for room under MaxInFlight (enqueue). The
	// executor then signals answered after each answer.
	pausing  atomic.Bool
	answered chan struct{}
	// queued counts the requests handed to the executor and not yet completed by it (at most
	// Config.MaxInFlight). When it is zero the reader answers plain reads itself (admit): only the
	// reader adds to it.
	queued atomic.Int32
	// held is set while replies to reads the reader answered itself wait in out for the rest of
	// a pipelined burst (admit); only the reader touches it.
	held bool
	// timing is the request the executor is answering while the slow-request log is on: reply
	// hands it to the writer with its reply. Only the executor touches it, or the reader while the
	// executor has nothing to do (a read it answers itself, admit).
	timing *request
	// answering is the request being answered (complete): its latency is recorded as its reply
	// is queued, before the client can see the reply, so that a client reading mntr after a reply
	// finds that request counted, as in ZooKeeper. Touched as timing is.
	answering *request

	stopOnce sync.Once
	// endReason and endErr say why the connection ended: set once, by whoever closed it first
	// (abort, finish), and read once its goroutines are done (logClosed).
	endReason closeReason
	endErr    error

	stats connStats
}

// connStats are the per-connection figures cons and the admin connections command show.
type connStats struct {
	established time.Time
	received    atomic.Int64
	sent        atomic.Int64
	lastOp      atomic.Int32
	lastCxid    atomic.Int64
	lastZxid    atomic.Int64
	lastResp    atomic.Int64 // unix ms
	lastLatency atomic.Int64 // ms
	minLatency  atomic.Int64
	maxLatency  atomic.Int64
	sumLatency  atomic.Int64
	count       atomic.Int64
}

func (st *connStats) reset() {
	st.received.Store(0)
	st.sent.Store(0)
	st.minLatency.Store(0)
	st.maxLatency.Store(0)
	st.sumLatency.Store(0)
	st.count.Store(0)
	st.lastLatency.Store(0)
}

func newConn(s *Server, nc net.Conn) *conn {
	remote := nc.RemoteAddr().String()
	ip := remote
	if h, _, err := net.SplitHostPort(remote); err == nil {
		ip = h
	}
	c := &conn{
		s:         s,
		raw:       nc,
		nc:        nc,
		out:       newOutQueue(s.cfg.MaxOutboundBytes, max(pressuredOutLimit, 2*s.cfg.MaxFrameSize), s.outBudget),
		remote:    remote,
		ip:        ip,
		log:       slog.New(&lazyAttrs{h: s.log.Handler()}).With("remote", remote),
		stopped:   make(chan struct{}),
		readsDone: make(chan struct{}, 1),
		answered:  make(chan struct{}, 1),
	}
	c.plain.reset(nc, &s.readBufs)
	c.br = &c.plain
	c.stats.established = time.Now()
	c.stats.lastOp.Store(-1)
	c.stats.lastCxid.Store(-1)
	c.stats.lastZxid.Store(-1)
	ids := []jute.Id{{Scheme: "ip", ID: ip}}
	c.auth.Store(&ids)
	return c
}

// releaseBuffers gives a read buffer the connection borrowed back for later connections, and
// drops what is left in its request queue. It is called once the reader and the executor have
// ended: nothing reads the connection any more (no frame or record refers into a read buffer:
// FrameReader copies each frame out) and nothing queues requests. What is still queued was never
// answered; it is counted as stale.
func (c *conn) releaseBuffers() {
	c.out.release()
	c.exec.Lock()
	left := c.exec.q[c.exec.head:]
	c.exec.q, c.exec.head, c.exec.ended = nil, 0, true
	c.exec.Unlock()
	for _, r := range left {
		c.s.m.stale.Add(1)
		c.leaveProcess(r)
	}
	c.br.release()
	c.plain.release()
}

func (c *conn) session() int64     { return c.sid.Load() }
func (c *conn) authIDs() []jute.Id { return *c.auth.Load() }
func (c *conn) isClosed() bool     { return c.closed.Load() }
func (c *conn) addAuth(id jute.Id) {
	old := c.authIDs()
	for _, x := range old {
		if x == id {
			return
		}
	}
	// Kept in ZooKeeper's HashSet order, so whoAmI and the auth ACL scheme list the identities
	// in the order ZooKeeper does.
	ids := javaHashSetOrder(append(append([]jute.Id(nil), old...), id))
	c.auth.Store(&ids)
}

// abort closes the connection from any goroutine, for reason r (err, if not nil, is the error
// behind it): pending output is dropped, the socket closes, and the reader stops. Only the first
// close of a connection names its reason.
func (c *conn) abort(r closeReason, err error) {
	c.stopOnce.Do(func() {
		c.endReason, c.endErr = r, err
		c.closed.Store(true)
		close(c.stopped)
		qerr := err
		if qerr == nil {
			qerr = errClosedByServer
		}
		c.out.close(qerr, false)
		_ = c.raw.Close()
	})
}

// finish closes the connection for reason r after what is already queued has been written
// (closeSession's reply, a four-letter word's output).
func (c *conn) finish(r closeReason) {
	c.stopOnce.Do(func() {
		c.endReason = r
		c.closed.Store(true)
		close(c.stopped)
		c.out.close(errClosedByServer, true)
	})
}

// serve runs the connection until it ends: it starts the writer and the executor, reads and
// admits requests, and cleans up. A panic while handling a request closes only this connection.
func (c *conn) serve(ctx context.Context) {
	if c.mode != modePlain && !c.startTLS() {
		c.s.connClosed(c)
		c.releaseBuffers()
		return
	}
	// ctx ends when the writer does, which is when the connection is closed for any reason, so
	// the executor stops waiting for writes of a connection nobody reads any more.
	ctx, cancel := context.WithCancel(ctx)
	var written func([]*request, time.Time)
	if c.s.slow.on() {
		written = c.replyWritten
	}
	c.out.setSink(c.nc, c.s.cfg.MaxSessionTimeout, func(n int) { c.s.m.bytesSent.Add(int64(n)) }, written)
	writerEnded := make(chan struct{})
	c.out.setWriter(c.s.workers.Go, func(err error) {
		// The reason goes in before the socket closes, so that a reader failing on the closed
		// socket cannot name the close.
		c.abort(writeEnded(err), err)
		_ = c.nc.Close()
		cancel()
		close(writerEnded)
	})
	c.execCtx = ctx
	var err error
	defer func() {
		// abort closes the queue, if nothing did before: the writer then ends it.
		c.abort(c.readEnded(err), err)
		c.execRuns.Wait()
		<-writerEnded
		cancel()
		c.s.connClosed(c)
		c.releaseBuffers()
	}()
	defer c.recoverPanic()
	// The connection ends with the reader's reason (the deferred abort), unless the executor
	// closes it first while it answers what was admitted.
	err = c.readLoop(ctx)
	c.releaseHeld()
	// Let the executor answer what was admitted (closeSession's reply, writes in flight).
	c.execRuns.Wait()
}

// recoverPanic turns a panic in request handling into the close of this connection only.
func (c *conn) recoverPanic() {
	if r := recover(); r != nil {
		c.log.Error("panic serving connection", "panic", r)
		c.abort(closeInternalError, fmt.Errorf("panic: %v", r))
	}
}

// readLoop handles a four-letter word or the handshake, then every request until the connection
// ends.
func (c *conn) readLoop(ctx context.Context) error {
	_ = c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.SessionlessTimeout))
	head, err := c.br.Peek(4)
	if err != nil {
		c.countSessionless(err)
		return err
	}
	if word := string(head); isFourLetterWord(word) {
		c.br.Discard(4)
		c.flw.Store(true)
		c.stats.received.Add(1) // the word, as ZooKeeper counts it
		return c.fourLetterWord(ctx, word)
	}
	c.fr = jute.NewFrameReader(c.br, c.s.cfg.MaxFrameSize)
	fr := c.fr
	frame, err := fr.Next()
	if err != nil {
		c.countSessionless(err)
		return err
	}
	var req jute.ConnectRequest
	if err := jute.Unmarshal(frame, c.s.cfg.MaxFrameSize, &req); err != nil && !errors.Is(err, jute.ErrTrailingData) {
		return closeWith(closeProtocolError, fmt.Errorf("server: connect request: %w", err))
	}
	c.stats.received.Add(1)
	c.s.m.packetsReceived.Inc()
	c.s.m.bytesReceived.Add(int64(len(frame) + 4))
	thr := c.s.connThr
	if !thr.allow(thr.weight(req.SessionID != 0)) {
		// As ZooKeeper refuses it: closed unanswered, counted as rejected.
		c.s.m.connRejected.Inc()
		return closeWith(closeThrottled, errors.New("server: session request refused by the connection throttle"))
	}
	c.s.m.tokenDeficit.Observe(uint64(thr.deficit()))
	if ok, err := c.handshake(ctx, &req); !ok {
		return err
	}
	for {
		if !c.out.roomy() {
			// The client is not reading its replies (or the server's outbound bound is
			// exceeded): read nothing more until they drain, so TCP pushes back on it.
			c.s.m.outboundWaits.Inc()
			c.releaseHeld()
			if !c.out.waitRoom(c.stopped) {
				return nil
			}
		}
		// The deadline bounds the wait for the socket, so it is renewed only when Next will read
		// from it: a frame the client pipelined is already here. (Renewing it moves a runtime
		// timer; for a pipelining client that was one in every request.)
		if !fr.Buffered() {
			timeout := time.Duration(c.timeout.Load()) * time.Millisecond
			_ = c.nc.SetReadDeadline(time.Now().Add(timeout))
		}
		frame, err := fr.Next()
		if err != nil {
			if errors.Is(err, jute.ErrTooLarge) {
				c.s.m.largeRejected.Inc()
			}
			return err
		}
		select {
		case <-c.stopped:
			return nil
		default:
		}
		c.stats.received.Add(1)
		c.s.m.packetsReceived.Inc()
		c.s.m.bytesReceived.Add(int64(len(frame) + 4))
		if !c.admit(ctx, frame) {
			return nil
		}
		if c.s.gate.over() && !c.pauseForLimit() {
			return nil
		}
	}
}

// countSessionless counts a connection that sent no ConnectRequest within the sessionless
// timeout (ZooKeeper's sessionless_connections_expired).
func (c *conn) countSessionless(err error) {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.s.m.sessionless.Inc()
	}
}

// expiredResponse is what ZooKeeper sends for an expired, unknown or wrongly authenticated
// session: zero timeout, zero id, sixteen zero bytes of password.
func expiredResponse(req *jute.ConnectRequest) *jute.ConnectResponse {
	return &jute.ConnectResponse{Passwd: make([]byte, 16), HasReadOnly: req.HasReadOnly}
}

// handshake answers the ConnectRequest. It reports false when the connection must end.
func (c *conn) handshake(ctx context.Context, req *jute.ConnectRequest) (bool, error) {
	s := c.s
	if !s.cons.Serving() {
		// A brief election (or a late heartbeat) should not turn clients away; a server that
		// stays cut off refuses them after a tick.
		wctx, cancel := context.WithTimeout(ctx, s.cfg.TickTime)
		err := s.WaitServing(wctx)
		cancel()
		if err != nil {
			return false, closeWith(closeHandshakeRefused, fmt.Errorf("server: not serving: %w", err))
		}
	}
	if req.LastZxidSeen > s.view().Zxid() {
		// The client has seen newer state than this server: let it try another one, unless a
		// sync brings this server up to date quickly.
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		_ = s.cons.Sync(sctx)
		cancel()
		if req.LastZxidSeen > s.view().Zxid() {
			return false, closeWith(closeHandshakeRefused, fmt.Errorf("server: client zxid 0x%x is ahead of ours 0x%x", req.LastZxidSeen, s.view().Zxid()))
		}
	}
	timeout := s.cfg.negotiate(req.TimeOut)
	var resp *jute.ConnectResponse
	if req.SessionID == 0 {
		pctx, cancel := context.WithTimeout(ctx, s.cfg.MaxSessionTimeout)
		sess, attach, err := s.cons.CreateSession(pctx, timeout)
		cancel()
		if err != nil {
			return false, closeWith(closeHandshakeRefused, fmt.Errorf("server: create session: %w", err))
		}
		c.attach = attach
		resp = &jute.ConnectResponse{TimeOut: sess.Timeout, SessionID: sess.ID, Passwd: sess.Passwd, HasReadOnly: req.HasReadOnly}
		timeout = sess.Timeout
	} else {
		sess, ok := s.view().Session(req.SessionID)
		if !ok {
			// This server may not have applied the session's creation yet (the client saw no
			// zxid since): catch up with the leader before calling it expired.
			sctx, cancel := context.WithTimeout(ctx, time.Second)
			_ = s.cons.Sync(sctx)
			cancel()
			sess, ok = s.view().Session(req.SessionID)
		}
		if !ok || !bytes.Equal(sess.Passwd, req.Passwd) {
			c.out.pushFrame(expiredResponse(req))
			c.finish(closeSessionExpired)
			return false, errSessionGone
		}
		pctx, cancel := context.WithTimeout(ctx, s.cfg.MaxSessionTimeout)
		live, attach, err := s.cons.ValidateSession(pctx, req.SessionID)
		cancel()
		c.attach = attach
		if err == nil && !live {
			err = errSessionGone
		}
		if errors.Is(err, errSessionGone) {
			c.out.pushFrame(expiredResponse(req))
			c.finish(closeSessionExpired)
			return false, err
		}
		if err != nil {
			return false, closeWith(closeHandshakeRefused, fmt.Errorf("server: validate session: %w", err))
		}
		s.m.revalidated.Inc()
		resp = &jute.ConnectResponse{TimeOut: timeout, SessionID: req.SessionID, Passwd: sess.Passwd, HasReadOnly: req.HasReadOnly}
	}
	c.timeout.Store(timeout)
	c.sid.Store(resp.SessionID)
	c.log = c.log.With("session", fmt.Sprintf("0x%x", resp.SessionID))
	if !s.attach(c) {
		return false, closeWith(closeShutdown, ErrServerClosed)
	}
	c.out.pushFrame(resp)
	c.stats.sent.Add(1)
	c.s.m.packetsSent.Inc()
	c.log.Debug("session established", "timeout", timeout)
	return true, nil
}
