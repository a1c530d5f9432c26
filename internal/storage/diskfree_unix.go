//go:build unix

package storage

import "golang.org/x/sys/unix"

// DiskFree returns the bytes available to this process on the file system holding dir, and
// false if that cannot be read. A file system out of inodes (fewer than minFreeInodes) has no
// space either: a new segment or metadata file could not be created. (File systems that report
// no inode count at all, such as btrfs, are judged by bytes alone.)
func DiskFree(dir string) (uint64, bool) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, false
	}
	if st.Files > 0 && st.Ffree < minFreeInodes {
		return 0, true
	}
	return st.Bavail * uint64(st.Bsize), true
}

const minFreeInodes = 16
