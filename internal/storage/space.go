package storage

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

const (
	diskReserveName = "reserve"
	diskReserveSize = 1 << 20
	// DiskPoll is how often a full store looks at the free space again.
	DiskPoll = time.Second
	// DiskCheckBytes is how much is appended between two looks at the free space on the write
	// path.
	DiskCheckBytes = 256 << 10
)

// DiskNeed is the space a node needs to keep taking writes: a new segment and room for
// metadata and the reserve.
func DiskNeed(segSize int) uint64 { return uint64(segSize) + 2*diskReserveSize }

// IsStorageFault reports whether a failed write is the disk's trouble rather than the request's:
// no space, no quota, or an I/O error. The node treats them alike: it refuses client writes and
// waits for the disk rather than stepping down or electing itself over and over.
func IsStorageFault(err error) bool {
	return IsNoSpace(err) || errors.Is(err, syscall.EIO)
}

// IsNoSpace reports whether err is a full disk or an exhausted quota.
func IsNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// MakeReserve creates the reserve file in dir if it is missing and there is room.
func MakeReserve(dir string) {
	path := filepath.Join(dir, diskReserveName)
	if st, err := os.Stat(path); err == nil && st.Size() == diskReserveSize {
		return
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return
	}
	// Written, not truncated to size: a sparse file would free nothing.
	_, err = f.Write(make([]byte, diskReserveSize))
	if err == nil {
		err = f.Sync()
	}
	f.Close()
	if err != nil {
		os.Remove(path)
	}
}

// ReleaseReserve deletes the reserve file; it reports whether there was one.
func ReleaseReserve(dir string) bool {
	return os.Remove(filepath.Join(dir, diskReserveName)) == nil
}

// ErrStopped is returned by a write that waited for disk space when the store's quit channel
// closed.
var ErrStopped = errors.New("storage: stopped while waiting for disk space")
