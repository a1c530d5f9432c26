package server

// Writing to a socket without waiting: the reader, which must never block on a client that does
// not read, writes what the socket takes at once and leaves the rest to the writer goroutine,
// which may wait. A TLS connection or any other wrapper has no plain socket, and all its writes
// go through the writer.

import (
	"net"
	"syscall"
)

// rawConn returns c's socket for tryWrite, or nil when c is not a plain socket or the platform
// has no non-blocking writes.
func rawConn(c net.Conn) syscall.RawConn {
	sc, ok := c.(syscall.Conn)
	if !ok || !tryWriteSupported {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}
