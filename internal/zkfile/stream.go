package zkfile

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/adler32"
	"io"
)

// maxBuffer bounds a single buffer or string in a ZooKeeper file. ZooKeeper's own limit is
// jute.maxbuffer (1 MiB by default) plus slack; a length beyond this is damage, not data.
const maxBuffer = 64 << 20

// reader decodes jute's binary encoding from a stream, keeping the Adler-32 of every byte read,
// which is what ZooKeeper's snapshot seal checks, and the offset for error messages.
type reader struct {
	r   *bufio.Reader
	sum hash.Hash32
	off int64
	buf [8]byte
}

func newReader(r io.Reader) *reader {
	return &reader{r: bufio.NewReaderSize(r, 1<<16), sum: adler32.New()}
}

func (r *reader) full(b []byte) error {
	n, err := io.ReadFull(r.r, b)
	r.sum.Write(b[:n])
	r.off += int64(n)
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || (errors.Is(err, io.EOF) && n == 0) {
			return io.ErrUnexpectedEOF
		}
		return err
	}
	return nil
}

func (r *reader) int32() (int32, error) {
	if err := r.full(r.buf[:4]); err != nil {
		return 0, err
	}
	return int32(binary.BigEndian.Uint32(r.buf[:4])), nil
}

func (r *reader) int64() (int64, error) {
	if err := r.full(r.buf[:8]); err != nil {
		return 0, err
	}
	return int64(binary.BigEndian.Uint64(r.buf[:8])), nil
}

// buffer reads a jute buffer: a length, -1 for null, then the bytes.
func (r *reader) buffer() ([]byte, error) {
	n, err := r.int32()
	if err != nil {
		return nil, err
	}
	if n == -1 {
		return nil, nil
	}
	if n < 0 || n > maxBuffer {
		return nil, fmt.Errorf("bad length %d at offset %d", n, r.off-4)
	}
	b := make([]byte, n)
	if err := r.full(b); err != nil {
		return nil, err
	}
	return b, nil
}

func (r *reader) string() (string, error) {
	b, err := r.buffer()
	return string(b), err
}
