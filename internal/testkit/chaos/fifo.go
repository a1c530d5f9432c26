package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkd-io/zkd/conformance"
	"github.com/zkd-io/zkd/jute"
)

// fifoConfig shapes a FIFO client.
type fifoConfig struct {
	window    int           // most writes outstanding on a connection
	batch     int           // writes sent per pace tick
	pace      time.Duration // between batches; zero keeps the window full
	timeoutMs int32         // requested session timeout
}

// pending is one request awaiting its reply on a connection.
type pending struct {
	xid   int32
	write int  // index in FIFOSession.Writes, or -1
	close bool // the closeSession request
}

// conn is one epoch's connection: the writer is the client goroutine, the reader its own
// goroutine. Replies must come back in request order.
type conn struct {
	raw    *conformance.Raw
	server int
	epoch  int

	mu struct {
		sync.Mutex
		queue []pending
	}
	wake chan struct{} // buffered(1): a reply arrived
	dead chan struct{} // closed when the reader stops
	err  error         // why the reader stopped; read after dead is closed
}

func (cn *conn) outstanding() int {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return len(cn.mu.queue)
}

func (cn *conn) push(p pending) {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	cn.mu.queue = append(cn.mu.queue, p)
}

// pop removes the oldest outstanding request, which must carry xid.
func (cn *conn) pop(xid int32) (pending, error) {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if len(cn.mu.queue) == 0 {
		return pending{}, fmt.Errorf("reply with xid %d while nothing was outstanding", xid)
	}
	head := cn.mu.queue[0]
	if head.xid != xid {
		return pending{}, fmt.Errorf("reply with xid %d while the oldest outstanding request has xid %d", xid, head.xid)
	}
	cn.mu.queue = cn.mu.queue[1:]
	return head, nil
}

// fifoClient is one session that pipelines sequential creates, and reattaches to the next server
// after a connection loss (a new epoch) until the session expires, its context ends, or it is
// frozen: then it stops sending anything (no writes, no pings) and leaves the session to expire.
type fifoClient struct {
	h       *History
	log     *slog.Logger
	servers []string
	cfg     fifoConfig
	rec     *FIFOSession
	sess    *SessionRecord

	freeze     chan struct{}
	freezeOnce sync.Once
	server     atomic.Int32 // the server of the current connection, -1 while none
	writes     atomic.Int64 // writes sent
	lastZxid   atomic.Int64
	frozenConn atomic.Pointer[conformance.Raw] // kept open after a freeze until the workload ends
	readers    sync.WaitGroup                  // connection readers

	// The session's credentials, used only by the goroutine running run.
	sid    int64
	passwd []byte
}

func newFIFOClient(h *History, log *slog.Logger, servers []string, cfg fifoConfig, name, kind string) *fifoClient {
	c := &fifoClient{
		h: h, log: log.With("session", name), servers: servers, cfg: cfg,
		rec:    h.fifoSession(name, "/fifo/"+name),
		sess:   h.session(name, kind),
		freeze: make(chan struct{}),
	}
	c.server.Store(-1)
	return c
}

// freezeNow makes the client go silent; the session must then expire.
func (c *fifoClient) freezeNow(kind string) {
	c.freezeOnce.Do(func() {
		c.h.update(func() { c.sess.Kind = kind })
		close(c.freeze)
	})
}

func (c *fifoClient) frozen() bool {
	select {
	case <-c.freeze:
		return true
	default:
		return false
	}
}

// readTimeout is how long a connection may stay silent before the client gives up on it: 2/3 of
// the session timeout, as the Java client does.
func (c *fifoClient) readTimeout() time.Duration {
	return time.Duration(c.cfg.timeoutMs) * time.Millisecond * 2 / 3
}

// run drives the session until it ends; start is the first server to try.
func (c *fifoClient) run(ctx context.Context, start int) {
	server := start
	c.passwd = make([]byte, 16)
	setup := false
	for epoch := 0; ; {
		if c.frozen() {
			c.h.update(func() { c.sess.End = EndAbandoned })
			return
		}
		if ctx.Err() != nil {
			c.closeDetached()
			return
		}
		raw, resp, err := attach(c.servers[server], c.readTimeout(), jute.ConnectRequest{
			LastZxidSeen: c.lastZxid.Load(), TimeOut: c.cfg.timeoutMs, SessionID: c.sid, Passwd: c.passwd})
		switch {
		case errors.Is(err, errExpired):
			c.log.Info("session expired", "server", server+1)
			c.h.update(func() { c.sess.End = EndExpired })
			return
		case err != nil:
			server = (server + 1) % len(c.servers)
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		}
		if c.sid == 0 {
			c.sid, c.passwd = resp.SessionID, resp.Passwd
			c.h.update(func() { c.sess.ID = c.sid })
			c.log.Info("session created", "id", hex(c.sid), "server", server+1)
		}
		cn := &conn{raw: raw, server: server, epoch: epoch, wake: make(chan struct{}, 1), dead: make(chan struct{})}
		c.server.Store(int32(server))
		done := c.epoch(ctx, cn, &setup)
		c.server.Store(-1)
		if done {
			return
		}
		epoch++
		server = (server + 1) % len(c.servers)
	}
}

// epoch runs one connection. It returns true when the session is finished with (closed, or
// frozen), false after a connection loss.
func (c *fifoClient) epoch(ctx context.Context, cn *conn, setup *bool) bool {
	if !*setup {
		if err := c.setup(cn.raw); err != nil {
			c.log.Info("setup interrupted", "server", cn.server+1, "err", err)
			_ = cn.raw.Close()
			return false
		}
		*setup = true
	}
	c.readers.Go(func() { c.read(cn) })
	finished := c.write(ctx, cn)
	if c.frozen() {
		// The reader keeps recording late replies until closeFrozen closes the connection.
		c.frozenConn.Store(cn.raw)
		c.h.update(func() { c.sess.End = EndAbandoned })
		return true
	}
	_ = cn.raw.Close()
	c.readers.Wait()
	return finished
}

// setup creates the session's marker parent, marker and FIFO directory (NodeExists counts as
// done: an earlier attempt's create took effect).
func (c *fifoClient) setup(raw *conformance.Raw) error {
	marker := "/markers/" + c.rec.Name
	steps := []struct {
		path string
		mode jute.CreateMode
	}{{marker, jute.ModePersistent}, {marker + "/m", jute.ModeEphemeral}, {c.rec.Dir, jute.ModePersistent}}
	for _, s := range steps {
		rep, err := raw.Call(jute.OpCreate, &jute.CreateRequest{Path: s.path, ACL: openACL, Flags: s.mode})
		if err != nil {
			return err
		}
		c.noteZxid(rep.Header.Zxid)
		switch rep.Header.Err {
		case jute.CodeOK:
			c.h.update(func() { c.sess.Acked = append(c.sess.Acked, AckedWrite{"create " + s.path, rep.Header.Zxid}) })
		case jute.CodeNodeExists:
		default:
			return fmt.Errorf("create %s: %w", s.path, rep.Header.Err)
		}
	}
	c.h.update(func() {
		c.sess.Marker = marker + "/m"
		c.sess.Owns = []string{marker, c.rec.Dir}
	})
	return nil
}

func (c *fifoClient) noteZxid(z int64) {
	for {
		cur := c.lastZxid.Load()
		if z <= cur || c.lastZxid.CompareAndSwap(cur, z) {
			return
		}
	}
}

// read records replies until the connection fails.
func (c *fifoClient) read(cn *conn) {
	defer close(cn.dead)
	for {
		rep, err := cn.raw.ReadReply()
		if err != nil {
			cn.err = err
			return
		}
		c.noteZxid(rep.Header.Zxid)
		if rep.Header.Xid == jute.XidPing || rep.Header.Xid == jute.XidNotification {
			continue
		}
		p, err := cn.pop(rep.Header.Xid)
		if err != nil {
			msg := fmt.Sprintf("epoch %d (server %d): %v", cn.epoch, cn.server+1, err)
			c.h.update(func() { c.rec.Protocol = append(c.rec.Protocol, msg) })
			cn.err = err
			return
		}
		switch {
		case p.close:
			c.h.update(func() { c.sess.CloseZxid = rep.Header.Zxid })
		case rep.Header.Err == jute.CodeOK:
			var cr jute.CreateResponse
			derr := rep.Decode(&cr)
			c.h.update(func() {
				w := &c.rec.Writes[p.write]
				if derr != nil {
					c.rec.Protocol = append(c.rec.Protocol, fmt.Sprintf("write %d: bad create reply: %v", p.write, derr))
					return
				}
				w.Outcome, w.Path, w.Zxid = OK, cr.Path, rep.Header.Zxid
			})
		default:
			c.h.update(func() {
				w := &c.rec.Writes[p.write]
				w.Outcome, w.Code, w.Zxid = Failed, rep.Header.Err, rep.Header.Zxid
			})
		}
		select {
		case cn.wake <- struct{}{}:
		default:
		}
	}
}

// write pipelines creates on cn until the connection dies (false), the client is frozen (true),
// or ctx ends: then it waits for the outstanding replies and closes the session (true).
func (c *fifoClient) write(ctx context.Context, cn *conn) bool {
	tickEvery := c.cfg.pace
	if tickEvery == 0 {
		tickEvery = 10 * time.Millisecond
	}
	tick := time.NewTicker(tickEvery)
	defer tick.Stop()
	pingEvery := time.Duration(c.cfg.timeoutMs) * time.Millisecond / 3
	lastSend := time.Now()
	for {
		select {
		case <-c.freeze:
			c.log.Info("frozen", "server", cn.server+1, "outstanding", cn.outstanding())
			return true
		case <-cn.dead:
			c.log.Info("connection lost", "server", cn.server+1, "epoch", cn.epoch, "err", cn.err, "outstanding", cn.outstanding())
			return false
		case <-ctx.Done():
			c.finish(cn)
			return true
		case <-cn.wake:
			if c.cfg.pace != 0 {
				continue
			}
		case <-tick.C:
		}
		n := c.cfg.window - cn.outstanding()
		if c.cfg.pace != 0 {
			n = min(n, c.cfg.batch)
		}
		for range n {
			if err := c.send(cn); err != nil {
				return false
			}
			lastSend = time.Now()
		}
		if time.Since(lastSend) > pingEvery {
			if err := cn.raw.Send(jute.XidPing, jute.OpPing, nil); err != nil {
				return false
			}
			lastSend = time.Now()
		}
	}
}

// send records and sends the next create.
func (c *fifoClient) send(cn *conn) error {
	var n int
	c.h.update(func() {
		n = len(c.rec.Writes)
		c.rec.Writes = append(c.rec.Writes, FIFOWrite{Epoch: cn.epoch, Server: cn.server})
	})
	xid := cn.raw.NextXid()
	cn.push(pending{xid: xid, write: n})
	c.writes.Add(1)
	return cn.raw.Send(xid, jute.OpCreate, &jute.CreateRequest{
		Path: c.rec.Dir + "/n-", Data: fmt.Appendf(nil, "%d:%d", cn.epoch, n), ACL: openACL, Flags: jute.ModePersistentSequential})
}

// finish waits (bounded) for the outstanding replies, then closes the session. If the connection
// dies first, the session is closed over another one.
func (c *fifoClient) finish(cn *conn) {
	deadline := time.NewTimer(2 * c.readTimeout())
	defer deadline.Stop()
drain:
	for cn.outstanding() > 0 {
		select {
		case <-cn.wake:
		case <-cn.dead:
			c.closeDetached()
			return
		case <-deadline.C:
			c.log.Info("replies still outstanding at the end", "outstanding", cn.outstanding())
			break drain
		}
	}
	xid := cn.raw.NextXid()
	cn.push(pending{xid: xid, write: -1, close: true})
	c.h.update(func() { c.sess.End = EndClosed })
	if err := cn.raw.Send(xid, jute.OpCloseSession, nil); err != nil {
		return
	}
	wait := time.NewTimer(c.readTimeout())
	defer wait.Stop()
	for cn.outstanding() > 0 {
		select {
		case <-cn.wake:
		case <-cn.dead:
			return
		case <-wait.C:
			return
		}
	}
}

// closeDetached closes the session over a fresh connection after the workload ended while the
// client was between connections; if no server takes it, the session is left to expire.
func (c *fifoClient) closeDetached() {
	sid, passwd := c.sid, c.passwd
	if sid == 0 {
		return
	}
	for i := range c.servers {
		raw, _, err := attach(c.servers[i], 3*time.Second, jute.ConnectRequest{
			LastZxidSeen: c.lastZxid.Load(), TimeOut: c.cfg.timeoutMs, SessionID: sid, Passwd: passwd})
		if errors.Is(err, errExpired) {
			c.h.update(func() { c.sess.End = EndExpired })
			return
		}
		if err != nil {
			continue
		}
		z, err := closeSession(raw)
		_ = raw.Close()
		c.h.update(func() { c.sess.End, c.sess.CloseZxid = EndClosed, z })
		if err == nil {
			return
		}
	}
	c.h.update(func() {
		if c.sess.End == EndAlive {
			c.sess.End = EndAbandoned
		}
	})
}

// closeFrozen closes the connection a frozen client kept open and waits for its reader. Call it
// once run has returned.
func (c *fifoClient) closeFrozen() {
	if raw := c.frozenConn.Load(); raw != nil {
		_ = raw.Close()
	}
	c.readers.Wait()
}

// sleepCtx sleeps for d or until ctx ends (a retry's back-off, not a wait for state).
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
