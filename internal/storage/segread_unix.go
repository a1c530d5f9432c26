//go:build unix

package storage

import (
	"os"

	"golang.org/x/sys/unix"
)

// readSegment returns a segment file's bytes, mapped rather than read into the heap, and the
// function that unmaps them; the bytes must not be used after it. A start-up check reads every
// segment (64 MiB each on a large volume), and reading them into the heap left the process with
// a heap goal, and a resident size, twice that long after it started. The server holds the data
// directory's lock meanwhile, so nothing shortens the file while it is mapped.
func readSegment(name string) ([]byte, func(), error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if st.Size() == 0 {
		return nil, func() {}, nil
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	_ = unix.Madvise(b, unix.MADV_SEQUENTIAL)
	return b, func() { _ = unix.Munmap(b) }, nil
}
