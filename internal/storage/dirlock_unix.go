//go:build unix

package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDir takes an exclusive advisory lock on dir/LOCK, so a second server (or a second Node in
// the same process) refuses a data directory in use instead of corrupting or waiting on it.
// Closing the returned file releases the lock; so does the process exiting.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("consensus: lock data dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("consensus: data dir %s is in use by another server", dir)
		}
		return nil, fmt.Errorf("consensus: lock data dir: %w", err)
	}
	return f, nil
}
