package server

import (
	"io"
	"net"
	"testing"
)

// An ended connection's buffers go to the next connection clean: requests its executor never
// answered are counted stale and dropped rather than handed to the new connection, and the reader
// reads the new socket.
func TestReleasedConnBuffersStartClean(t *testing.T) {
	cfg := Config{MaxInFlight: 8}.withDefaults()
	s := newServer(cfg)
	t.Cleanup(s.cancel)
	old, oldPeer := net.Pipe()
	t.Cleanup(func() { _ = old.Close(); _ = oldPeer.Close() })
	c := newConn(s, old)
	for range 3 {
		c.exec.q = append(c.exec.q, &request{})
	}
	before := s.m.stale.Total()
	c.releaseBuffers()
	if got := s.m.stale.Total() - before; got != 3 {
		t.Fatalf("stale requests counted on release = %d; want 3", got)
	}
	if len(c.exec.q) != 0 || !c.exec.ended {
		t.Fatalf("released queue still holds %d requests (ended %v)", len(c.exec.q), c.exec.ended)
	}

	nc, peer := net.Pipe()
	t.Cleanup(func() { _ = nc.Close(); _ = peer.Close() })
	c = newConn(s, nc)
	go func() { _, _ = peer.Write([]byte("ruok")) }()
	got := make([]byte, 4)
	if _, err := io.ReadFull(c.br, got); err != nil || string(got) != "ruok" {
		t.Fatalf("new connection's reader read %q, %v; want the new socket's bytes", got, err)
	}
}
