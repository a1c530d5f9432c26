package consensus

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/zkd-io/zkd/internal/peernet"
	"github.com/zkd-io/zkd/internal/third_party/raft"

	"github.com/zkd-io/zkd/jute"
)

// The cluster RPC runs on peer connections whose first byte is peernet.ConnRPC. Each direction carries
// frames:
//
//	[u32 length of what follows][u64 call id][u8 kind or status][payload]
//
// A client sends requests (kind) and the server answers each with the same call id (status). One
// connection per peer pair carries many calls at once. Submits are read and proposed in the
// order they arrive on a connection, which keeps each session's order (see Node.Start).
//
// Payloads are the typed messages below, in jute encoding; a submit's payload is the marshalled
// log entry (command.go).
const (
	rpcSubmit       byte = iota + 1 // a marshalled entry → commitMsg
	rpcReadIndex                    // nothing → readIndexMsg
	rpcTouch                        // sessionsMsg → an empty sessionsMsg
	rpcValidate                     // attachReq → one byte (live or not); kept for older peers
	rpcAddVoter                     // memberMsg → nothing
	rpcRemoveServer                 // memberMsg (ID only) → nothing
	rpcTransfer                     // nothing → nothing
	rpcCommitted                    // commitMsg, the leader's announcement (relay.go) → nothing; no reply at all when sent with id 0 (notify)
	rpcAttach                       // attachReq → attachMsg
	rpcMembers                      // nothing → membersMsg (the answering peer's configuration)
)

// Reply statuses.
const (
	statusOK          byte = 0
	statusNotProposed byte = 1 // nothing was done (not leader, not ready, enqueue timeout)
	statusUnknown     byte = 2 // proposed, outcome unknown
	statusFailed      byte = 3 // payload is an error message
	statusMoved       byte = 4 // nothing was proposed: the session is owned by another server
	statusDiskFull    byte = 5 // nothing was proposed: the leader's disk is full
)

// maxFrame bounds a frame: a jute request is at most about 1 MiB plus our header.
const maxFrame = 4 << 20

const rpcWriteTimeout = 10 * time.Second

var errConnLost = errors.New("consensus: peer connection lost")

// msg is a cluster-RPC payload.
type msg interface {
	encode(e *jute.Encoder)
	decode(d *jute.Decoder)
}

func encodeMsg(m msg) []byte {
	e := jute.NewEncoder(nil)
	m.encode(e)
	return e.Bytes()
}

// decodeMsg decodes b into m. Bytes after the message are ignored: a newer peer may append fields.
func decodeMsg(b []byte, m msg) error {
	d := jute.NewDecoder(b, len(b)+1)
	m.decode(d)
	if err := d.Err(); err != nil {
		return fmt.Errorf("consensus: rpc payload %T: %w", m, err)
	}
	return nil
}

// commitMsg is a committed entry's index and the leader's term: the reply to a submit and the
// leader's announcement of its commits.
type commitMsg struct{ Index, Term uint64 }

func (m *commitMsg) encode(e *jute.Encoder) { e.Int64(int64(m.Index)); e.Int64(int64(m.Term)) }
func (m *commitMsg) decode(d *jute.Decoder) { m.Index, m.Term = uint64(d.Int64()), uint64(d.Int64()) }

// readIndexMsg is the leader's read index.
type readIndexMsg struct{ Index int64 }

func (m *readIndexMsg) encode(e *jute.Encoder) { e.Int64(m.Index) }
func (m *readIndexMsg) decode(d *jute.Decoder) { m.Index = d.Int64() }

// sessionsMsg lists session ids: the touched ones, or in the reply those the leader does not know.
type sessionsMsg struct{ IDs []int64 }

func (m *sessionsMsg) encode(e *jute.Encoder) {
	e.Int32(int32(len(m.IDs)))
	for _, id := range m.IDs {
		e.Int64(id)
	}
}

func (m *sessionsMsg) decode(d *jute.Decoder) {
	m.IDs = nil
	if n := d.VectorLen(8); n > 0 {
		m.IDs = make([]int64, 0, n)
		for i := 0; i < n && d.Err() == nil; i++ {
			m.IDs = append(m.IDs, d.Int64())
		}
	}
}

// attachReq asks the leader to validate Session for a client attaching on Server.
type attachReq struct {
	Session int64
	Server  string
}

func (m *attachReq) encode(e *jute.Encoder) { e.Int64(m.Session); e.String(m.Server) }
func (m *attachReq) decode(d *jute.Decoder) {
	m.Session = d.Int64()
	if d.Err() == nil && d.Len() > 0 {
		m.Server = d.String()
	}
}

// attachMsg answers attachReq: whether the session is live, and the new attachment's token.
type attachMsg struct {
	OK     bool
	Attach uint64
}

func (m *attachMsg) encode(e *jute.Encoder) { e.Bool(m.OK); e.Int64(int64(m.Attach)) }
func (m *attachMsg) decode(d *jute.Decoder) { m.OK = d.Bool(); m.Attach = uint64(d.Int64()) }

// memberMsg names a member: ID and, for AddVoter, its peer address.
type memberMsg struct{ ID, Addr string }

func (m *memberMsg) encode(e *jute.Encoder) {
	e.String(m.ID)
	if m.Addr != "" {
		e.String(m.Addr)
	}
}

func (m *memberMsg) decode(d *jute.Decoder) {
	m.ID = d.String()
	if d.Err() == nil && d.Len() > 0 {
		m.Addr = d.String()
	}
}

// membersMsg is the answering peer's latest configuration (its members' ids) and its last log
// index.
type membersMsg struct {
	Index uint64
	IDs   []string
}

func (m *membersMsg) encode(e *jute.Encoder) {
	e.Int64(int64(m.Index))
	e.Int32(int32(len(m.IDs)))
	for _, id := range m.IDs {
		e.String(id)
	}
}

func (m *membersMsg) decode(d *jute.Decoder) {
	m.Index = uint64(d.Int64())
	m.IDs = nil
	if n := d.VectorLen(4); n > 0 {
		m.IDs = make([]string, 0, n)
		for i := 0; i < n && d.Err() == nil; i++ {
			m.IDs = append(m.IDs, d.String())
		}
	}
}

// noMsg is the empty payload.
type noMsg struct{}

func (noMsg) encode(*jute.Encoder) {}
func (noMsg) decode(*jute.Decoder) {}

type rpcReply struct {
	status  byte
	payload []byte
	err     error // transport failure after the request was sent
}

func writeFrame(w io.Writer, id uint64, kind byte, payload []byte) error {
	_, err := w.Write(appendFrame(make([]byte, 0, 13+len(payload)), id, kind, payload))
	return err
}

// appendFrame appends one frame to b.
func appendFrame(b []byte, id uint64, kind byte, payload []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(9+len(payload)))
	b = binary.BigEndian.AppendUint64(b, id)
	b = append(b, kind)
	return append(b, payload...)
}

func readFrame(r *bufio.Reader) (id uint64, kind byte, payload []byte, err error) {
	var hdr [13]byte
	if _, err = io.ReadFull(r, hdr[:]); err != nil {
		return 0, 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n < 9 || n > maxFrame {
		return 0, 0, nil, fmt.Errorf("consensus: rpc frame of %d bytes", n)
	}
	payload = make([]byte, n-9)
	if _, err = io.ReadFull(r, payload); err != nil {
		return 0, 0, nil, err
	}
	return binary.BigEndian.Uint64(hdr[4:]), hdr[12], payload, nil
}

// dialError reports a call that was never sent: nothing happened on the peer.
type dialError struct{ error }

func (e dialError) Unwrap() error { return e.error }

// rpcClient is this node's connection to one peer's cluster RPC. It dials lazily and redials after
// a failure; a failure fails every call in flight on that connection.
type rpcClient struct {
	n    *Node
	addr string
	mu   struct {
		sync.Mutex
		conn    net.Conn
		nextID  uint64
		pending map[uint64]func(rpcReply)
		closed  bool
	}
}

func newRPCClient(n *Node, addr string) *rpcClient {
	c := &rpcClient{n: n, addr: addr}
	c.mu.pending = make(map[uint64]func(rpcReply))
	return c
}

// send writes one request; done is called once with its reply, or with an error if the
// connection fails first. done runs on the client's reader goroutine and must not block. An error
// from send itself (a dialError, or ErrShutdown) means the request never left this node.
// With a nil done the request goes with id 0, which asks for no reply (only rpcCommitted
// honours it; a server that predates it replies with id 0, which the reader ignores, as it
// ignores any id it is not waiting for).
func (c *rpcClient) send(ctx context.Context, kind byte, payload []byte, done func(rpcReply)) error {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return dialError{ErrShutdown}
	}
	if c.mu.conn == nil {
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := c.n.dialPeer(dctx, c.addr, peernet.ConnRPC)
		cancel()
		if err != nil {
			c.mu.Unlock()
			return dialError{fmt.Errorf("consensus: dial %s: %w", c.addr, err)}
		}
		if !c.n.goTracked(func() { c.readLoop(conn) }) {
			conn.Close()
			c.mu.Unlock()
			return dialError{ErrShutdown}
		}
		c.mu.conn = conn
	}
	var id uint64 // 0: no reply wanted
	if done != nil {
		c.mu.nextID++
		id = c.mu.nextID
		c.mu.pending[id] = done
	}
	conn := c.mu.conn
	_ = conn.SetWriteDeadline(time.Now().Add(rpcWriteTimeout))
	if err := writeFrame(conn, id, kind, payload); err != nil {
		// Part of the frame may have left: the peer may act on it.
		failed := c.failLocked(conn)
		c.mu.Unlock()
		failAll(failed, err)
		return nil
	}
	c.mu.Unlock()
	return nil
}

// call sends a request and waits for its reply or ctx.
func (c *rpcClient) call(ctx context.Context, kind byte, payload []byte) (rpcReply, error) {
	ch := make(chan rpcReply, 1)
	if err := c.send(ctx, kind, payload, func(r rpcReply) { ch <- r }); err != nil {
		return rpcReply{}, err
	}
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		return rpcReply{}, ctx.Err()
	}
}

func (c *rpcClient) readLoop(conn net.Conn) {
	br := bufio.NewReader(conn)
	for {
		id, status, payload, err := readFrame(br)
		if err != nil {
			c.mu.Lock()
			failed := c.failLocked(conn)
			c.mu.Unlock()
			failAll(failed, err)
			return
		}
		c.mu.Lock()
		done, ok := c.mu.pending[id]
		delete(c.mu.pending, id)
		c.mu.Unlock()
		if ok {
			done(rpcReply{status: status, payload: payload})
		}
	}
}

// failLocked closes conn and, if it is still the current connection, forgets it and returns the
// calls in flight on it; the caller fails them (failAll) after unlocking.
func (c *rpcClient) failLocked(conn net.Conn) []func(rpcReply) {
	conn.Close()
	if c.mu.conn != conn {
		return nil
	}
	c.mu.conn = nil
	failed := make([]func(rpcReply), 0, len(c.mu.pending))
	for id, done := range c.mu.pending {
		failed = append(failed, done)
		delete(c.mu.pending, id)
	}
	return failed
}

func failAll(calls []func(rpcReply), err error) {
	for _, done := range calls {
		done(rpcReply{err: fmt.Errorf("%w: %w", errConnLost, err)})
	}
}

func (c *rpcClient) close() {
	c.mu.Lock()
	c.mu.closed = true
	var failed []func(rpcReply)
	if c.mu.conn != nil {
		failed = c.failLocked(c.mu.conn)
	}
	c.mu.Unlock()
	failAll(failed, ErrShutdown)
}

// rpcClientFor returns the client for a peer address, creating it on first use.
func (n *Node) rpcClientFor(addr string) (*rpcClient, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.closing {
		return nil, ErrShutdown
	}
	c, ok := n.mu.clients[addr]
	if !ok {
		c = newRPCClient(n, addr)
		n.mu.clients[addr] = c
	}
	return c, nil
}

// callLeader makes a cluster RPC to the leader at addr: it sends req and decodes the reply into
// resp. Errors: dialError when nothing was sent, ErrNotLeader when the peer did nothing because it
// does not lead (statusNotProposed), errConnLost when the connection failed after sending.
func (n *Node) callLeader(ctx context.Context, addr string, kind byte, req, resp msg) error {
	cl, err := n.rpcClientFor(addr)
	if err != nil {
		return dialError{err}
	}
	r, err := cl.call(ctx, kind, encodeMsg(req))
	if err != nil {
		return err
	}
	switch {
	case r.err != nil:
		return r.err
	case r.status == statusOK:
		return decodeMsg(r.payload, resp)
	case r.status == statusNotProposed:
		return fmt.Errorf("%w: %s", ErrNotLeader, r.payload)
	default:
		return fmt.Errorf("consensus: rpc to %s: %s", addr, r.payload)
	}
}

// onLeader is the one way this node acts through the leader: it runs local when this node leads,
// else remote with the leader's peer address. An attempt that did nothing (ErrNotLeader,
// ErrNoLeader, or a dialError: nothing sent) is retried after a short random pause while hold
// allows, for up to Config.HoldTimeout; then, or on any other error, the error is returned. A
// remote call whose connection broke after sending (errConnLost) is retried only if retryLost:
// reads may be repeated, writes may not.
func (n *Node) onLeader(ctx context.Context, hold bool, local func() error, remote func(addr string) error) error {
	deadline := time.Now().Add(n.cfg.HoldTimeout)
	for {
		addr, id := n.raft.LeaderWithID()
		var err error
		switch {
		case id == raft.ServerID(n.cfg.ID):
			err = local()
		case id != "":
			err = remote(string(addr))
		default:
			err = ErrNoLeader
		}
		if err == nil || !nothingDone(err) {
			return err
		}
		if !hold || !time.Now().Before(deadline) {
			if errors.Is(err, ErrNoLeader) {
				return err
			}
			return fmt.Errorf("%w: %w", ErrNoLeader, err)
		}
		n.stats.retried.Add(1)
		if err := n.pause(ctx); err != nil {
			return err
		}
	}
}

// nothingDone reports whether err says an attempt had no effect, so it may be repeated.
func nothingDone(err error) bool {
	var d dialError
	return errors.As(err, &d) || errors.Is(err, ErrNotLeader) || errors.Is(err, ErrNoLeader)
}

// pause waits a short random time (10-40ms), or fails when ctx ends or the node stops.
func (n *Node) pause(ctx context.Context) error {
	t := time.NewTimer(time.Duration(10+rand.IntN(30)) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-n.stop:
		return ErrShutdown
	}
}

// serveRPC answers the cluster RPC on an accepted connection until it fails or the node stops.
func (n *Node) serveRPC(conn net.Conn) {
	defer conn.Close()
	out := newRPCReplies(conn)
	defer out.close()
	if !n.goTracked(func() { n.fwd.runReplies(out) }) {
		return
	}
	br := bufio.NewReader(conn)
	for {
		id, kind, payload, err := readFrame(br)
		if err != nil {
			return
		}
		switch kind {
		case rpcSubmit:
			// Proposed here, on the reading goroutine, so the order of submits on this
			// connection is the order of their log entries.
			if status, msg := n.submitForwarded(out, id, payload); status != statusOK {
				out.reply(id, status, msg)
			}
		case rpcCommitted:
			var m commitMsg
			if decodeMsg(payload, &m) == nil {
				n.relay.offer(m.Index, m.Term)
				n.metrics.learnerComms.Inc()
				n.stats.heard.Add(1)
			}
			if id != 0 {
				out.reply(id, statusOK, nil)
			}
		default:
			if !n.goTracked(func() {
				status, msg := n.handleRPC(kind, payload)
				out.reply(id, status, msg)
			}) {
				return
			}
		}
	}
}

// submitForwarded proposes a write a peer forwarded on out as call id. Once proposed, it is
// answered when applied here, or from its future (forwards.go); the status is then statusOK.
// Otherwise the status and message say why nothing was proposed.
func (n *Node) submitForwarded(out *rpcReplies, id uint64, entry []byte) (byte, []byte) {
	h, err := peekCommand(entry)
	if err != nil {
		return statusFailed, []byte(fmt.Errorf("%w: %w", ErrBadRequest, err).Error())
	}
	// Registered before it is proposed: the entry may be applied before leaderApply returns.
	w := &forwarded{key: forwardKey{h.origin, h.seq}, id: id, out: out, at: time.Now()}
	n.fwd.add(w)
	fut, err := n.props.leaderApplyPeeked(entry, h)
	if err != nil {
		n.fwd.drop(w)
		status := statusNotProposed
		switch {
		case errors.Is(err, ErrSessionMoved):
			status = statusMoved
		case errors.Is(err, ErrBadRequest):
			status = statusFailed
		case errors.Is(err, ErrDiskFull):
			status = statusDiskFull
		}
		return status, []byte(err.Error())
	}
	w.fut = fut
	out.await(w)
	return statusOK, nil
}

// handleRPC answers every call but submit and the commit announcement.
func (n *Node) handleRPC(kind byte, payload []byte) (byte, []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.HoldTimeout)
	defer cancel()
	fail := func(err error) (byte, []byte) {
		if errors.Is(err, ErrNotLeader) {
			return statusNotProposed, []byte(err.Error())
		}
		return statusFailed, []byte(err.Error())
	}
	ok := func(m msg) (byte, []byte) { return statusOK, encodeMsg(m) }
	switch kind {
	case rpcReadIndex:
		idx, err := n.lead.leaderReadIndex()
		if err != nil {
			return fail(err)
		}
		return ok(&readIndexMsg{Index: idx})
	case rpcTouch:
		var req sessionsMsg
		if err := decodeMsg(payload, &req); err != nil {
			return fail(err)
		}
		if err := n.keeper.leaderTouch(req.IDs); err != nil {
			return fail(err)
		}
		return ok(&sessionsMsg{}) // the caller reads nothing from it
	case rpcValidate, rpcAttach:
		var req attachReq
		if err := decodeMsg(payload, &req); err != nil {
			return fail(err)
		}
		live, attach, err := n.keeper.leaderValidate(req.Session, req.Server)
		if err != nil {
			return fail(err)
		}
		if kind == rpcValidate {
			if live {
				return statusOK, []byte{1}
			}
			return statusOK, []byte{0}
		}
		return ok(&attachMsg{OK: live, Attach: attach})
	case rpcAddVoter:
		var req memberMsg
		if err := decodeMsg(payload, &req); err != nil {
			return fail(err)
		}
		if err := n.leaderAddVoter(ctx, req.ID, req.Addr); err != nil {
			return fail(err)
		}
		return ok(noMsg{})
	case rpcRemoveServer:
		var req memberMsg
		if err := decodeMsg(payload, &req); err != nil {
			return fail(err)
		}
		if err := n.leaderRemoveServer(ctx, req.ID); err != nil {
			return fail(err)
		}
		return ok(noMsg{})
	case rpcTransfer:
		if err := n.leaderTransfer(); err != nil {
			return fail(err)
		}
		return ok(noMsg{})
	case rpcMembers:
		// Answered by any member that follows (or is) a leader: a configuration from a node
		// cut off from the cluster would tell the asker nothing it can trust.
		if _, id := n.raft.LeaderWithID(); id == "" {
			return fail(ErrNoLeader)
		}
		f := n.raft.GetConfiguration()
		if err := f.Error(); err != nil {
			return fail(err)
		}
		m := &membersMsg{Index: n.raft.LastIndex()}
		for _, s := range f.Configuration().Servers {
			m.IDs = append(m.IDs, string(s.ID))
		}
		return ok(m)
	}
	return statusFailed, []byte(fmt.Sprintf("consensus: unknown rpc kind %d", kind))
}
