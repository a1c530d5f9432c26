//go:build !unix

package consensus

// diskFree is not known off Unix: segments keep raft-wal's default size.
func diskFree(string) (uint64, bool) { return 0, false }
