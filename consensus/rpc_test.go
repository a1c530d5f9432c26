package consensus

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/zkd-io/zkd/internal/peernet"
)

// echoPeer accepts cluster RPC connections on a loopback port and answers every frame with its
// own payload, until the test ends. With cut > 0 its first connection is different: it reads cut
// frames, answers the first half of them and closes.
func echoPeer(t *testing.T, cut int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for first := true; ; first = false {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			cutHere := 0
			if first {
				cutHere = cut
			}
			wg.Go(func() {
				defer conn.Close()
				br := bufio.NewReader(conn)
				if k, err := br.ReadByte(); err != nil || k != peernet.ConnRPC {
					return
				}
				if cutHere > 0 {
					var held [][]byte
					for range cutHere {
						id, _, payload, err := readFrame(br)
						if err != nil {
							return
						}
						held = append(held, appendFrame(nil, id, statusOK, payload))
					}
					for _, f := range held[:cutHere/2] {
						if _, err := conn.Write(f); err != nil {
							return
						}
					}
					return
				}
				for {
					id, _, payload, err := readFrame(br)
					if err != nil {
						return
					}
					if err := writeFrame(conn, id, statusOK, payload); err != nil {
						return
					}
				}
			})
		}
	})
	return ln.Addr().String()
}

// testRPCClient is an rpcClient of a bare node: enough to dial and track its reader.
func testRPCClient(t *testing.T, addr string) *rpcClient {
	n := &Node{}
	n.cfg.Network = TCPNetwork{}
	c := newRPCClient(n, addr)
	t.Cleanup(func() { c.close(); n.wg.Wait() })
	return c
}

// Many senders at once on one connection, with payloads of many sizes: every call gets its own
// reply.
func TestRPCClientConcurrentSends(t *testing.T) {
	c := testRPCClient(t, echoPeer(t, 0))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a frame never written fails, not hangs
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for g := range 32 {
		wg.Go(func() {
			for i := range 100 {
				want := fmt.Sprintf("g%d-%d-%s", g, i, make([]byte, i*37))
				r, err := c.call(ctx, rpcReadIndex, []byte(want))
				if err == nil && (r.err != nil || string(r.payload) != want) {
					err = fmt.Errorf("call %d of sender %d: reply %q, %v", i, g, r.payload, r.err)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A connection that fails fails every call waiting on it as a lost connection, and the calls
// answered before it are not touched; the next call dials again.
func TestRPCClientConnectionLost(t *testing.T) {
	c := testRPCClient(t, echoPeer(t, 8))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ok, lost int
	for g := range 8 {
		wg.Go(func() {
			r, err := c.call(ctx, rpcReadIndex, []byte{byte(g)})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Errorf("call %d: %v", g, err)
			case r.err == nil:
				ok++
			case errors.Is(r.err, errConnLost):
				lost++
			default:
				t.Errorf("call %d: %v; want a lost connection", g, r.err)
			}
		})
	}
	wg.Wait()
	if ok != 4 || lost != 4 {
		t.Errorf("%d answered and %d lost; want the first 4 answered and the other 4 lost", ok, lost)
	}
	r, err := c.call(ctx, rpcReadIndex, []byte("again"))
	if err != nil || r.err != nil || string(r.payload) != "again" {
		t.Fatalf("call after the loss: %q, %v, %v", r.payload, err, r.err)
	}
}
