package consensus

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/zkd-io/zkd/jute"
)

// The cluster RPC runs on peer connections whose first byte is connRPC. Each direction carries
// frames:
//
//	[u32 length of what follows][u64 call id][u8 kind or status][payload]
//
// A client sends requests (kind) and the server answers each with the same call id (status). One
// connection per peer pair carries many calls at once. Submits are read and proposed in the
// order they arrive on a connection, which keeps each session's order (see Node.Start).
const (
	rpcSubmit byte = iota + 1
	rpcReadIndex
	rpcTouch
	rpcValidate
	rpcAddVoter
	rpcRemoveServer
	rpcTransfer
	rpcCommitted // the leader's announcement of a commit (relay.go); answered at once
	rpcAttach    // rpcValidate that also returns the new attachment's token
)

// Reply statuses.
const (
	statusOK          byte = 0
	statusNotProposed byte = 1 // nothing was proposed (not leader, not ready, enqueue timeout)
	statusUnknown     byte = 2 // proposed, outcome unknown
	statusFailed      byte = 3 // payload is an error message
	statusMoved       byte = 4 // nothing was proposed: the session is owned by another server
)

// maxFrame bounds a frame: a jute request is at most about 1 MiB plus our header.
const maxFrame = 4 << 20

const rpcWriteTimeout = 10 * time.Second

var errConnLost = errors.New("consensus: peer connection lost")

type rpcReply struct {
	status  byte
	payload []byte
	err     error // transport failure after the request was sent
}

func writeFrame(w io.Writer, id uint64, kind byte, payload []byte) error {
	b := make([]byte, 13+len(payload))
	binary.BigEndian.PutUint32(b, uint32(9+len(payload)))
	binary.BigEndian.PutUint64(b[4:], id)
	b[12] = kind
	copy(b[13:], payload)
	_, err := w.Write(b)
	return err
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

// rpcClient is this node's connection to one peer's cluster RPC. It dials lazily and redials after
// a failure; a failure fails every call in flight on that connection.
type rpcClient struct {
	n    *Node
	addr string
	mu   struct {
		sync.Mutex
		conn    net.Conn
		nextID  uint64
		pending map[uint64]chan rpcReply
		closed  bool
	}
}

func newRPCClient(n *Node, addr string) *rpcClient {
	c := &rpcClient{n: n, addr: addr}
	c.mu.pending = make(map[uint64]chan rpcReply)
	return c
}

// send writes one request and returns the channel its reply arrives on. sent is false only when
// the request certainly never left this node (dial failed or client closed).
func (c *rpcClient) send(ctx context.Context, kind byte, payload []byte) (reply <-chan rpcReply, sent bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return nil, false, ErrShutdown
	}
	if c.mu.conn == nil {
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := c.n.cfg.Network.Dial(dctx, c.addr)
		cancel()
		if err != nil {
			return nil, false, fmt.Errorf("consensus: dial %s: %w", c.addr, err)
		}
		if _, err := conn.Write([]byte{connRPC}); err != nil {
			conn.Close()
			return nil, false, fmt.Errorf("consensus: dial %s: %w", c.addr, err)
		}
		if !c.n.goTracked(func() { c.readLoop(conn) }) {
			conn.Close()
			return nil, false, ErrShutdown
		}
		c.mu.conn = conn
	}
	c.mu.nextID++
	id := c.mu.nextID
	ch := make(chan rpcReply, 1)
	c.mu.pending[id] = ch
	_ = c.mu.conn.SetWriteDeadline(time.Now().Add(rpcWriteTimeout))
	if err := writeFrame(c.mu.conn, id, kind, payload); err != nil {
		// Part of the frame may have left: the peer may act on it.
		c.failLocked(c.mu.conn, err)
		return ch, true, nil
	}
	return ch, true, nil
}

// call sends a request and waits for its reply or ctx.
func (c *rpcClient) call(ctx context.Context, kind byte, payload []byte) (rpcReply, bool, error) {
	ch, sent, err := c.send(ctx, kind, payload)
	if err != nil {
		return rpcReply{}, sent, err
	}
	select {
	case r := <-ch:
		return r, true, nil
	case <-ctx.Done():
		return rpcReply{}, true, ctx.Err()
	}
}

func (c *rpcClient) readLoop(conn net.Conn) {
	br := bufio.NewReader(conn)
	for {
		id, status, payload, err := readFrame(br)
		if err != nil {
			c.mu.Lock()
			c.failLocked(conn, err)
			c.mu.Unlock()
			return
		}
		c.mu.Lock()
		ch, ok := c.mu.pending[id]
		delete(c.mu.pending, id)
		c.mu.Unlock()
		if ok {
			ch <- rpcReply{status: status, payload: payload}
		}
	}
}

// failLocked closes conn, if still current, and fails every pending call on it.
func (c *rpcClient) failLocked(conn net.Conn, err error) {
	conn.Close()
	if c.mu.conn != conn {
		return
	}
	c.mu.conn = nil
	for id, ch := range c.mu.pending {
		ch <- rpcReply{err: fmt.Errorf("%w: %w", errConnLost, err)}
		delete(c.mu.pending, id)
	}
}

func (c *rpcClient) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.closed = true
	if c.mu.conn != nil {
		c.failLocked(c.mu.conn, ErrShutdown)
	}
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

// serveRPC answers the cluster RPC on an accepted connection until it fails or the node stops.
func (n *Node) serveRPC(conn net.Conn) {
	defer conn.Close()
	var wmu sync.Mutex
	reply := func(id uint64, status byte, payload []byte) {
		wmu.Lock()
		defer wmu.Unlock()
		_ = conn.SetWriteDeadline(time.Now().Add(rpcWriteTimeout))
		if err := writeFrame(conn, id, status, payload); err != nil {
			conn.Close()
		}
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
			c, err := unmarshalCommand(payload)
			if err != nil {
				reply(id, statusFailed, []byte(err.Error()))
				continue
			}
			fut, err := n.leaderApply(&c)
			if err != nil {
				status := statusNotProposed
				if errors.Is(err, ErrSessionMoved) {
					status = statusMoved
				}
				reply(id, status, []byte(err.Error()))
				continue
			}
			if !n.goTracked(func() {
				status, msg := classifyApply(n.waitFuture(fut, 0))
				if status == statusOK {
					// The index and this leader's term let the follower relay the commit to its
					// own Raft (relay.go).
					msg = commitPayload(fut.Index(), n.raft.CurrentTerm())
				}
				reply(id, status, msg)
			}) {
				return
			}
		case rpcCommitted:
			n.relay.offerPayload(payload)
			reply(id, statusOK, nil)
		default:
			if !n.goTracked(func() {
				status, out := n.handleRPC(kind, payload)
				reply(id, status, out)
			}) {
				return
			}
		}
	}
}

// handleRPC answers every call but submit.
func (n *Node) handleRPC(kind byte, payload []byte) (byte, []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.HoldTimeout)
	defer cancel()
	d := jute.NewDecoder(payload, len(payload)+1)
	fail := func(err error) (byte, []byte) {
		if errors.Is(err, ErrNotLeader) {
			return statusNotProposed, []byte(err.Error())
		}
		return statusFailed, []byte(err.Error())
	}
	switch kind {
	case rpcReadIndex:
		idx, err := n.leaderReadIndex()
		if err != nil {
			return fail(err)
		}
		return statusOK, binary.BigEndian.AppendUint64(nil, uint64(idx))
	case rpcTouch:
		count := d.VectorLen(8)
		ids := make([]int64, 0, max(count, 0))
		for i := 0; i < count && d.Err() == nil; i++ {
			ids = append(ids, d.Int64())
		}
		if d.Err() != nil {
			return statusFailed, []byte(d.Err().Error())
		}
		unknown, err := n.leaderTouch(ids)
		if err != nil {
			return fail(err)
		}
		return statusOK, closeSessionsBody(unknown)
	case rpcValidate, rpcAttach:
		id := d.Int64()
		server := ""
		if d.Err() == nil && d.Len() > 0 {
			server = d.String()
		}
		if d.Err() != nil {
			return statusFailed, []byte(d.Err().Error())
		}
		ok, attach, err := n.leaderValidate(id, server)
		if err != nil {
			return fail(err)
		}
		var out []byte
		if ok {
			out = []byte{1}
		} else {
			out = []byte{0}
		}
		if kind == rpcAttach {
			out = binary.BigEndian.AppendUint64(out, attach)
		}
		return statusOK, out
	case rpcAddVoter:
		id, addr := d.String(), d.String()
		if d.Err() != nil {
			return statusFailed, []byte(d.Err().Error())
		}
		if err := n.leaderAddVoter(ctx, id, addr); err != nil {
			return fail(err)
		}
		return statusOK, nil
	case rpcRemoveServer:
		id := d.String()
		if d.Err() != nil {
			return statusFailed, []byte(d.Err().Error())
		}
		if err := n.leaderRemoveServer(ctx, id); err != nil {
			return fail(err)
		}
		return statusOK, nil
	case rpcTransfer:
		if err := n.leaderTransfer(); err != nil {
			return fail(err)
		}
		return statusOK, nil
	}
	return statusFailed, []byte(fmt.Sprintf("consensus: unknown rpc kind %d", kind))
}
