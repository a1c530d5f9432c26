package jute

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
)

// FrameHeaderLen is the size of a frame's length prefix.
const FrameHeaderLen = 4

// retainedFrameBuffer is the largest buffer a FrameReader keeps for frames that fit in it. A
// connection that sent a run of large frames reuses one buffer for the run (a client writing large
// values would otherwise allocate, clear and regrow a buffer per frame) and gives it back at the
// first frame that fits in this size, instead of holding up to the maximum forever.
const retainedFrameBuffer = 64 << 10

// ReadFrame reads one frame from r: a 4-byte big-endian signed length, then that many bytes. It
// returns the payload, stored in buf when buf has room (the result then aliases buf) and otherwise
// in a new slice grown as the bytes arrive. A length below zero or above maxLen (zero or negative
// means DefaultMaxBuffer) is refused before anything is allocated, with an error wrapping
// ErrNegativeLen or ErrTooLarge.
// A clean end of input before the length gives io.EOF; an end inside the frame gives
// io.ErrUnexpectedEOF.
func ReadFrame(r io.Reader, buf []byte, maxLen int) ([]byte, error) {
	return readFrame(r, make([]byte, FrameHeaderLen), buf, maxLen)
}

// readFrame is ReadFrame with a caller-supplied 4-byte scratch slice for the length, so that a
// FrameReader reads frames without allocating.
func readFrame(r io.Reader, hdr, buf []byte, maxLen int) ([]byte, error) {
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, err
	}
	n, err := frameLen(hdr, maxLen)
	if err != nil {
		return nil, err
	}
	return readBody(r, n, buf)
}

// readBody reads a frame's n payload bytes, into buf when it has room.
func readBody(r io.Reader, n int, buf []byte) ([]byte, error) {
	if cap(buf) >= n {
		buf = buf[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, unexpected(err)
		}
		return buf, nil
	}
	// Grow the buffer as bytes arrive, so that a peer which announces a large frame and then
	// stalls or hangs up holds memory in proportion to what it actually sent.
	buf = buf[:0]
	for len(buf) < n {
		chunk := min(n-len(buf), max(len(buf), frameChunk))
		buf = slices.Grow(buf, chunk)
		m, err := io.ReadFull(r, buf[len(buf):len(buf)+chunk])
		buf = buf[:len(buf)+m]
		if err != nil {
			return nil, unexpected(err)
		}
	}
	return buf, nil
}

// frameChunk is the first allocation for a frame that does not fit the caller's buffer.
const frameChunk = 32 << 10

// unexpected turns io.EOF inside a frame into io.ErrUnexpectedEOF.
func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// frameLen checks a frame length prefix against maxLen.
func frameLen(hdr []byte, maxLen int) (int, error) {
	if maxLen <= 0 {
		maxLen = DefaultMaxBuffer
	}
	n := int32(binary.BigEndian.Uint32(hdr))
	if n < 0 {
		return 0, fmt.Errorf("jute: frame length %d: %w", n, ErrNegativeLen)
	}
	if int(n) > maxLen {
		return 0, fmt.Errorf("jute: frame length %d > %d: %w", n, maxLen, ErrTooLarge)
	}
	return int(n), nil
}

// BufferedReader is a stream that reads ahead, which a FrameReader can look into without
// reading further; *bufio.Reader is one.
type BufferedReader interface {
	io.Reader
	// Buffered returns how many bytes are read ahead.
	Buffered() int
	// Peek returns the next n bytes without consuming them.
	Peek(n int) ([]byte, error)
}

// FrameReader reads successive frames from one stream, reusing one buffer. It is not safe for
// concurrent use: a connection has one reader goroutine that owns it.
type FrameReader struct {
	r   BufferedReader
	hdr [FrameHeaderLen]byte
	buf []byte
	max int
}

// NewFrameReader returns a FrameReader over r that refuses frames longer than maxLen (zero or
// negative means DefaultMaxBuffer). If r is already a BufferedReader it is used as is, so a caller
// may Peek at the first bytes (for a four-letter word) before handing it over.
func NewFrameReader(r io.Reader, maxLen int) *FrameReader {
	br, ok := r.(BufferedReader)
	if !ok {
		br = bufio.NewReader(r)
	}
	if maxLen <= 0 {
		maxLen = DefaultMaxBuffer
	}
	return &FrameReader{r: br, max: maxLen}
}

// Next reads the next frame and returns its payload. The slice is valid only until the next call
// to Next; copy what must outlive it (record decoders already copy buffers and strings). Errors are
// as for ReadFrame.
func (fr *FrameReader) Next() ([]byte, error) {
	if _, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
		return nil, err
	}
	n, err := frameLen(fr.hdr[:], fr.max)
	if err != nil {
		return nil, err
	}
	if cap(fr.buf) > retainedFrameBuffer && n <= retainedFrameBuffer {
		fr.buf = nil // the run of large frames ended
	}
	b, err := readBody(fr.r, n, fr.buf)
	if err != nil {
		return nil, err
	}
	fr.buf = b[:0]
	return b, nil
}

// Buffered reports whether a whole frame has already been read ahead, so that Next returns it
// without reading from the stream. A frame with a bad length counts as not buffered: Next
// reports it.
func (fr *FrameReader) Buffered() bool {
	have := fr.r.Buffered()
	if have < FrameHeaderLen {
		return false
	}
	hdr, err := fr.r.Peek(FrameHeaderLen)
	if err != nil {
		return false
	}
	n, err := frameLen(hdr, fr.max)
	return err == nil && have-FrameHeaderLen >= n
}

// BeginFrame appends a 4-byte length placeholder and returns its offset, to be passed to EndFrame
// once the frame's records are encoded.
func (e *Encoder) BeginFrame() int {
	start := len(e.buf)
	e.buf = append(e.buf, 0, 0, 0, 0)
	return start
}

// EndFrame writes the length of the frame begun at start (the bytes encoded since BeginFrame,
// less the prefix itself) into its placeholder.
func (e *Encoder) EndFrame(start int) {
	binary.BigEndian.PutUint32(e.buf[start:], uint32(len(e.buf)-start-FrameHeaderLen))
}

// AppendFrame appends one frame holding recs, in order, to buf. Nil records are skipped, so a
// header with no body can be written as AppendFrame(buf, &hdr, nil).
func AppendFrame(buf []byte, recs ...Record) []byte {
	e := Encoder{buf: buf}
	start := e.BeginFrame()
	for _, r := range recs {
		if r != nil {
			r.Encode(&e)
		}
	}
	e.EndFrame(start)
	return e.buf
}

// AppendRequest appends a request frame (header, then body unless body is nil) to buf.
func AppendRequest(buf []byte, h RequestHeader, body Record) []byte {
	e := Encoder{buf: buf}
	start := e.BeginFrame()
	h.Encode(&e)
	if body != nil {
		body.Encode(&e)
	}
	e.EndFrame(start)
	return e.buf
}

// AppendReply appends a reply frame (header, then body unless body is nil) to buf. The caller
// passes a nil body for error replies, which are header-only.
func AppendReply(buf []byte, h ReplyHeader, body Record) []byte {
	e := Encoder{buf: buf}
	start := e.BeginFrame()
	h.Encode(&e)
	if body != nil {
		body.Encode(&e)
	}
	e.EndFrame(start)
	return e.buf
}
