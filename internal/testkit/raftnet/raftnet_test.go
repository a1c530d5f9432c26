package raftnet

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// echoServer accepts on ln and echoes until the listener closes.
func echoServer(t *testing.T, ln net.Listener) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
}

func roundTrip(c net.Conn) error {
	if _, err := c.Write([]byte("ping")); err != nil {
		return err
	}
	b := make([]byte, 4)
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err := io.ReadFull(c, b)
	return err
}

func TestCutHealAndOneWay(t *testing.T) {
	f := New()
	ln, err := f.Node("b").Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	echoServer(t, ln)
	ctx := context.Background()
	a := f.Node("a")
	c, err := a.Dial(ctx, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := roundTrip(c); err != nil {
		t.Fatalf("healthy link: %v", err)
	}
	f.Cut("a", "b")
	if err := roundTrip(c); err == nil {
		t.Fatal("a connection survived the cut")
	}
	if _, err := a.Dial(ctx, ln.Addr().String()); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("dial over a cut link = %v; want ErrUnreachable", err)
	}
	if f.Dropped() == 0 {
		t.Fatal("dropped dials not counted")
	}
	f.Heal()
	c2, err := a.Dial(ctx, ln.Addr().String())
	if err != nil {
		t.Fatalf("dial after heal: %v", err)
	}
	defer c2.Close()
	if err := roundTrip(c2); err != nil {
		t.Fatalf("after heal: %v", err)
	}
	// One way: a cannot send to b, and b's replies to a still cannot flow on a's connection.
	f.CutOneWay("a", "b")
	if _, err := a.Dial(ctx, ln.Addr().String()); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("dial a→b over a one-way cut = %v", err)
	}
	f.Heal()
	f.Delay("a", "b", 50*time.Millisecond)
	c3, err := a.Dial(ctx, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	start := time.Now()
	if err := roundTrip(c3); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Fatalf("delayed round trip took %v; want >= 50ms", d)
	}
}
