//go:build !unix

package server

import (
	"errors"
	"syscall"
)

// tryWriteSupported says whether tryWrite works on this platform: not here, so callers leave every
// write to a goroutine that may wait.
const tryWriteSupported = false

// tryWrite is not available on this platform.
func tryWrite(syscall.RawConn, []byte) (int, error) {
	return 0, errors.New("server: no non-blocking writes on this platform")
}

// writeStreamWait is not available on this platform (rawConn returns nil, so it is not called).
func writeStreamWait(syscall.RawConn, outStream) (int, error) {
	return 0, errors.New("server: no non-blocking writes on this platform")
}
