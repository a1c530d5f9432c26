// Package raftnet is a fault-injecting network for in-process cluster tests. Every node gets an
// Endpoint (a consensus.Network) from one Fabric; the Fabric can cut, heal and slow the links
// between named nodes. Faults act on real loopback TCP connections, so they affect Raft and the
// cluster RPC alike: a cut link refuses new dials and closes the connections it carries.
//
// It is test-only machinery; no production package imports it.
package raftnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/zkd-io/zkd/internal/testkit/links"
)

// ErrUnreachable is returned for dials over a cut link and for I/O on a connection that a cut
// closed.
var ErrUnreachable = errors.New("raftnet: unreachable")

type link struct{ from, to string }

// Fabric is the shared network of a test cluster. Its methods are safe for concurrent use.
type Fabric struct {
	mu      sync.Mutex
	names   map[string]string // listen address → node name
	links   links.Table
	conns   map[*conn]struct{}
	dropped int
}

// New returns a fully connected Fabric.
func New() *Fabric {
	return &Fabric{
		names: make(map[string]string),
		conns: make(map[*conn]struct{}),
	}
}

// Endpoint is one node's view of the Fabric; it implements consensus.Network.
type Endpoint struct {
	f    *Fabric
	name string
}

// Node returns the Endpoint of the named node.
func (f *Fabric) Node(name string) *Endpoint { return &Endpoint{f: f, name: name} }

// Listen opens a loopback TCP listener and registers its address as this node's.
func (e *Endpoint) Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	e.f.mu.Lock()
	e.f.names[ln.Addr().String()] = e.name
	e.f.mu.Unlock()
	return ln, nil
}

// Dial connects to addr unless the link from this node to the owner of addr is cut. The returned
// connection carries the link's faults in both directions.
func (e *Endpoint) Dial(ctx context.Context, addr string) (net.Conn, error) {
	f := e.f
	f.mu.Lock()
	to, ok := f.names[addr]
	if !ok {
		to = addr
	}
	l := link{e.name, to}
	blocked := f.links.Blocked(e.name, to)
	if blocked {
		f.dropped++
	}
	f.mu.Unlock()
	if blocked {
		return nil, fmt.Errorf("dial %s (%s→%s): %w", addr, e.name, to, ErrUnreachable)
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &conn{Conn: nc, f: f, l: l}
	f.mu.Lock()
	if f.links.Blocked(e.name, to) {
		f.mu.Unlock()
		nc.Close()
		return nil, fmt.Errorf("dial %s: %w", addr, ErrUnreachable)
	}
	f.conns[c] = struct{}{}
	f.mu.Unlock()
	return c, nil
}

// Cut cuts the links between a and b in both directions.
func (f *Fabric) Cut(a, b string) {
	f.links.Cut(a, b)
	f.closeCut()
}

// CutOneWay cuts only the direction from → to. A connection carries both directions, so
// connections dialled either way between the two are closed; new dials from `from` to `to` fail
// while dials from `to` to `from` succeed but cannot carry data back.
func (f *Fabric) CutOneWay(from, to string) {
	f.links.CutOneWay(from, to)
	f.closeCut()
}

// Partition splits the nodes in two groups: group and everyone else among all.
func (f *Fabric) Partition(group, all []string) {
	f.links.Partition(group, all)
	f.closeCut()
}

// Isolate cuts node off from every node in all.
func (f *Fabric) Isolate(node string, all []string) { f.Partition([]string{node}, all) }

// Heal restores every link and removes every delay.
func (f *Fabric) Heal() { f.links.Heal() }

// Delay slows every write on connections between a and b (both directions) by d.
func (f *Fabric) Delay(a, b string, d time.Duration) { f.links.SetDelay(a, b, d) }

// Dropped returns how many dials were refused because of cut links.
func (f *Fabric) Dropped() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dropped
}

func (f *Fabric) closeCut() {
	f.mu.Lock()
	var victims []*conn
	for c := range f.conns {
		if f.links.Blocked(c.l.from, c.l.to) {
			victims = append(victims, c)
			delete(f.conns, c)
		}
	}
	f.mu.Unlock()
	for _, c := range victims {
		c.Conn.Close()
	}
}

// conn is a dialled connection on link l.
type conn struct {
	net.Conn
	f    *Fabric
	l    link
	once sync.Once
}

func (c *conn) state(l link) (cut bool, delay time.Duration) {
	return c.f.links.IsCut(l.from, l.to), c.f.links.Delay(l.from, l.to)
}

func (c *conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if cut, _ := c.state(link{c.l.to, c.l.from}); cut {
		c.Close()
		return 0, ErrUnreachable
	}
	return n, err
}

func (c *conn) Write(p []byte) (int, error) {
	cut, delay := c.state(c.l)
	if cut {
		c.Close()
		return 0, ErrUnreachable
	}
	if delay > 0 {
		time.Sleep(delay) // the injected fault itself: a slow link
	}
	return c.Conn.Write(p)
}

func (c *conn) Close() error {
	c.once.Do(func() {
		c.f.mu.Lock()
		delete(c.f.conns, c)
		c.f.mu.Unlock()
	})
	return c.Conn.Close()
}
