package server

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/zkd-io/zkd/jute"
)

// chunked returns the stream's bytes in reads of random sizes, as a socket does.
type chunked struct {
	b   []byte
	rnd *rand.Rand
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(c.b), 1+c.rnd.IntN(3*readBufSize))
	copy(p, c.b[:n])
	c.b = c.b[n:]
	return n, nil
}

// Whatever mix of reads, peeks and discards a connection makes, in whatever chunks the stream
// arrives, it reads the stream's bytes in order, and holds no borrowed buffer once it has read
// all there was.
func TestConnReaderReadsTheStream(t *testing.T) {
	var pool sync.Pool
	for seed := range uint64(200) {
		rnd := rand.New(rand.NewPCG(seed, 7))
		want := make([]byte, rnd.IntN(64<<10))
		for i := range want {
			want[i] = byte(rnd.Uint32())
		}
		var l connReader
		l.reset(&chunked{b: want, rnd: rnd}, &pool)
		var got []byte
		for {
			var err error
			switch rnd.IntN(3) {
			case 0:
				p := make([]byte, 1+rnd.IntN(2*readBufSize))
				var n int
				n, err = l.Read(p)
				got = append(got, p[:n]...)
			case 1:
				n := 1 + rnd.IntN(readBufSize)
				var p []byte
				p, err = l.Peek(n)
				if err == nil && len(p) != n {
					t.Fatalf("seed %d: Peek(%d) gave %d bytes", seed, n, len(p))
				}
				if !bytes.Equal(p, want[len(got):len(got)+len(p)]) {
					t.Fatalf("seed %d: Peek at %d gave other bytes than the stream's", seed, len(got))
				}
			case 2:
				if _, err = l.Peek(1); err == nil {
					k := l.Discard(1 + rnd.IntN(l.Buffered()))
					got = append(got, want[len(got):len(got)+k]...)
				}
			}
			if errors.Is(err, io.EOF) && l.Buffered() == 0 {
				break
			}
			if errors.Is(err, io.EOF) {
				continue // the bytes read ahead come first
			}
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("seed %d: read %d bytes, not the stream's %d", seed, len(got), len(want))
		}
		if l.big != nil {
			t.Fatalf("seed %d: a buffer is still borrowed at the end of the stream", seed)
		}
	}
}

// A read that returns bytes with an error gives the bytes first, then the error.
func TestConnReaderHoldsBackAnErrorWithData(t *testing.T) {
	var l connReader
	l.reset(iotest.DataErrReader(bytes.NewReader([]byte("ruok"))), &sync.Pool{})
	got, err := io.ReadAll(&l)
	if err != nil || string(got) != "ruok" {
		t.Fatalf("read %q, %v; want ruok and a clean end", got, err)
	}
}

// An idle connection holds no read buffer: a client that sends one request at a time is read
// through the small array, a pipelined burst through a borrowed buffer that is given back once the
// burst is read. (Whether the pool then holds it is the pool's business: under -race sync.Pool
// drops a share of what it is given.)
func TestConnReaderBorrowsOnlyForABurst(t *testing.T) {
	var pool sync.Pool
	srv, cli := net.Pipe()
	t.Cleanup(func() { _ = srv.Close(); _ = cli.Close() })
	var l connReader
	l.reset(srv, &pool)
	fr := jute.NewFrameReader(&l, 0)
	frame := func(size int) []byte {
		return jute.AppendFrame(nil, &jute.SetDataRequest{Path: "/a", Data: make([]byte, size), Version: -1})
	}
	send := func(b []byte) {
		go func() { _, _ = cli.Write(b) }()
	}
	next := func() {
		t.Helper()
		if _, err := fr.Next(); err != nil {
			t.Fatal(err)
		}
	}

	send(frame(100))
	next()
	if l.big != nil {
		t.Fatal("a request smaller than the small array borrowed a buffer")
	}
	send(frame(3000)) // larger than the small array: its rest is read straight into the frame
	next()
	if l.big != nil {
		t.Fatal("a single large request left a buffer borrowed")
	}
	var burst []byte
	for range 40 {
		burst = append(burst, frame(100)...)
	}
	send(burst) // net.Pipe hands the reader the whole write, as a socket would a pipelined burst
	borrowed := false
	for range 40 {
		next()
		borrowed = borrowed || l.big != nil
	}
	if !borrowed {
		t.Fatal("a pipelined burst was read through the small array")
	}
	if l.big != nil {
		t.Fatal("the connection kept the buffer after the burst")
	}
}
