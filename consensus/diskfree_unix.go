//go:build unix

package consensus

import "golang.org/x/sys/unix"

// diskFree returns the bytes available to this process on the file system holding dir, and
// false if that cannot be read.
func diskFree(dir string) (uint64, bool) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return st.Bavail * uint64(st.Bsize), true
}
