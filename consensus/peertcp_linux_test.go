package consensus

import (
	"context"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"
)

// tcpRecorder is the real TCP network, keeping every peer connection it dials or accepts.
type tcpRecorder struct {
	mu    sync.Mutex
	conns []recorded
}

type recorded struct {
	c        net.Conn
	accepted bool
}

func (r *tcpRecorder) keep(c net.Conn, accepted bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.conns = append(r.conns, recorded{c, accepted})
}

func (r *tcpRecorder) Listen(addr string) (net.Listener, error) {
	ln, err := TCPNetwork{}.Listen(addr)
	if err != nil {
		return nil, err
	}
	return recordingListener{ln, r}, nil
}

func (r *tcpRecorder) Dial(ctx context.Context, addr string) (net.Conn, error) {
	c, err := TCPNetwork{}.Dial(ctx, addr)
	if err == nil {
		r.keep(c, false)
	}
	return c, err
}

type recordingListener struct {
	net.Listener
	r *tcpRecorder
}

func (l recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.r.keep(c, true)
	}
	return c, err
}

// tcpRTOMaxMS is Linux's TCP_RTO_MAX_MS socket option; peerRTOMax is the cap, in milliseconds,
// internal/peernet sets on peer connections (tcp_linux.go).
const (
	tcpRTOMaxMS = 44
	peerRTOMax  = 1000
)

// Peer connections, dialled and accepted, retransmit at least every peerRTOMax, so a healed link
// carries the leader's pending request at once (internal/peernet/tcp_linux.go).
func TestPeerConnectionsCapRetransmitBackoff(t *testing.T) {
	nets := []*tcpRecorder{{}, {}}
	var lns []net.Listener
	var peers []Peer
	for i, r := range nets {
		ln, err := r.Listen("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		peers = append(peers, Peer{ID: []string{"a", "b"}[i], Addr: ln.Addr().String()})
	}
	var nodes []*Node
	for i, r := range nets {
		n, err := New(Config{ID: peers[i].ID, Dir: t.TempDir(), Listener: lns[i], Network: r, Peers: peers,
			Logger: testLogger(t), TickTime: 200 * time.Millisecond, HeartbeatTimeout: 600 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
		t.Cleanup(func() { _ = n.Shutdown() })
	}
	eventually(t, 20*time.Second, "a leader", func() bool { return nodes[0].IsLeader() || nodes[1].IsLeader() })

	var dialled, accepted int
	for _, r := range nets {
		r.mu.Lock()
		conns := append([]recorded(nil), r.conns...)
		r.mu.Unlock()
		for _, rc := range conns {
			c := rc.c
			raw, err := c.(*net.TCPConn).SyscallConn()
			if err != nil {
				t.Fatal(err)
			}
			var got int
			var gerr error
			if err := raw.Control(func(fd uintptr) {
				got, gerr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpRTOMaxMS)
			}); err != nil {
				continue // closed since
			}
			if gerr != nil {
				t.Skipf("this kernel has no TCP_RTO_MAX_MS: %v", gerr)
			}
			if got != peerRTOMax {
				t.Errorf("peer connection %v -> %v: TCP_RTO_MAX_MS %d; want %d", c.LocalAddr(), c.RemoteAddr(), got, peerRTOMax)
			}
			if rc.accepted {
				accepted++
			} else {
				dialled++
			}
		}
	}
	if dialled == 0 || accepted == 0 {
		t.Fatalf("checked %d dialled and %d accepted peer connections; want some of each", dialled, accepted)
	}
}
