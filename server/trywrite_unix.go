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

// writeStreamWait writes what is left of s to the socket, waiting for room whenever the socket
// buffer is full. A chunk is encoded only while the socket takes bytes, and its buffer is given
// back before each wait, so a stream that waits for its client holds no reply bytes. It returns
// the bytes written; the socket's write deadline bounds the waits.
func writeStreamWait(rc syscall.RawConn, s outStream) (int, error) {
	var n int
	var werr error
	err := rc.Write(func(fd uintptr) bool {
		bp := streamBufs.Get().(*[]byte)
		defer streamBufs.Put(bp)
		for s.remaining() > 0 {
			chunk := s.next((*bp)[:0], streamChunk)
			m, err := syscall.Write(int(fd), chunk)
			if m > 0 {
				s.advance(m)
				n += m
			}
			switch {
			case err == syscall.EINTR:
			case err == syscall.EAGAIN:
				return false // wait for room
			case err != nil:
				werr = err
				return true
			case m <= 0:
				werr = syscall.EIO
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
