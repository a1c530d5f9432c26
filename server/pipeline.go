package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/zkd-io/zkd/consensus"
	"github.com/zkd-io/zkd/jute"
)

// request is one client request on its way through a connection's pipeline. The reader admits
// requests in arrival order (starting writes at once, so a connection can have many writes in
// flight) and the executor completes them in the same order: it waits for each write's result,
// executes reads only after every earlier write of the connection was applied here, and queues
// the replies. So replies leave in request order and a session always reads its own writes.
type request struct {
	hdr     jute.RequestHeader
	body    jute.Record
	arrived time.Time
	// auth is the connection's identities when the request arrived: a later auth packet does
	// not change what an earlier request may do.
	auth []jute.Id
	// pending is a started write (or closeSession) whose result the executor waits for.
	pending *consensus.Pending
	// fixed, when set, is the complete answer decided on arrival: code and, rarely, a body.
	fixed bool
	code  jute.Code
	// large is what the request counts against the large-request limit while in process.
	large     int32
	fixedBody jute.Record
	zeroZxid  bool // the reply carries zxid 0 (auth)
	errBody   bool // an error reply keeps fixedBody (a failed sasl step)
	// closeAfter ends the connection once this request's reply is queued.
	closeAfter bool
	// closeSession marks the closeSession write: its reply is followed by the socket's close.
	closeSession bool
	// gated is set while the request counts as in process (Server.gate): from its admission
	// until it is answered, or dropped unanswered. (Beside the other flags: the struct's size
	// is allocated per request.)
	gated bool

	// Stage times for the slow-request log (slowlog.go), since arrived, taken only while it is
	// on: the write handed to consensus, the executor taking the request up, its reply queued.
	proposed, started, answered time.Duration
	// writePath is a write's path, copied from its undecoded body while the log is on.
	writePath string
}

// admit decodes one frame and either handles it on arrival (auth, writes are started, bad
// frames) or passes it to the executor. It reports false when the reader must stop: the
// connection is ending, or nothing after this request may be answered (closeSession).
func (c *conn) admit(ctx context.Context, frame []byte) bool {
	s := c.s
	r := &request{arrived: time.Now()}
	hdr, raw, err := jute.PeekRequestHeader(frame)
	if err != nil {
		c.abort(closeProtocolError, fmt.Errorf("server: request header: %w", err))
		return false // not even a header
	}
	if !c.authEnforced(hdr.Type) {
		// As in ZooKeeper: answered, then the connection closes (the session lives on until it
		// expires).
		c.log.Info("request refused: the connection is not authenticated with an enforced scheme", "op", hdr.Type)
		r.hdr = hdr
		r.fixed, r.zeroZxid, r.code, r.closeAfter = true, true, jute.CodeSessionClosedRequireSASLAuth, true
		c.enqueue(r)
		return false
	}
	if hdr.Type != jute.OpAuth && hdr.Type != jute.OpSASL && !c.enterProcess(r, len(frame)) {
		// Dropped by the request throttler (the connection has gone) or refused as a large
		// request over the limit.
		return false
	}
	if hdr.Type.IsClientWrite() {
		// A write's body goes to consensus as it arrived and is decoded once, when applied.
		r.hdr = hdr
		return c.admitWrite(ctx, r, raw)
	}
	hdr, body, err := jute.DecodeRequest(frame, s.cfg.MaxFrameSize)
	r.hdr, r.body = hdr, body
	if err != nil && !errors.Is(err, jute.ErrTrailingData) {
		switch {
		case errors.Is(err, jute.ErrUnknownOp) && hdr.Type != jute.OpMulti && hdr.Type != jute.OpMultiRead:
			r.fixed, r.code, r.closeAfter = true, jute.CodeUnimplemented, true
		default:
			r.fixed, r.code = true, jute.CodeMarshallingError
		}
		return c.enqueue(r)
	}
	if nullPathRead(hdr.Type, frame) {
		// ZooKeeper refuses a read whose path is null; jute decodes null strings as "".
		r.fixed, r.code = true, jute.CodeMarshallingError
		return c.enqueue(r)
	}
	if !c.accept(r) {
		c.leaveProcess(r)
		return false
	}
	switch hdr.Type {
	case jute.OpAuth:
		// Handled on arrival, as in ZooKeeper, so writes admitted after it carry the new identity.
		ok := c.authenticate(body.(*jute.AuthPacket))
		r.fixed, r.zeroZxid = true, true
		if !ok {
			r.code, r.closeAfter = jute.CodeAuthFailed, true
		}
	case jute.OpSASL:
		// Handled on arrival, as auth is.
		code, token := c.saslStep(body.(*jute.GetSASLRequest).Token)
		r.fixed, r.zeroZxid, r.code = true, true, code
		// A failure carries a null token too, as in ZooKeeper: the Java client reads it.
		r.fixedBody, r.errBody = &jute.SetSASLResponse{Token: token}, true
		r.closeAfter = code != jute.CodeOK
	case jute.OpCheck, jute.OpDeleteContainer:
		// check is valid only inside a multi (3.9 answers Unimplemented and closes);
		// deleteContainer is the server's own housekeeping op and is refused to clients.
		r.fixed, r.code, r.closeAfter = true, jute.CodeUnimplemented, true
	}
	if !r.fixed && inlineRead(hdr.Type) && c.queued.Load() == 0 {
		// Nothing admitted is still to be answered, so answering this read here keeps the
		// order, and saves waking the executor for it (and, with its reply written inline,
		// the writer): a read on an unhurried connection costs no goroutine switch.
		c.readsQueued.Add(1) // as enqueue would; complete counts it done
		ok := c.complete(ctx, r)
		if ok && c.fr.Buffered() {
			// The client pipelined more requests, already here: answer them first and write
			// the replies together, as the writer would have (one write per reply cost a
			// pipelining client a seventh more CPU per read).
			c.held = true
			return true
		}
		c.held = false
		if ok {
			c.out.writeInline()
		} else {
			c.out.flush()
		}
		return ok
	}
	if !c.enqueue(r) {
		return false
	}
	return !r.closeSession && !r.closeAfter
}

// inlineRead reports whether the reader may answer a request of type op itself when nothing is
// queued before it: reads that never wait (sync waits for the leader, and stays with the
// executor so the reader goes on admitting).
func inlineRead(op jute.Op) bool {
	switch op {
	case jute.OpGetData, jute.OpExists, jute.OpGetChildren, jute.OpGetChildren2, jute.OpPing,
		jute.OpGetACL, jute.OpGetAllChildrenNumber, jute.OpGetEphemerals:
		return true
	}
	return false
}

// touchEvery is how long after touching its session a connection's requests go on without
// touching it again. A session then expires at most this much sooner after its last request
// than it would with a touch for every request, far within the tick its expiry is checked on;
// a pipelining client no longer takes the session table's lock for every request.
const touchEvery = time.Millisecond

// accept does what every request does on arrival: it counts it, touches the session, refuses a
// request of a session that has ended (no reply: the socket closes) and records the identities it
// is made with. It reports false when the connection ends.
func (c *conn) accept(r *request) bool {
	s := c.s
	hdr := r.hdr
	c.stats.lastOp.Store(int32(hdr.Type))
	if hdr.Xid > 0 {
		c.stats.lastCxid.Store(int64(hdr.Xid))
	}
	sid := c.session()
	if r.arrived.Sub(c.touchedAt) >= touchEvery || c.touchedAt.IsZero() {
		c.touched[0], c.touchedAt = sid, r.arrived
		s.cons.Touch(c.touched[:]...) // a slice of the conn: a variadic call through the interface would allocate one per request
	}
	if hdr.Type != jute.OpPing && hdr.Type != jute.OpAuth && hdr.Type != jute.OpSetWatches && hdr.Type != jute.OpSetWatches2 {
		// A request on a session that expired or closed gets no reply: the socket closes.
		if _, ok := s.view().Session(sid); !ok {
			c.abort(closeSessionExpired, nil)
			return false
		}
	}
	r.auth = c.authIDs()
	return true
}

// admitWrite starts a write (closeSession included) on arrival, so a connection can have many in
// flight, and passes it to the executor, which answers once this server applied it.
func (c *conn) admitWrite(ctx context.Context, r *request, body []byte) bool {
	c.releaseHeld()
	if !c.accept(r) || !c.awaitReads() {
		c.leaveProcess(r)
		return false
	}
	op := r.hdr.Type
	if op == jute.OpCloseSession {
		c.closingSession.Store(true)
		body = nil // ZooKeeper ignores whatever a closeSession carries
	}
	p, err := c.startWrite(ctx, consensus.Proposal{Session: c.session(), Auth: r.auth, Op: op, Body: body, NoTTL: !c.s.cfg.ExtendedTypesEnabled, SASLACL: c.s.cfg.SASLACL})
	if c.s.slow.on() {
		r.proposed, r.writePath = time.Since(r.arrived), writePathOf(op, body)
	}
	switch {
	case err != nil && isBadRequest(err):
		r.fixed, r.code = true, jute.CodeMarshallingError
	case errors.Is(err, consensus.ErrDiskFull):
		// Nothing was proposed. ZooKeeper's ThrottledOp (-127) would say so exactly, but clients
		// older than it (kazoo before 2.9) kill their I/O thread on a code they do not know;
		// OperationTimeout is known to every client, which retries it (docs/differences.md).
		r.fixed, r.code = true, jute.CodeOperationTimeout
	case errors.Is(err, consensus.ErrSessionMoved):
		// The leader refused it: the session is attached through another server now. As in
		// ZooKeeper, the stale connection closes without a reply.
		c.abort(closeSessionMoved, fmt.Errorf("server: %v refused: %w", op, err))
		c.leaveProcess(r)
		return false
	case err != nil:
		c.abort(closeNotServing, fmt.Errorf("server: %v not proposed: %w", op, err))
		c.leaveProcess(r)
		return false
	default:
		r.pending, r.closeSession = p, op == jute.OpCloseSession
	}
	if !c.enqueue(r) {
		return false
	}
	return !r.closeSession
}

// startWrite starts a write as the connection's next one in order. A write refused as malformed
// or for a full disk was not proposed and does not take a place in the order.
func (c *conn) startWrite(ctx context.Context, w consensus.Proposal) (*consensus.Pending, error) {
	if c.attach != 0 {
		w.Attach, w.Seq = c.attach, c.writeSeq+1
	}
	p, err := c.s.cons.Start(ctx, w)
	if err == nil || !(isBadRequest(err) || errors.Is(err, consensus.ErrDiskFull)) {
		c.writeSeq = w.Seq
	}
	return p, err
}

// awaitReads waits until every read admitted so far has been executed, so that a write started
// now cannot be visible to a read the client sent before it. Bursts of writes still pipeline;
// only a write behind a read waits for that read. It reports false if the connection stops.
func (c *conn) awaitReads() bool {
	for c.readsQueued.Load() > 0 {
		select {
		case <-c.readsDone:
		case <-c.stopped:
			return false
		}
	}
	return true
}

// releaseHeld writes the replies the reader held back for a pipelined burst (admit) before the
// reader hands a request on or may wait.
func (c *conn) releaseHeld() {
	if c.held {
		c.held = false
		c.out.writeInline()
	}
}

// enqueue hands r to the executor, starting it if none runs, and first waits while the
// connection has Config.MaxInFlight requests unanswered.
func (c *conn) enqueue(r *request) bool {
	c.releaseHeld()
	if int(c.queued.Load()) >= c.s.cfg.MaxInFlight {
		// The reader stops reading until one is answered.
		c.s.m.inFlightWaits.Inc()
		if !c.awaitAnswer(func() bool { return int(c.queued.Load()) >= c.s.cfg.MaxInFlight }) {
			c.leaveProcess(r)
			return false
		}
	}
	if r.pending == nil && !r.fixed {
		c.readsQueued.Add(1)
	}
	c.queued.Add(1)
	c.exec.Lock()
	c.exec.q = append(c.exec.q, r)
	start := !c.exec.running && !c.exec.ended
	c.exec.running = c.exec.running || start
	c.exec.Unlock()
	if start {
		c.execRuns.Add(1)
		c.s.workers.Go(c.executor)
	}
	return !r.closeAfter
}

// awaitAnswer waits while busy reports true, checking again after each answer of the executor.
// It reports false when the connection stops meanwhile.
func (c *conn) awaitAnswer(busy func() bool) bool {
	c.pausing.Store(true)
	defer c.pausing.Store(false)
	for busy() {
		select {
		case <-c.answered:
		case <-c.stopped:
			return false
		}
	}
	return true
}

// enterProcess counts r as in process, first waiting for the request throttler when it is full
// (Config.RequestThrottleMaxRequests). It reports false when r must be dropped unanswered: its
// connection has gone (request_throttle_drop_stale) or is stopping.
func (c *conn) enterProcess(r *request, frameLen int) bool {
	large, ok := c.s.gate.takeLarge(frameLen)
	if !ok {
		// As in ZooKeeper: counted, and the connection closes unanswered.
		c.s.m.largeRejected.Inc()
		c.abort(closeLargeRequest, fmt.Errorf("server: a %d-byte request would take the large requests in process over %d bytes", frameLen, c.s.cfg.LargeRequestMaxBytes))
		return false
	}
	r.large = int32(large)
	if !c.s.gate.acquire(c.gone, c.releaseHeld, c.stopped) {
		c.leaveProcess(r)
		return false
	}
	r.gated = true
	return true
}

// leaveProcess ends r's time in process, once it is answered or will never be.
func (c *conn) leaveProcess(r *request) {
	if r.large != 0 {
		c.s.gate.largeBytes.Add(-int64(r.large))
		r.large = 0
	}
	if r.gated {
		r.gated = false
		c.s.gate.release()
	}
}

// gone reports whether the connection has closed; with probe, whether the client has closed its
// end, which the reader would otherwise learn only at its next read: it looks a moment for more
// of the stream, keeping whatever arrives for later. Only the reader calls it.
func (c *conn) gone(probe bool) bool {
	if c.isClosed() {
		return true
	}
	if !probe || c.br.Buffered() >= c.br.Size() {
		return false
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(time.Millisecond))
	_, err := c.br.Peek(c.br.Buffered() + 1)
	// The reader renews the deadline only when it must wait for the socket: put it back.
	_ = c.nc.SetReadDeadline(time.Now().Add(time.Duration(c.timeout.Load()) * time.Millisecond))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// pauseForLimit holds the reader while the server is over its global outstanding limit and this
// connection has a request unanswered (ZooKeeper stops reading such a connection). It reports
// false when the connection stops meanwhile.
func (c *conn) pauseForLimit() bool {
	c.releaseHeld()
	c.pausing.Store(true)
	defer c.pausing.Store(false)
	return c.s.gate.pause(func() bool { return c.queued.Load() > 0 }, c.answered, c.stopped)
}

// maxKeptExecQueue is the most request slots an emptied queue keeps for the next burst.
const maxKeptExecQueue = 16

// executor completes the queued requests in order until the queue is empty or the connection
// ends. The reader starts it (enqueue); the reader waits for it (execRuns) before the
// connection's end.
func (c *conn) executor() {
	defer c.execRuns.Done()
	// Unless it finds the queue empty, the executor stops for good: the connection is ending
	// (or a panic closed it), and nothing more is answered on it.
	idle := false
	defer func() {
		if !idle {
			c.exec.Lock()
			c.exec.running, c.exec.ended = false, true
			c.exec.Unlock()
		}
	}()
	defer c.recoverPanic()
	for {
		select {
		case <-c.stopped:
			return
		default:
		}
		c.exec.Lock()
		if c.exec.head == len(c.exec.q) {
			c.exec.running, idle = false, true
			c.exec.Unlock()
			return
		}
		r := c.exec.q[c.exec.head]
		c.exec.q[c.exec.head] = nil
		c.exec.head++
		if c.exec.head == len(c.exec.q) {
			c.exec.q, c.exec.head = c.exec.q[:0], 0
			if cap(c.exec.q) > maxKeptExecQueue {
				c.exec.q = nil
			}
		}
		c.exec.Unlock()
		ok := c.complete(c.execCtx, r)
		c.queued.Add(-1)
		if c.pausing.Load() {
			select {
			case c.answered <- struct{}{}:
			default:
			}
		}
		// The writer writes the executor's replies: writing them here, when nothing else was
		// queued, measured no gain (docs/performance.md).
		c.out.flush()
		if !ok {
			return
		}
	}
}

// complete answers one request; it reports false when the connection ends with it.
func (c *conn) complete(ctx context.Context, r *request) bool {
	s := c.s
	defer c.leaveProcess(r)
	c.answering = r
	defer func() {
		if c.answering == r { // ended without a reply
			c.recordLatency(r)
		}
	}()
	if s.slow.on() {
		r.started = time.Since(r.arrived)
		c.timing = r // its reply is timed (reply)
		defer func() { c.timing = nil }()
	}
	switch {
	case r.pending != nil:
		res, err := r.pending.Wait(ctx)
		if errors.Is(err, consensus.ErrSessionMoved) {
			// The leader refused the forwarded write, applying nothing: the session is attached
			// through another server now (the client went on there), so this connection is stale.
			c.abort(closeSessionMoved, fmt.Errorf("server: %v refused: %w", r.hdr.Type, err))
			return false
		}
		if err != nil {
			c.abort(closeOutcomeUnknown, fmt.Errorf("server: outcome of %v unknown: %w", r.hdr.Type, err))
			return false
		}
		if errors.Is(res.Err, jute.CodeSessionMoved) {
			// The session has moved to another connection, or an earlier write of this one never
			// took effect: nothing more may be done here. As in ZooKeeper, SessionMoved is a
			// connection-level error: the connection closes without a reply.
			c.abort(closeSessionMoved, fmt.Errorf("server: %v refused out of the session's order: %w", r.hdr.Type, errSessionMoved))
			return false
		}
		if r.closeSession {
			c.reply(r.hdr.Xid, res.Zxid, codeFor(res.Err), nil)
			s.detach(c)
			c.finish(closeSessionClosed)
			return false
		}
		c.reply(r.hdr.Xid, res.Zxid, codeFor(res.Err), res.Resp)
	case r.fixed:
		zxid := int64(0)
		if !r.zeroZxid {
			zxid = s.view().Zxid()
		}
		c.replyFrame(r.hdr.Xid, zxid, r.code, r.fixedBody, r.errBody)
		if r.closeAfter {
			c.finish(closeAfterCode(r.code))
			return false
		}
	default:
		c.execute(ctx, r.hdr, r.body, r.auth)
		c.readsQueued.Add(-1)
		select {
		case c.readsDone <- struct{}{}:
		default:
		}
	}
	return !c.isClosed()
}

// nullPathRead reports whether frame is a read whose leading path string is null (length -1).
func nullPathRead(op jute.Op, frame []byte) bool {
	switch op {
	case jute.OpExists, jute.OpGetData, jute.OpGetACL, jute.OpGetChildren, jute.OpGetChildren2,
		jute.OpGetAllChildrenNumber:
		return len(frame) >= 12 && frame[8] == 0xff && frame[9] == 0xff && frame[10] == 0xff && frame[11] == 0xff
	}
	return false
}
