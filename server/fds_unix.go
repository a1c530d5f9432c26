//go:build unix

package server

import "syscall"

// maxFDs returns the process's file descriptor limit.
func maxFDs() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0
	}
	return r.Cur
}
