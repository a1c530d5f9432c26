package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkd-io/zkd/jute"
)

// errClosed reports a call on a connection that has been closed or has failed.
var errClosed = errors.New("zkbench: connection closed")

// errConnLost marks the errors of calls on a connection that failed: every later call on it fails
// at once.
var errConnLost = errors.New("zkbench: connection lost")

// errNoCloseReply reports a server that closed the connection without answering closeSession.
var errNoCloseReply = errors.New("zkbench: connection closed before the closeSession reply")

// errProtocol reports a reply that does not match the oldest outstanding request.
var errProtocol = errors.New("zkbench: reply out of order")

// reply is what a request's callback receives: the reply header (Err holds the ZooKeeper result
// code), the decoded body (nil for error replies and bodiless ops) and a transport error.
type reply struct {
	hdr  jute.ReplyHeader
	body jute.Record
	err  error
}

// result returns the transport error, else the ZooKeeper code as an error, else nil.
func (r reply) result() error {
	if r.err != nil {
		return r.err
	}
	if r.hdr.Err != jute.CodeOK {
		return r.hdr.Err
	}
	return nil
}

// maxReply bounds a reply frame. ZooKeeper does not limit what it sends (a getChildren of a large
// directory can exceed jute.maxbuffer), so the client accepts more than the servers would.
const maxReply = 64 << 20

// multiResult is result for a multi's reply: a failed multi may come back with a zero code in its
// header and the failure only in its results, where the op that failed carries its own code and
// the others RuntimeInconsistency.
func (r reply) multiResult() error {
	if err := r.result(); err != nil {
		return err
	}
	resp, ok := r.body.(*jute.MultiResponse)
	if !ok {
		return nil
	}
	var first error
	for _, res := range resp.Results {
		if res.Type != jute.OpError || res.Err == jute.CodeOK {
			continue
		}
		if res.Err != jute.CodeRuntimeInconsistency {
			return res.Err
		}
		if first == nil {
			first = res.Err
		}
	}
	return first
}

// pendingCall is a request waiting for its reply.
type pendingCall struct {
	xid  int32
	op   jute.Op
	done func(reply)
	// body, when set, decodes a successful reply's body in place of the op's response record.
	body jute.Record
}

// client is one ZooKeeper session over one TCP connection, speaking the wire protocol directly
// through the jute package. Any number of goroutines may issue requests at once; they are written
// in batches by one writer goroutine (pipelining) and the replies, which ZooKeeper sends in request
// order, are matched by one reader goroutine. Callbacks and the watch handler run on the reader
// goroutine and must not block.
//
// zkbench uses this lean client rather than go-zookeeper/zk because the load generator shares the
// machine's two cores with the servers it measures: a request here costs one encode into a shared
// buffer and no reflection, so more of the CPU goes to the server under test.
type client struct {
	nc        net.Conn
	sessionID int64
	passwd    []byte
	timeout   time.Duration
	onWatch   func(jute.WatcherEvent)
	// notifications counts the watch notifications this connection received.
	notifications atomic.Int64

	mu struct {
		sync.Mutex
		xid     int32
		out     []byte
		pending []pendingCall
		head    int // index of the oldest pending call
		err     error
		waiters map[string][]chan struct{}
	}
	wake chan struct{}
	stop chan struct{}
	wg   sync.WaitGroup
}

// dialClient connects to addr and opens a new session with the given session timeout. onWatch, if
// not nil, receives every watch notification on the reader goroutine.
func dialClient(addr string, timeout time.Duration, onWatch func(jute.WatcherEvent)) (*client, error) {
	return dialClientTLS(addr, nil, timeout, onWatch)
}

// dialClientTLS is dialClient over TLS when tc is not nil (a server's secure port).
func dialClientTLS(addr string, tc *tls.Config, timeout time.Duration, onWatch func(jute.WatcherEvent)) (*client, error) {
	return dialSession(addr, tc, nil, jute.ConnectRequest{TimeOut: int32(timeout / time.Millisecond), Passwd: make([]byte, 16)}, onWatch)
}

// resumeClientFrom connects to addr, from local (nil: any address), and reattaches the session
// c had (after its connection was lost), as a ZooKeeper client does. A session the server no
// longer has comes back as an error wrapping jute.CodeSessionExpired.
func resumeClientFrom(addr string, local *net.TCPAddr, c *client, onWatch func(jute.WatcherEvent)) (*client, error) {
	return dialSession(addr, nil, local, jute.ConnectRequest{TimeOut: int32(c.timeout / time.Millisecond), SessionID: c.sessionID, Passwd: c.passwd}, onWatch)
}

// dialClientFrom is dialClient dialling from local (nil: any address).
func dialClientFrom(addr string, local *net.TCPAddr, timeout time.Duration) (*client, error) {
	return dialSession(addr, nil, local, jute.ConnectRequest{TimeOut: int32(timeout / time.Millisecond), Passwd: make([]byte, 16)}, nil)
}

// sourceFor returns the local address session i of hold process p dials addr from: on loopback,
// 127.0.X.Y with X and Y spread over 1-250 by p and i, else nil (any). From one source address
// Linux has about 28,000 ephemeral ports towards a server address; with tens of thousands of
// sessions on three members, connect() then spent most of the machine's CPU searching for a
// free port (perf: __inet_check_established) while the sessions reattached, so the load
// generator, not the servers, set the pace. Clients on many hosts do not share one address.
func sourceFor(addr string, p, i int) *net.TCPAddr {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || ip.To4() == nil || !ip.IsLoopback() {
		return nil
	}
	return &net.TCPAddr{IP: net.IPv4(127, 0, byte(1+p%250), byte(1+i%250))}
}

// dialSession connects to addr, from local when it is not nil, and sends req: a new session, or
// one to reattach.
func dialSession(addr string, tc *tls.Config, local *net.TCPAddr, req jute.ConnectRequest, onWatch func(jute.WatcherEvent)) (*client, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	if local != nil {
		d.LocalAddr = local
	}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("zkbench: dial %s: %w", addr, err)
	}
	if tcp, ok := nc.(*net.TCPConn); ok {
		_ = tcp.SetNoDelay(true)
	}
	if tc != nil {
		if tc.ServerName == "" {
			// Verify the server's certificate against the host dialled, as ZooKeeper's
			// clients do with hostname verification on.
			host, _, _ := net.SplitHostPort(addr)
			tc = tc.Clone()
			tc.ServerName = host
		}
		conn := tls.Client(nc, tc)
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if err := conn.Handshake(); err != nil {
			_ = nc.Close()
			return nil, fmt.Errorf("zkbench: TLS handshake with %s: %w", addr, err)
		}
		nc = conn
	}
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write(jute.AppendFrame(nil, &req)); err != nil {
		_ = nc.Close()
		return nil, fmt.Errorf("zkbench: connect request to %s: %w", addr, err)
	}
	// Larger replies bypass the buffer (ReadFull into the frame), so a small one serves every
	// workload, and a session workload does not allocate 64 KiB per session it opens.
	br := bufio.NewReaderSize(nc, 8<<10)
	frame, err := jute.ReadFrame(br, nil, 0)
	if err != nil {
		_ = nc.Close()
		return nil, fmt.Errorf("zkbench: connect reply from %s: %w", addr, err)
	}
	var resp jute.ConnectResponse
	if err := jute.Unmarshal(frame, 0, &resp); err != nil {
		_ = nc.Close()
		return nil, fmt.Errorf("zkbench: connect reply from %s: %w", addr, err)
	}
	if resp.SessionID == 0 || resp.TimeOut <= 0 {
		_ = nc.Close()
		return nil, fmt.Errorf("zkbench: %s refused the session: %w", addr, jute.CodeSessionExpired)
	}
	_ = nc.SetDeadline(time.Time{})
	c := &client{
		nc:        nc,
		sessionID: resp.SessionID,
		passwd:    resp.Passwd,
		timeout:   time.Duration(resp.TimeOut) * time.Millisecond,
		onWatch:   onWatch,
		wake:      make(chan struct{}, 1),
		stop:      make(chan struct{}),
	}
	c.wg.Add(2)
	go c.writeLoop()
	go c.readLoop(jute.NewFrameReader(br, maxReply))
	return c, nil
}

// waitServing waits until addr accepts a session (ZooKeeper answers ruok before it accepts
// sessions) or the timeout passes, polling every 20 ms.
func waitServing(ctx context.Context, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := dialClient(addr, 10*time.Second, nil)
		if err == nil {
			return c.close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("zkbench: %s not serving after %v: %w", addr, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// send queues a request and arranges for done to be called with its reply. done runs on the
// reader goroutine, or on the caller's goroutine when the connection has already failed.
func (c *client) send(op jute.Op, req jute.Record, done func(reply)) {
	c.sendInto(op, req, nil, done)
}

// sendInto is send with body, when not nil, decoding a successful reply's body (see lockView).
func (c *client) sendInto(op jute.Op, req, body jute.Record, done func(reply)) {
	c.mu.Lock()
	if err := c.mu.err; err != nil {
		c.mu.Unlock()
		done(reply{err: err})
		return
	}
	c.mu.xid++
	if c.mu.xid <= 0 {
		c.mu.xid = 1
	}
	xid := c.mu.xid
	c.mu.out = jute.AppendRequest(c.mu.out, jute.RequestHeader{Xid: xid, Type: op}, req)
	c.mu.pending = append(c.mu.pending, pendingCall{xid: xid, op: op, done: done, body: body})
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// call sends a request and waits for its reply.
func (c *client) call(op jute.Op, req jute.Record) reply {
	ch := make(chan reply, 1)
	c.send(op, req, func(r reply) { ch <- r })
	return <-ch
}

// callInto is call with body decoding a successful reply's body.
func (c *client) callInto(op jute.Op, req, body jute.Record) reply {
	ch := make(chan reply, 1)
	c.sendInto(op, req, body, func(r reply) { ch <- r })
	return <-ch
}

// writeLoop is the only writer of c.nc: it writes whatever has been queued in one system call, and
// pings when the session would otherwise idle for a third of its timeout.
func (c *client) writeLoop() {
	defer c.wg.Done()
	ping := jute.AppendRequest(nil, jute.RequestHeader{Xid: jute.XidPing, Type: jute.OpPing}, nil)
	ticker := time.NewTicker(max(c.timeout/3, 100*time.Millisecond))
	defer ticker.Stop()
	var spare []byte
	for {
		select {
		case <-c.stop:
			return
		case <-ticker.C:
			c.mu.Lock()
			c.mu.out = append(c.mu.out, ping...)
			c.mu.Unlock()
		case <-c.wake:
		}
		c.mu.Lock()
		buf := c.mu.out
		c.mu.out = spare[:0]
		c.mu.Unlock()
		if len(buf) == 0 {
			spare = buf
			continue
		}
		if _, err := c.nc.Write(buf); err != nil {
			c.fail(fmt.Errorf("zkbench: write: %w", err))
			return
		}
		spare = buf
	}
}

// readLoop reads replies and notifications until the connection fails or is closed.
func (c *client) readLoop(fr *jute.FrameReader) {
	defer c.wg.Done()
	for {
		frame, err := fr.Next()
		if err != nil {
			c.fail(fmt.Errorf("zkbench: read: %w", err))
			return
		}
		hdr, err := jute.PeekReplyHeader(frame)
		if err != nil {
			c.fail(err)
			return
		}
		switch hdr.Xid {
		case jute.XidNotification:
			_, body, err := jute.DecodeReply(frame, jute.OpNotification, 0)
			if err != nil {
				c.fail(err)
				return
			}
			if ev, ok := body.(*jute.WatcherEvent); ok {
				c.notifications.Add(1)
				c.notifyWaiters(ev.Path)
				if c.onWatch != nil {
					c.onWatch(*ev)
				}
			}
			continue
		case jute.XidPing:
			continue
		}
		c.mu.Lock()
		if c.mu.head >= len(c.mu.pending) {
			c.mu.Unlock()
			c.fail(fmt.Errorf("zkbench: reply xid %d with nothing pending: %w", hdr.Xid, errProtocol))
			return
		}
		p := c.mu.pending[c.mu.head]
		c.mu.pending[c.mu.head] = pendingCall{}
		c.mu.head++
		if c.mu.head == len(c.mu.pending) {
			c.mu.pending = c.mu.pending[:0]
			c.mu.head = 0
		}
		c.mu.Unlock()
		if p.xid != hdr.Xid {
			p.done(reply{err: errProtocol})
			c.fail(fmt.Errorf("zkbench: reply xid %d, want %d: %w", hdr.Xid, p.xid, errProtocol))
			return
		}
		if p.body != nil {
			p.done(decodeInto(frame, p.body))
			continue
		}
		h, body, err := jute.DecodeReply(frame, p.op, maxReply)
		p.done(reply{hdr: h, body: body, err: err})
	}
}

// waitFor returns a channel that is closed by the next watch notification for path on this
// connection, or when the connection fails. Register it before sending the request that sets the
// watch, so the notification cannot be missed.
func (c *client) waitFor(path string) <-chan struct{} {
	ch := make(chan struct{})
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.err != nil {
		close(ch)
		return ch
	}
	if c.mu.waiters == nil {
		c.mu.waiters = map[string][]chan struct{}{}
	}
	c.mu.waiters[path] = append(c.mu.waiters[path], ch)
	return ch
}

// forget drops the waiters for path, for when the watch turned out not to be set.
func (c *client) forget(path string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.mu.waiters, path)
}

// notifyWaiters wakes the waiters for path.
func (c *client) notifyWaiters(path string) {
	c.mu.Lock()
	ws := c.mu.waiters[path]
	delete(c.mu.waiters, path)
	c.mu.Unlock()
	for _, ch := range ws {
		close(ch)
	}
}

// err returns the error that failed the connection, nil while it works.
func (c *client) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.err
}

// fail records the first error, closes the socket and fails every outstanding request.
func (c *client) fail(err error) {
	c.mu.Lock()
	if c.mu.err != nil {
		c.mu.Unlock()
		return
	}
	if !errors.Is(err, errClosed) {
		err = fmt.Errorf("%w: %w", errConnLost, err)
	}
	c.mu.err = err
	pending := c.mu.pending[c.mu.head:]
	c.mu.pending, c.mu.head = nil, 0
	waiters := c.mu.waiters
	c.mu.waiters = nil
	c.mu.Unlock()
	for _, ws := range waiters {
		for _, ch := range ws {
			close(ch)
		}
	}
	close(c.stop)
	_ = c.nc.Close()
	for _, p := range pending {
		p.done(reply{err: err})
	}
}

// abandon drops the connection without ending the session (a client that lost its connection
// and will reattach the session elsewhere), and waits for the client's goroutines.
func (c *client) abandon() {
	c.fail(errClosed)
	c.wg.Wait()
}

// close ends the session (closeSession, waiting up to two seconds for its reply), closes the
// connection and waits for the client's goroutines.
func (c *client) close() error {
	ch := make(chan reply, 1)
	c.send(jute.OpCloseSession, nil, func(r reply) { ch <- r })
	var err error
	t := time.NewTimer(2 * time.Second)
	select {
	case r := <-ch:
		err = r.result()
		if errors.Is(err, errConnLost) {
			err = fmt.Errorf("%w (%v)", errNoCloseReply, err)
		}
	case <-t.C:
		err = fmt.Errorf("zkbench: closeSession: %w", jute.CodeOperationTimeout)
	}
	t.Stop()
	c.fail(errClosed)
	c.wg.Wait()
	if errors.Is(err, errClosed) {
		err = nil
	}
	return err
}

// openACL is world:anyone with all permissions (ZooDefs.Ids.OPEN_ACL_UNSAFE).
var openACL = []jute.ACL{{Perms: 31, ID: jute.Id{Scheme: "world", ID: "anyone"}}}

// decodeInto decodes a reply frame whose successful body goes into body, which may keep no
// reference to the frame (the reader reuses it).
func decodeInto(frame []byte, body jute.Record) reply {
	d := jute.NewAliasDecoder(frame, maxReply)
	var h jute.ReplyHeader
	h.Decode(d)
	if err := d.Err(); err != nil {
		return reply{hdr: h, err: fmt.Errorf("jute: reply header: %w", err)}
	}
	if h.Err != jute.CodeOK {
		return reply{hdr: h}
	}
	body.Decode(d)
	if err := d.Finish(); err != nil {
		return reply{hdr: h, err: err}
	}
	return reply{hdr: h, body: body}
}
