package memnet

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// dialPair returns both ends of a fresh connection on n.
func dialPair(t *testing.T, n *Net) (client, server net.Conn) {
	t.Helper()
	ln, err := n.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	client, err = n.Dial(context.Background(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

func TestAddresses(t *testing.T) {
	n := New()
	a, err := n.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b, err := n.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if a.Addr().String() == b.Addr().String() || a.Addr().Network() != Network {
		t.Fatalf("addresses %v and %v", a.Addr(), b.Addr())
	}
	if _, err := n.Listen(a.Addr().String()); !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("listen on an address in use = %v; want EADDRINUSE", err)
	}
	if _, err := n.Listen("nonsense"); err == nil {
		t.Fatal("listen on a malformed address succeeded")
	}
	a.Close()
	if _, err := n.Dial(context.Background(), a.Addr().String()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial of a closed listener = %v; want ECONNREFUSED", err)
	}
	if _, err := n.Dial(context.Background(), "127.0.0.1:1"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial of an unknown address = %v; want ECONNREFUSED", err)
	}
	again, err := n.Listen(a.Addr().String())
	if err != nil {
		t.Fatalf("listen again on a closed listener's address: %v", err)
	}
	again.Close()
	b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := n.Dial(ctx, b.Addr().String()); !errors.Is(err, context.Canceled) {
		t.Fatalf("dial with a cancelled context = %v", err)
	}
}

// Writes do not wait for the reader until the buffer is full: a pipelined writer runs ahead.
func TestBufferedFullDuplex(t *testing.T) {
	c, s := dialPair(t, New())
	for _, w := range []net.Conn{c, s} {
		if _, err := w.Write([]byte("hello")); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(" world")); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []net.Conn{s, c} {
		got := make([]byte, 11)
		if _, err := io.ReadFull(r, got); err != nil || string(got) != "hello world" {
			t.Fatalf("read %q, %v", got, err)
		}
	}
	// More than the buffer: the writer blocks until the reader drains.
	big := bytes.Repeat([]byte("x"), 3*BufferSize+7)
	done := make(chan error, 1)
	go func() { _, err := c.Write(big); done <- err }()
	got, err := io.ReadAll(io.LimitReader(s, int64(len(big))))
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("read %d bytes, %v", len(got), err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestCloseLikeTCP(t *testing.T) {
	c, s := dialPair(t, New())
	if _, err := c.Write([]byte("last words")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	got, err := io.ReadAll(s)
	if err != nil || string(got) != "last words" {
		t.Fatalf("after the peer closed: read %q, %v; want the bytes, then EOF", got, err)
	}
	if _, err := s.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("write to a closed peer = %v; want EPIPE", err)
	}
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read on a closed conn = %v; want net.ErrClosed", err)
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write on a closed conn = %v; want net.ErrClosed", err)
	}
	if err := c.Close(); err == nil {
		t.Fatal("a second Close succeeded")
	}

	// Close unblocks a Read and a Write of the same end.
	synctest.Test(t, func(t *testing.T) {
		_, s2 := dialPair(t, New())
		errs := make(chan error, 2)
		go func() { _, err := s2.Read(make([]byte, 1)); errs <- err }()
		go func() { _, err := s2.Write(make([]byte, 2*BufferSize)); errs <- err }()
		synctest.Wait() // both blocked
		s2.Close()
		for range 2 {
			if err := <-errs; !errors.Is(err, net.ErrClosed) {
				t.Fatalf("blocked call after Close = %v; want net.ErrClosed", err)
			}
		}
	})
}

func TestListenerClose(t *testing.T) { synctest.Test(t, testListenerClose) }

func testListenerClose(t *testing.T) {
	n := New()
	ln, err := n.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	queued, err := n.Dial(context.Background(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer queued.Close()
	accepted, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer accepted.Close()
	unaccepted, err := n.Dial(context.Background(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer unaccepted.Close()
	done := make(chan error, 1)
	go func() {
		_, err := ln.Accept() // takes unaccepted
		if err == nil {
			_, err = ln.Accept()
		}
		done <- err
	}()
	synctest.Wait() // the first Accept took unaccepted; the second blocks
	ln.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close = %v; want net.ErrClosed", err)
	}
	// An accepted connection outlives its listener, as in TCP.
	if _, err := queued.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := accepted.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	// A connection queued at Close is reset.
	ln2, _ := n.Listen("127.0.0.1:0")
	c, err := n.Dial(context.Background(), ln2.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ln2.Close()
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read on a connection its listener never accepted = %v; want ECONNRESET", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) && errors.As(err, &ne) && ne.Timeout()
}

// Inside a bubble: deadlines follow the fake clock, blocked calls are durably blocked (so
// synctest.Wait returns while they wait), and Close or a deadline releases them.
func TestInBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s := dialPair(t, New())
		start := time.Now()
		s.SetReadDeadline(start.Add(3 * time.Second))
		_, err := s.Read(make([]byte, 1))
		if !isTimeout(err) {
			t.Fatalf("read past its deadline = %v; want a timeout", err)
		}
		if d := time.Since(start); d != 3*time.Second {
			t.Fatalf("the read timed out after %v; want exactly 3s of fake time", d)
		}
		// An expired deadline fails at once, even with data; clearing it reads the data.
		c.Write([]byte("ab"))
		if _, err := s.Read(make([]byte, 1)); !isTimeout(err) {
			t.Fatalf("read with an expired deadline = %v", err)
		}
		s.SetReadDeadline(time.Time{})
		if b := make([]byte, 2); func() bool { _, err := io.ReadFull(s, b); return err != nil }() {
			t.Fatal("read after clearing the deadline failed")
		}

		// A write that fills the buffer blocks, durably, until its deadline.
		c.SetWriteDeadline(time.Now().Add(time.Second))
		n, err := c.Write(make([]byte, BufferSize+10))
		if !isTimeout(err) || n != BufferSize {
			t.Fatalf("write into a full buffer = %d, %v; want %d and a timeout", n, err, BufferSize)
		}
		c.SetWriteDeadline(time.Time{})

		// A reader blocked with no deadline: synctest.Wait returns (it is durably blocked),
		// and the peer's Close gives it the buffered bytes, then EOF.
		got := make(chan []byte, 1)
		go func() { b, _ := io.ReadAll(c); got <- b }()
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("ReadAll returned before the peer closed")
		default:
		}
		s.Write([]byte("bye"))
		s.Close()
		if b := <-got; string(b) != "bye" {
			t.Fatalf("ReadAll = %q; want bye", b)
		}
		// The fill from above is still buffered on s's side: s closed, so it is discarded.

		// Accept is durably blocked too, and Close releases it.
		n2 := New()
		ln, _ := n2.Listen("127.0.0.1:0")
		acc := make(chan error, 1)
		go func() { _, err := ln.Accept(); acc <- err }()
		synctest.Wait()
		ln.Close()
		if err := <-acc; !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept after Close = %v", err)
		}
	})
}

func TestCutAndHeal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New()
		ln, err := n.Node("b").Listen("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		a := n.Node("a")
		ctx := context.Background()
		c, err := a.Dial(ctx, ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s, _ := ln.Accept()
		defer s.Close()
		blocked := make(chan error, 1)
		go func() { _, err := s.Read(make([]byte, 1)); blocked <- err }()
		synctest.Wait()

		n.Cut("a", "b")
		if err := <-blocked; !errors.Is(err, ErrUnreachable) {
			t.Fatalf("a read blocked across the cut = %v; want ErrUnreachable", err)
		}
		if _, err := c.Write([]byte("x")); !errors.Is(err, ErrUnreachable) {
			t.Fatalf("write across the cut = %v; want ErrUnreachable", err)
		}
		if _, err := a.Dial(ctx, ln.Addr().String()); !errors.Is(err, ErrUnreachable) {
			t.Fatalf("dial over a cut link = %v; want ErrUnreachable", err)
		}
		if n.Dropped() != 1 {
			t.Fatalf("Dropped = %d; want 1", n.Dropped())
		}
		// Other links are unaffected.
		if c3, err := n.Node("c").Dial(ctx, ln.Addr().String()); err != nil {
			t.Fatalf("dial c→b during a cut of a–b: %v", err)
		} else {
			c3.Close()
		}
		n.Heal()
		c2, err := a.Dial(ctx, ln.Addr().String())
		if err != nil {
			t.Fatalf("dial after heal: %v", err)
		}
		defer c2.Close()

		// One way, and partitions, refuse dials both ways and break what is open.
		n.CutOneWay("b", "a")
		if _, err := a.Dial(ctx, ln.Addr().String()); !errors.Is(err, ErrUnreachable) {
			t.Fatalf("dial a→b over a one-way cut b→a = %v", err)
		}
		if _, err := c2.Read(make([]byte, 1)); !errors.Is(err, ErrUnreachable) {
			t.Fatalf("read on a connection across a one-way cut = %v", err)
		}
		n.Heal()
		n.Partition([]string{"a"}, []string{"a", "b", "c"})
		if _, err := a.Dial(ctx, ln.Addr().String()); !errors.Is(err, ErrUnreachable) {
			t.Fatalf("dial across a partition = %v", err)
		}
		n.Heal()

		// A delayed link: the bytes arrive after the delay, on the fake clock; the write does
		// not wait, and the order of bytes is kept across a Heal.
		n.Delay("a", "b", 50*time.Millisecond)
		ln4, _ := n.Node("b").Listen("127.0.0.1:0")
		defer ln4.Close()
		c4, err := a.Dial(ctx, ln4.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c4.Close()
		s4, _ := ln4.Accept()
		defer s4.Close()
		start := time.Now()
		c4.Write([]byte("slow"))
		n.Heal()
		c4.Write([]byte("-fast"))
		if d := time.Since(start); d != 0 {
			t.Fatalf("a write on a delayed link took %v; want no wait", d)
		}
		got := make([]byte, 9)
		if _, err := io.ReadFull(s4, got); err != nil || string(got) != "slow-fast" {
			t.Fatalf("read %q, %v", got, err)
		}
		if d := time.Since(start); d != 50*time.Millisecond {
			t.Fatalf("the bytes arrived after %v; want 50ms", d)
		}
		n.Heal()
	})
}
