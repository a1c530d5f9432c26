package zktest

import (
	"net"
	"testing"
)

// TCPPair returns the two ends of a loopback TCP connection, closed when the test ends: for
// code that behaves differently on a real socket (writes that do not wait) than on net.Pipe.
func TCPPair(t testing.TB) (accepted, dialed net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		ch <- c
	}()
	dialed, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	accepted = <-ch
	if accepted == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { accepted.Close(); dialed.Close() })
	return accepted, dialed
}
