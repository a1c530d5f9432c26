//go:build !unix

package storage

// DiskFree is not known off Unix: segments keep raft-wal's default size.
func DiskFree(string) (uint64, bool) { return 0, false }
