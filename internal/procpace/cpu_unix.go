//go:build unix

package procpace

import (
	"syscall"
	"time"
)

// selfProcess is this process, its CPU time read with getrusage.
func selfProcess() (process, bool) {
	if _, err := rusageCPU(); err != nil {
		return nil, false
	}
	return runtimeProcs{cpuTime: func() time.Duration {
		d, _ := rusageCPU()
		return d
	}}, true
}

// rusageCPU is the user and system CPU time of every thread of the process so far.
func rusageCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
