//go:build linux

package server

import (
	"net"
	"syscall"
	"testing"
)

// Client connections get no TCP keep-alive unless clientTcpKeepAlive asks for it, as in
// ZooKeeper (Go's listeners turn it on by default); both listeners follow the setting.
func TestClientTCPKeepAlive(t *testing.T) {
	for _, on := range []bool{false, true} {
		s := &Server{cfg: Config{Addr: "127.0.0.1:0", SecureAddr: "127.0.0.1:0", ClientTCPKeepAlive: on}}
		if err := s.listen(); err != nil {
			t.Fatal(err)
		}
		for _, ln := range []net.Listener{s.ln, s.secureLn} {
			d, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			c, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			if ka, err := syscallInt(c, syscall.SOL_SOCKET, syscall.SO_KEEPALIVE); err != nil || (ka != 0) != on {
				t.Errorf("ClientTCPKeepAlive %v: accepted connection has SO_KEEPALIVE %d (%v)", on, ka, err)
			}
			if nd, err := syscallInt(c, syscall.IPPROTO_TCP, syscall.TCP_NODELAY); err != nil || nd == 0 {
				t.Errorf("accepted connection has TCP_NODELAY %d (%v), want it on", nd, err)
			}
			c.Close()
			d.Close()
		}
		s.closeListeners()
	}
}

// syscallInt reads an integer socket option of a TCP connection.
func syscallInt(c net.Conn, level, opt int) (int, error) {
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		return 0, err
	}
	var v int
	var gerr error
	if err := rc.Control(func(fd uintptr) { v, gerr = syscall.GetsockoptInt(int(fd), level, opt) }); err != nil {
		return 0, err
	}
	return v, gerr
}
