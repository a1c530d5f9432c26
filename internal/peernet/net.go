package peernet

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/zkd-io/zkd/internal/third_party/raft"
)

// Network opens the peer listener and dials peers. Both Raft and the cluster RPC use it, so a
// fault-injecting implementation (tests) affects both alike.
type Network interface {
	// Listen opens a listener on addr.
	Listen(addr string) (net.Listener, error)
	// Dial connects to a peer's address.
	Dial(ctx context.Context, addr string) (net.Conn, error)
}

// TCPNetwork is the default Network: plain TCP.
type TCPNetwork struct{}

// Listen listens on TCP addr.
func (TCPNetwork) Listen(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }

// Dial dials TCP addr.
func (TCPNetwork) Dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// LogEvery is how often a peer that stays unreachable, or keeps being refused, is logged again.
const LogEvery = time.Minute

// DialTimeout bounds each dial of a peer.
const DialTimeout = time.Second

// The first byte of every peer connection selects what follows.
const (
	ConnRaft byte = 0x01 // hashicorp/raft's NetworkTransport protocol
	ConnRPC  byte = 0x02 // the cluster RPC (rpc.go)
)

// HandshakeTimeout bounds how long an accepted connection may take to send its first byte, and
// with TLS to complete the handshake and send the connection type.
const HandshakeTimeout = 5 * time.Second

var ErrLayerClosed = errors.New("consensus: peer listener closed")

// StreamLayer is raft's StreamLayer over the shared peer port: Accept returns the connections the
// mux handed over; Dial (through the dial function it is given, which adds TLS when configured)
// sends the Raft
// byte first.
type StreamLayer struct {
	addr  net.Addr
	dial  func(ctx context.Context, addr string, kind byte) (net.Conn, error) // Node.dialPeer
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

var _ raft.StreamLayer = (*StreamLayer)(nil)

// NewStreamLayer returns the layer for the peer port at addr; dial dials a peer and sends the
// connection type byte.
func NewStreamLayer(addr net.Addr, dial func(ctx context.Context, addr string, kind byte) (net.Conn, error)) *StreamLayer {
	return &StreamLayer{addr: addr, dial: dial, conns: make(chan net.Conn), done: make(chan struct{})}
}

// Handoff passes an accepted Raft connection to Accept, or closes it if the layer is closed.
func (s *StreamLayer) Handoff(c net.Conn) {
	select {
	case s.conns <- c:
	case <-s.done:
		c.Close()
	}
}

func (s *StreamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.conns:
		return c, nil
	case <-s.done:
		return nil, ErrLayerClosed
	}
}

func (s *StreamLayer) Close() error {
	s.once.Do(func() { close(s.done) })
	return nil
}

func (s *StreamLayer) Addr() net.Addr { return s.addr }

// Dial connects to a peer's Raft transport. Each dial is bounded by DialTimeout (less if raft
// asks for less): raft dials again soon after a failure, and retryTransport keeps dialling a
// follower that cannot be reached, so a short bound only makes a healed partition noticed sooner.
// A failed dial is a DialError: nothing was sent.
func (s *StreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), min(timeout, DialTimeout))
	defer cancel()
	select {
	case <-s.done:
		return nil, DialError{ErrLayerClosed}
	default:
	}
	c, err := s.dial(ctx, string(address), ConnRaft)
	if err != nil {
		return nil, DialError{err}
	}
	return c, nil
}

// DialError marks a dial that failed before anything was sent.
type DialError struct{ error }

func (e DialError) Unwrap() error { return e.error }
