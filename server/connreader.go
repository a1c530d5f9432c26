package server

import (
	"bufio"
	"io"
	"sync"
)

// readBufSize is the read buffer a connection borrows while the stream gives it more than
// smallRead bytes at once: room for dozens of pipelined requests of usual size per read. A frame
// larger than it is read straight into its own buffer.
const readBufSize = 4 << 10

// smallRead is what a connection reads into while nothing suggests more is coming: a usual
// request whole (a ping is 12 bytes, a setData of 128 bytes about 180), and all an idle
// connection holds while it waits for its next one.
const smallRead = 512

// connReader is a connection's buffered reader, holding a full buffer only while the stream
// fills one. It reads into a small array of its own; when a read fills that array (a client
// pipelining requests) or a Peek wants more than it holds, it borrows a readBufSize buffer from
// the server's pool, and gives it back as soon as the bytes in it are consumed and the last read
// did not fill it. An idle connection, waiting for its next request, so holds smallRead bytes rather
// than a whole buffer: with thousands of idle sessions, their read buffers were most of the heap
// the sessions held. It does what the connection needs of a bufio.Reader (jute.BufferedReader,
// and Discard of read-ahead bytes). Only the connection's reader goroutine uses it.
type connReader struct {
	rd   io.Reader
	pool *sync.Pool // of *[readBufSize]byte
	big  *[readBufSize]byte
	r, w int // buf()[r:w] is read ahead
	// more is set when the last read filled the buffer: the stream likely has more at once.
	more bool
	// err is a read's error held back until the bytes that came with it are consumed.
	err   error
	small [smallRead]byte
}

// reset makes l read rd with buffers from pool, dropping what was read ahead.
func (l *connReader) reset(rd io.Reader, pool *sync.Pool) {
	l.release()
	*l = connReader{rd: rd, pool: pool}
}

// release gives a borrowed buffer back, with whatever is read ahead in it: call it when the
// connection no longer reads.
func (l *connReader) release() {
	if l.big != nil {
		l.pool.Put(l.big)
		l.big = nil
		l.r, l.w = 0, 0
	}
}

func (l *connReader) buf() []byte {
	if l.big != nil {
		return l.big[:]
	}
	return l.small[:]
}

// Buffered returns how many bytes are read ahead.
func (l *connReader) Buffered() int { return l.w - l.r }

// Size is the most bytes l reads ahead.
func (l *connReader) Size() int { return readBufSize }

// fill reads the stream once, after what is read ahead, into a buffer with room for need bytes
// in all.
func (l *connReader) fill(need int) error {
	if err := l.err; err != nil {
		l.err = nil
		return err
	}
	b := l.buf()
	if l.r == l.w {
		l.r, l.w = 0, 0
	} else if l.r > 0 {
		copy(b, b[l.r:l.w])
		l.w -= l.r
		l.r = 0
	}
	if l.big == nil && (l.more || need > smallRead) {
		if p, ok := l.pool.Get().(*[readBufSize]byte); ok {
			l.big = p
		} else {
			l.big = new([readBufSize]byte)
		}
		copy(l.big[:], l.small[:l.w])
	}
	b = l.buf()
	n, err := l.rd.Read(b[l.w:])
	l.w += n
	l.more = n > 0 && l.w == len(b)
	l.drained()
	switch {
	case n > 0:
		l.err = err
		return nil
	case err == nil:
		return io.ErrNoProgress
	}
	return err
}

// Read reads what is read ahead, or else reads the stream once: straight into p when p is larger
// than the small array and nothing suggests more is coming, as bufio.Reader does for a read as
// large as its buffer.
func (l *connReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if l.r == l.w {
		if l.err == nil && !l.more && len(p) > smallRead {
			l.release()
			return l.rd.Read(p)
		}
		if err := l.fill(1); err != nil {
			return 0, err
		}
	}
	n := copy(p, l.buf()[l.r:l.w])
	l.r += n
	l.drained()
	return n, nil
}

// drained gives the borrowed buffer back once nothing is read ahead in it and the last read did
// not fill it.
func (l *connReader) drained() {
	if l.r == l.w && !l.more {
		l.release()
	}
}

// Peek returns the next n bytes without consuming them, reading the stream until it has them; n
// is at most readBufSize.
func (l *connReader) Peek(n int) ([]byte, error) {
	if n > readBufSize {
		return nil, bufio.ErrBufferFull
	}
	for l.w-l.r < n {
		if err := l.fill(n); err != nil {
			return l.buf()[l.r:l.w], err
		}
	}
	return l.buf()[l.r : l.r+n], nil
}

// Discard skips n bytes of those read ahead (after a Peek).
func (l *connReader) Discard(n int) int {
	n = min(n, l.w-l.r)
	l.r += n
	l.drained()
	return n
}
