package tcpproxy_test

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/zkd-io/zkd/internal/testkit"
	"github.com/zkd-io/zkd/internal/testkit/tcpproxy"
)

// echo is a server that writes back every line it reads, and counts its connections.
func echo(t *testing.T) (addr string, accepted chan net.Conn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted = make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), accepted
}

func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader, line string) error {
	t.Helper()
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return err
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := r.ReadString('\n')
	if err == nil && got != line+"\n" {
		t.Fatalf("echo of %q: got %q", line, got)
	}
	return err
}

func TestStallAndResume(t *testing.T) {
	addr, accepted := echo(t)
	p := tcpproxy.Start(t, addr)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if err := roundTrip(t, c, r, "one"); err != nil {
		t.Fatal(err)
	}
	<-accepted
	p.Stall()
	if _, err := c.Write([]byte("two\n")); err != nil {
		t.Fatal(err)
	}
	// Nothing may come back while stalled; a short read deadline is the only way to see silence.
	_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := r.ReadString('\n'); err == nil {
		t.Fatal("a stalled connection passed a reply")
	}
	// A connection made during the stall is not forwarded to the server yet.
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	testkit.Eventually(t, 10*time.Second, "the second connection accepted", func() bool { return p.Accepted() == 2 })
	select {
	case <-accepted:
		t.Fatal("a connection accepted during a stall reached the server")
	default:
	}
	p.Resume()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "two\n" {
		t.Fatalf("after resume: %q, %v", got, err)
	}
	if err := roundTrip(t, c2, bufio.NewReader(c2), "three"); err != nil {
		t.Fatal(err)
	}
}

func TestCut(t *testing.T) {
	addr, _ := echo(t)
	p := tcpproxy.Start(t, addr)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if err := roundTrip(t, c, r, "one"); err != nil {
		t.Fatal(err)
	}
	p.Cut()
	if err := roundTrip(t, c, r, "two"); err == nil {
		t.Fatal("a cut connection still passes traffic")
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err == nil {
		defer c2.Close()
		if err := roundTrip(t, c2, bufio.NewReader(c2), "refused"); err == nil {
			t.Fatal("a connection made while cut passes traffic")
		}
	}
	p.Resume()
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if err := roundTrip(t, c3, bufio.NewReader(c3), "three"); err != nil {
		t.Fatal(err)
	}
	if n := len(p.Conns()); n != 1 {
		t.Fatalf("%d open connections; want 1", n)
	}
}
