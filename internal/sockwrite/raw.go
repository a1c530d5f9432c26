package sockwrite

import (
	"net"
	"syscall"
)

// RawConn returns c's socket for TryWrite, or nil when c is not a plain socket or the platform
// has no non-blocking writes.
func RawConn(c net.Conn) syscall.RawConn {
	sc, ok := c.(syscall.Conn)
	if !ok || !Supported {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}
