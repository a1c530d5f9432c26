//go:build !unix

package sockwrite

import (
	"errors"
	"syscall"
)

// Supported says whether TryWrite works on this platform: not here, so callers leave every
// write to a goroutine that may wait.
const Supported = false

// TryWrite is not available on this platform.
func TryWrite(syscall.RawConn, []byte) (int, error) {
	return 0, errors.New("sockwrite: no non-blocking writes on this platform")
}
