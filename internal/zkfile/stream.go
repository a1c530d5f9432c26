package zkfile

import (
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

// readBuffer is the size of a reader's buffer.
const readBuffer = 256 << 10

// reader decodes jute's binary encoding from a stream through its own buffer, keeping the
// Adler-32 of every byte read, which is what ZooKeeper's snapshot seal checks, and the offset for
// error messages. The checksum is taken over whole consumed stretches of the buffer, not field by
// field: a snapshot of 10 M nodes has a hundred million fields.
type reader struct {
	r       io.Reader
	buf     []byte
	pos     int // next byte to hand out
	end     int // end of the buffered bytes
	sumFrom int // buf[sumFrom:pos] is consumed but not yet in sum
	sum     hash.Hash32
	off     int64 // bytes consumed
	tmp     [8]byte
}

func newReader(r io.Reader) *reader {
	return &reader{r: r, buf: make([]byte, readBuffer), sum: adler32.New()}
}

// sum32 returns the Adler-32 of every byte consumed so far.
func (r *reader) sum32() uint32 {
	r.sum.Write(r.buf[r.sumFrom:r.pos])
	r.sumFrom = r.pos
	return r.sum.Sum32()
}

// fill refills the buffer once it is all consumed. It fails only when no byte arrives: with
// io.ErrUnexpectedEOF at the end of the stream.
func (r *reader) fill() error {
	r.sum.Write(r.buf[r.sumFrom:r.pos])
	r.pos, r.end, r.sumFrom = 0, 0, 0
	for range 100 { // a reader that keeps returning nothing and no error counts as ended
		m, err := r.r.Read(r.buf)
		r.end = m
		if m > 0 {
			return nil
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return io.ErrUnexpectedEOF
}

// full reads len(b) bytes into b. At the end of the stream it fails with io.ErrUnexpectedEOF,
// having consumed what there was.
func (r *reader) full(b []byte) error {
	for len(b) > 0 {
		if r.pos == r.end {
			if err := r.fill(); err != nil {
				return err
			}
		}
		k := copy(b, r.buf[r.pos:r.end])
		r.pos += k
		r.off += int64(k)
		b = b[k:]
	}
	return nil
}

func (r *reader) int32() (int32, error) {
	if r.end-r.pos >= 4 {
		v := int32(binary.BigEndian.Uint32(r.buf[r.pos:]))
		r.pos += 4
		r.off += 4
		return v, nil
	}
	if err := r.full(r.tmp[:4]); err != nil {
		return 0, err
	}
	return int32(binary.BigEndian.Uint32(r.tmp[:4])), nil
}

func (r *reader) int64() (int64, error) {
	if r.end-r.pos >= 8 {
		v := int64(binary.BigEndian.Uint64(r.buf[r.pos:]))
		r.pos += 8
		r.off += 8
		return v, nil
	}
	if err := r.full(r.tmp[:8]); err != nil {
		return 0, err
	}
	return int64(binary.BigEndian.Uint64(r.tmp[:8])), nil
}

// length reads a jute length: -1 for null, else at most maxBuffer.
func (r *reader) length() (int, error) {
	n, err := r.int32()
	if err != nil {
		return 0, err
	}
	if n < -1 || n > maxBuffer {
		return 0, fmt.Errorf("bad length %d at offset %d", n, r.off-4)
	}
	return int(n), nil
}

// buffer reads a jute buffer: a length, -1 for null, then the bytes.
func (r *reader) buffer() ([]byte, error) {
	n, err := r.length()
	if err != nil || n == -1 {
		return nil, err
	}
	b := make([]byte, n)
	if err := r.full(b); err != nil {
		return nil, err
	}
	return b, nil
}

// string reads a jute string, a null one as "". A string that is in the buffer whole is copied
// from it once.
func (r *reader) string() (string, error) {
	n, err := r.length()
	if err != nil || n <= 0 {
		return "", err
	}
	if r.end-r.pos >= n {
		s := string(r.buf[r.pos : r.pos+n])
		r.pos += n
		r.off += int64(n)
		return s, nil
	}
	b := make([]byte, n)
	if err := r.full(b); err != nil {
		return "", err
	}
	return string(b), nil
}
