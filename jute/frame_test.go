package jute

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"time"
)

func TestReadFrameErrors(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		max  int
		err  error
	}{
		{"empty input", nil, 0, io.EOF},
		{"short length", []byte{0, 0}, 0, io.ErrUnexpectedEOF},
		{"short payload", be(5, "abc"), 0, io.ErrUnexpectedEOF},
		{"short payload beyond the first chunk", append(be(200000), make([]byte, 100000)...), 0, io.ErrUnexpectedEOF},
		{"negative length", be(-1, "abc"), 0, ErrNegativeLen},
		{"length over the maximum", be(11, "0123456789a"), 10, ErrTooLarge},
		{"length over the default maximum", be(DefaultMaxBuffer + 1), 0, ErrTooLarge},
		{"four-letter word", []byte("ruok"), 0, ErrTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := bytes.NewReader(tc.in)
			got, err := ReadFrame(r, nil, tc.max)
			if !errors.Is(err, tc.err) || got != nil {
				t.Fatalf("ReadFrame = %x, %v; want %v", got, err, tc.err)
			}
			if errors.Is(tc.err, ErrTooLarge) || errors.Is(tc.err, ErrNegativeLen) {
				if consumed := len(tc.in) - r.Len(); consumed != FrameHeaderLen {
					t.Errorf("read %d bytes before refusing; want only the length", consumed)
				}
			}
		})
	}
}

func TestReadFrameSizes(t *testing.T) {
	for _, n := range []int{0, 1, 100, frameChunk - 1, frameChunk, frameChunk + 1, 3*frameChunk + 7, DefaultMaxBuffer} {
		payload := make([]byte, n)
		for i := range payload {
			payload[i] = byte(i * 7)
		}
		in := append(be(n), payload...)
		got, err := ReadFrame(bytes.NewReader(in), nil, 0)
		if err != nil || !bytes.Equal(got, payload) {
			t.Fatalf("ReadFrame of %d bytes = %d bytes, %v", n, len(got), err)
		}
		// With a buffer that has room, the payload lands in it.
		buf := make([]byte, 0, n+10)
		got, err = ReadFrame(bytes.NewReader(in), buf, 0)
		if err != nil || !bytes.Equal(got, payload) || (n > 0 && &got[0] != &buf[:1][0]) {
			t.Fatalf("ReadFrame into a roomy buffer of %d bytes: %v, aliases %v", n, err, n > 0 && &got[0] == &buf[:1][0])
		}
	}
}

// stallReader announces a frame of n bytes, sends a few, then ends.
type stallReader struct {
	hdr  []byte
	sent int
}

func (s *stallReader) Read(p []byte) (int, error) {
	if len(s.hdr) > 0 {
		n := copy(p, s.hdr)
		s.hdr = s.hdr[n:]
		return n, nil
	}
	if s.sent >= 10 {
		return 0, io.EOF
	}
	n := min(len(p), 10-s.sent)
	s.sent += n
	return n, nil
}

// TestReadFrameMemoryFollowsInput checks that a peer announcing a huge frame and then hanging up
// does not make the reader allocate the announced size.
func TestReadFrameMemoryFollowsInput(t *testing.T) {
	const announced = 256 << 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := ReadFrame(&stallReader{hdr: be(announced)}, nil, announced)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v; want io.ErrUnexpectedEOF", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
		t.Errorf("allocated %d bytes for a frame that sent 10; want far less than %d", grew, announced)
	}
}

func TestAppendFrame(t *testing.T) {
	prefix := []byte("keep")
	req := &GetDataRequest{Path: "/n", Watch: true}
	out := AppendRequest(prefix, RequestHeader{Xid: 4, Type: OpGetData}, req)
	if string(out[:4]) != "keep" {
		t.Fatal("AppendRequest overwrote the prefix")
	}
	payload, err := ReadFrame(bytes.NewReader(out[4:]), nil, 0)
	if err != nil || len(payload) != 8+4+2+1 {
		t.Fatalf("frame payload %x, %v", payload, err)
	}
	// AppendFrame with a header and a nil body equals AppendRequest with a nil body.
	h := RequestHeader{Xid: -2, Type: OpPing}
	if a, b := AppendFrame(nil, &h, nil), AppendRequest(nil, h, nil); !bytes.Equal(a, b) || len(a) != 12 {
		t.Errorf("AppendFrame = %x; AppendRequest = %x", a, b)
	}
	// Two frames built back to back with BeginFrame/EndFrame.
	var e Encoder
	for _, x := range []int32{1, 2} {
		start := e.BeginFrame()
		(&RequestHeader{Xid: x, Type: OpWhoAmI}).Encode(&e)
		e.EndFrame(start)
	}
	fr := NewFrameReader(bytes.NewReader(e.Bytes()), 0)
	for _, want := range []int32{1, 2} {
		p, err := fr.Next()
		if err != nil {
			t.Fatal(err)
		}
		h, body, err := DecodeRequest(p, 0)
		if err != nil || h.Xid != want || h.Type != OpWhoAmI || body != nil {
			t.Fatalf("frame = %+v, %v, %v", h, body, err)
		}
	}
	if _, err := fr.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("after the last frame: %v; want io.EOF", err)
	}
}

// TestFrameReaderLoopback sends frames over real loopback TCP in awkward pieces (a length split
// across writes, several frames in one write, a large frame) and reads them back in order.
func TestFrameReaderLoopback(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	var stream []byte
	var want [][]byte
	for i, size := range []int{0, 5, 70000, 3, DefaultMaxBuffer - 20, 16} {
		body := bytes.Repeat([]byte{byte(i + 1)}, size)
		frame := AppendReply(nil, ReplyHeader{Xid: int32(i), Zxid: 1}, &SetSASLResponse{Token: body})
		want = append(want, frame[FrameHeaderLen:])
		stream = append(stream, frame...)
	}

	writeErr := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			writeErr <- err
			return
		}
		defer c.Close()
		// Pieces of 1, 2, 3, ... bytes at the start, then the rest in large writes.
		rest := stream
		for n := 1; n < 12 && len(rest) > 0; n++ {
			k := min(n, len(rest))
			if _, err := c.Write(rest[:k]); err != nil {
				writeErr <- err
				return
			}
			rest = rest[k:]
		}
		_, err = c.Write(rest)
		writeErr <- err
	}()

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	if peek, err := br.Peek(4); err != nil || !bytes.Equal(peek, stream[:4]) {
		t.Fatalf("Peek = %x, %v", peek, err)
	}
	fr := NewFrameReader(br, 0)
	for i, w := range want {
		got, err := fr.Next()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if !bytes.Equal(got, w) {
			t.Fatalf("frame %d: %d bytes differ from the %d sent", i, len(got), len(w))
		}
		h, body, err := DecodeReply(got, OpSASL, 0)
		if err != nil || h.Xid != int32(i) || len(body.(*SetSASLResponse).Token) != len(w)-20 {
			t.Fatalf("frame %d decodes to %+v, %v", i, h, err)
		}
	}
	if _, err := fr.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("after the last frame: %v; want io.EOF", err)
	}
	if err := <-writeErr; err != nil {
		t.Fatalf("writer: %v", err)
	}
	if cap(fr.buf) > DefaultMaxBuffer+1 {
		t.Errorf("reader kept a %d-byte buffer", cap(fr.buf))
	}
}

func TestFrameReaderReleasesLargeBuffers(t *testing.T) {
	var in []byte
	in = append(in, AppendFrame(nil, &SetSASLResponse{Token: make([]byte, 200<<10)})...)
	in = append(in, AppendFrame(nil, &SetSASLResponse{Token: make([]byte, 150<<10)})...)
	in = append(in, AppendFrame(nil, &SyncRequest{Path: "/x"})...)
	in = append(in, AppendFrame(nil, &SyncRequest{Path: "/y"})...)
	fr := NewFrameReader(bytes.NewReader(in), 0)
	first, err := fr.Next()
	if err != nil {
		t.Fatal(err)
	}
	// A second large frame reuses the first one's buffer.
	second, err := fr.Next()
	if err != nil || &second[0] != &first[0] {
		t.Errorf("a run of large frames does not reuse the buffer (err %v)", err)
	}
	if _, err := fr.Next(); err != nil {
		t.Fatal(err)
	}
	if cap(fr.buf) > retainedFrameBuffer {
		t.Errorf("after a small frame the reader holds %d bytes; want at most %d", cap(fr.buf), retainedFrameBuffer)
	}
	small := fr.buf[:1]
	p, err := fr.Next()
	if err != nil || &p[0] != &small[0] {
		t.Errorf("small frames do not reuse the buffer (err %v)", err)
	}
}

// Buffered says whether Next can return a frame from what was already read ahead: a whole frame
// yes; a partial one, a partial length, or a bad length no.
func TestFrameReaderBuffered(t *testing.T) {
	stream := append(append(be(3, "abc"), be(2, "de")...), be(5, "fg")...) // the last frame is cut short
	fr := NewFrameReader(bufio.NewReaderSize(bytes.NewReader(stream), 64), 10)
	if fr.Buffered() {
		t.Fatal("Buffered before anything was read")
	}
	for _, want := range []string{"abc", "de"} {
		f, err := fr.Next()
		if err != nil || string(f) != want {
			t.Fatalf("Next = %q, %v; want %q", f, err, want)
		}
		if got, wantBuf := fr.Buffered(), want == "abc"; got != wantBuf {
			t.Fatalf("Buffered after %q = %v; want %v", want, got, wantBuf)
		}
	}
	for _, in := range [][]byte{be(11, "0123456789a", 1, "x"), be(-1, "abc"), {0, 0}} {
		fr := NewFrameReader(bufio.NewReader(bytes.NewReader(in)), 10)
		_, _ = fr.r.Peek(len(in)) // read everything ahead
		if fr.Buffered() {
			t.Errorf("Buffered over %x; want false", in)
		}
	}
}
