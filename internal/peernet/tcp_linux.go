package peernet

import (
	"net"
	"syscall"
)

// tcpRTOMaxMS is Linux's TCP_RTO_MAX_MS socket option (since 6.15): the longest a connection
// waits before it retransmits unacknowledged data again. golang.org/x/sys does not name it yet.
const tcpRTOMaxMS = 44

// peerRTOMax caps the retransmission backoff of peer connections, in milliseconds.
//
// Linux doubles the wait before each retransmission up to two minutes. Raft keeps its peer
// connections open, so after a partition of 8 s the leader's last AppendEntries waits in a
// connection whose next retransmission is still seconds away (the chaos suite measured up to 2.9
// s from the heal until the cut-off follower served again; ZooKeeper, which reconnects, 0.1 s).
// With the cap, the connection retries at least every second, so a healed link carries the
// request within a second. Peers are few and a retransmission a second is no load.
const peerRTOMax = 1000

// Tune sets the peer options on c's socket when it has one (tests' in-memory networks
// have none). A kernel without the option keeps its default backoff; that only costs time.
func Tune(c net.Conn) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpRTOMaxMS, peerRTOMax)
	})
}
