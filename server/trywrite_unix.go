//go:build unix

package server

import "syscall"

// tryWriteSupported says whether tryWrite works on this platform.
const tryWriteSupported = true

// tryWrite writes as much of b to the socket as it takes without waiting and returns how much
// that was: on a full socket buffer it returns what was written so far, with no error, instead
// of waiting for room as net.Conn's Write does.
func tryWrite(rc syscall.RawConn, b []byte) (int, error) {
	var n int
	var werr error
	err := rc.Write(func(fd uintptr) bool {
		for n < len(b) {
			m, err := syscall.Write(int(fd), b[n:])
			if m > 0 {
				n += m
			}
			switch {
			case err == syscall.EINTR:
				continue
			case err == syscall.EAGAIN:
				return true
			case err != nil:
				werr = err
				return true
			case m <= 0:
				return true
			}
		}
		return true
	})
	if werr != nil {
		return n, werr
	}
	return n, err
}
