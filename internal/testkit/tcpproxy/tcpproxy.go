// Package tcpproxy is a loopback TCP proxy that a test puts between clients it does not control
// (a JVM, a Python process) and a server, so that it can break those clients' connections the
// way a network does: cut one (both sockets closed at once) or stall it (nothing passes either
// way, the sockets stay open, as in a partition), then let it pass again.
//
// A Proxy forwards every connection it accepts to one target address. Its own mode applies to
// every connection, live and new: Stall holds them (a new one is accepted but not forwarded, so
// the server sees nothing of it), Cut closes them and closes new ones at once, Resume lets them
// pass again. Each Conn can also be cut or stalled on its own.
//
// It is test-only machinery; no production package imports it.
package tcpproxy

import (
	"net"
	"sync"
	"testing"
)

type mode uint8

const (
	pass mode = iota
	stall
	cut
)

// Proxy forwards connections from Addr to its target.
type Proxy struct {
	target string
	ln     net.Listener

	mu       sync.Mutex
	cond     *sync.Cond // signalled when a mode changes or a connection closes
	mode     mode
	conns    map[*Conn]bool
	accepted int
	closed   bool
	done     chan struct{}
}

// Conn is one proxied connection.
type Conn struct {
	p        *Proxy
	client   net.Conn
	upstream net.Conn // nil until dialled
	stalled  bool     // guarded by p.mu
	closed   bool     // guarded by p.mu
}

// Start listens on 127.0.0.1:0 and forwards what it accepts to target until the test ends.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// New listens on 127.0.0.1:0 and forwards what it accepts to target until Close; for a
// goroutine other than the test's, which must not call t.Fatal.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, ln: ln, conns: map[*Conn]bool{}, done: make(chan struct{})}
	p.cond = sync.NewCond(&p.mu)
	go p.accept()
	return p, nil
}

// Addr is where clients connect.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Accepted returns how many connections the proxy has accepted.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// Conns returns the connections that are open now.
func (p *Proxy) Conns() []*Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*Conn, 0, len(p.conns))
	for c := range p.conns {
		out = append(out, c)
	}
	return out
}

// Stall stops every connection, live and new, from passing anything until Resume. A side that
// closes meanwhile is not seen by the other side until then.
func (p *Proxy) Stall() { p.setMode(stall) }

// Cut closes every live connection and, until Resume, every new one as soon as it is accepted.
func (p *Proxy) Cut() {
	p.setMode(cut)
	for _, c := range p.Conns() {
		c.Cut()
	}
}

// Resume lets connections pass again after Stall or Cut.
func (p *Proxy) Resume() { p.setMode(pass) }

func (p *Proxy) setMode(m mode) {
	p.mu.Lock()
	p.mode = m
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	<-p.done
	for _, c := range p.Conns() {
		c.Cut()
	}
}

func (p *Proxy) accept() {
	defer close(p.done)
	for {
		nc, err := p.ln.Accept()
		if err != nil {
			return
		}
		c := &Conn{p: p, client: nc}
		p.mu.Lock()
		p.accepted++
		refuse := p.mode == cut || p.closed
		if !refuse {
			p.conns[c] = true
		}
		p.mu.Unlock()
		if refuse {
			nc.Close()
			continue
		}
		go c.run()
	}
}

// Cut closes both sides of the connection at once.
func (c *Conn) Cut() {
	c.p.mu.Lock()
	if c.closed {
		c.p.mu.Unlock()
		return
	}
	c.closed = true
	delete(c.p.conns, c)
	up := c.upstream
	c.p.cond.Broadcast()
	c.p.mu.Unlock()
	c.client.Close()
	if up != nil {
		up.Close()
	}
}

// Stall stops (true) or restarts (false) this connection's traffic, as Proxy.Stall does for all.
func (c *Conn) Stall(on bool) {
	c.p.mu.Lock()
	c.stalled = on
	c.p.cond.Broadcast()
	c.p.mu.Unlock()
}

// flow waits until the connection may pass traffic, and reports false if it closed meanwhile.
func (c *Conn) flow() bool {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	for !c.closed && (c.stalled || c.p.mode == stall) {
		c.p.cond.Wait()
	}
	return !c.closed
}

func (c *Conn) run() {
	// The upstream connection is made only once traffic may flow: a client accepted during a
	// stall must not show up at the server as a connection that never says anything.
	if !c.flow() {
		return
	}
	up, err := net.Dial("tcp", c.p.target)
	if err != nil {
		c.Cut()
		return
	}
	c.p.mu.Lock()
	closed := c.closed
	if !closed {
		c.upstream = up
	}
	c.p.mu.Unlock()
	if closed {
		up.Close()
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { c.pump(up, c.client) })
	wg.Go(func() { c.pump(c.client, up) })
	wg.Wait()
	c.Cut()
}

// pump copies src to dst while the connection may flow. When src ends, the end too waits for
// the connection to flow, then closes both sides: a stalled connection shows nothing, not even
// a close, until it is resumed.
func (c *Conn) pump(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if !c.flow() {
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	c.Cut()
}
