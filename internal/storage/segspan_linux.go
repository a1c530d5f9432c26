package storage

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// dataSpans returns the ranges of the file's first size bytes, from off on, that may hold data,
// as lseek's SEEK_DATA and SEEK_HOLE tell them: the rest are holes, which read as zeros. A
// segment raft-wal preallocated is a hole (an unwritten extent) past what was written or zeroed
// into it, and reading that part would only make the kernel fill page after page with zeros. A
// file system that cannot tell reports everything as data.
func dataSpans(name string, off, size int64) ([][2]int64, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fd := int(f.Fd())
	var spans [][2]int64
	for off < size {
		start, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // nothing but holes past off
		}
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
			return [][2]int64{{off, size}}, nil
		}
		if err != nil {
			return nil, err
		}
		if start >= size {
			break
		}
		end, err := unix.Seek(fd, start, unix.SEEK_HOLE)
		if err != nil {
			return nil, err
		}
		spans = append(spans, [2]int64{start, min(end, size)})
		off = end
	}
	return spans, nil
}
