//go:build !unix

package server

import (
	"errors"
	"syscall"
)

// inlineWrites says whether the executor may write its replies itself (flush): not here, so the
// writer writes everything.
const inlineWrites = false

func tryWrite(syscall.RawConn, []byte) (int, error) {
	return 0, errors.New("server: no inline writes on this platform")
}
