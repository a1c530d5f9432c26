package memnet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/zkd-io/zkd/internal/testkit/links"
)

// ErrUnreachable is returned for dials over a cut link and for I/O on a connection that a cut
// broke.
var ErrUnreachable = errors.New("memnet: unreachable")

// BufferSize is how many bytes each direction of a connection holds before Write blocks.
const BufferSize = 256 << 10

// firstPort is the first port handed out for "host:0".
const firstPort = 20000

type link struct{ from, to string }

// Net is the shared in-memory network of a test. Its methods are safe for concurrent use.
type Net struct {
	mu        sync.Mutex
	listeners map[string]*listener // address → open listener
	names     map[string]string    // address → node name
	links     links.Table
	conns     map[*pair]struct{} // open connections, for cuts
	port      int                // the last port handed out
	dropped   int
}

// New returns an empty, fully connected Net.
func New() *Net {
	return &Net{
		listeners: make(map[string]*listener),
		names:     make(map[string]string),
		conns:     make(map[*pair]struct{}),
		port:      firstPort - 1,
	}
}

// Endpoint is one node's view of the Net; it implements consensus.Network. Its dials and
// listeners are subject to the faults of the links of its node.
type Endpoint struct {
	n    *Net
	name string
}

// Node returns the Endpoint of the named node.
func (n *Net) Node(name string) *Endpoint { return &Endpoint{n: n, name: name} }

// Listen is Node("").Listen: a listener of no named node.
func (n *Net) Listen(addr string) (net.Listener, error) { return n.Node("").Listen(addr) }

// Dial is Node("").Dial: a dial from no named node.
func (n *Net) Dial(ctx context.Context, addr string) (net.Conn, error) {
	return n.Node("").Dial(ctx, addr)
}

// nextPortLocked returns a port of host that is neither listened on nor handed out before.
func (n *Net) nextPortLocked(host string) string {
	for {
		n.port++
		a := net.JoinHostPort(host, strconv.Itoa(n.port))
		if _, used := n.listeners[a]; !used {
			return a
		}
	}
}

// Listen opens a listener on addr ("host:port"; port 0 picks one) and registers the address as
// this node's.
func (e *Endpoint) Listen(addr string) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: Network, Err: err}
	}
	n := e.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if port == "0" {
		addr = n.nextPortLocked(host)
	} else {
		addr = net.JoinHostPort(host, port)
	}
	if _, used := n.listeners[addr]; used {
		return nil, &net.OpError{Op: "listen", Net: Network, Addr: Addr(addr), Err: os.NewSyscallError("bind", syscall.EADDRINUSE)}
	}
	l := &listener{n: n, addr: Addr(addr)}
	n.listeners[addr] = l
	n.names[addr] = e.name
	return l, nil
}

// Dial connects to addr unless the link between this node and the owner of addr is cut (either
// way). It never blocks: the connection is queued for the listener's Accept.
func (e *Endpoint) Dial(ctx context.Context, addr string) (net.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, &net.OpError{Op: "dial", Net: Network, Addr: Addr(addr), Err: err}
	}
	n := e.n
	n.mu.Lock()
	defer n.mu.Unlock()
	to, ok := n.names[addr]
	if !ok {
		to = addr
	}
	l := link{e.name, to}
	if n.links.Blocked(e.name, to) {
		n.dropped++
		return nil, fmt.Errorf("dial %s (%s→%s): %w", addr, e.name, to, ErrUnreachable)
	}
	ln := n.listeners[addr]
	if ln == nil {
		return nil, refused(addr)
	}
	host := "127.0.0.1"
	for a, name := range n.names {
		if name == e.name && e.name != "" {
			host, _, _ = net.SplitHostPort(a)
			break
		}
	}
	local := Addr(n.nextPortLocked(host))
	p := newPair(n, l, local, ln.addr)
	if !ln.enqueue(p.server) {
		return nil, refused(addr)
	}
	n.conns[p] = struct{}{}
	return p.client, nil
}

func refused(addr string) error {
	return &net.OpError{Op: "dial", Net: Network, Addr: Addr(addr), Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
}

// Cut cuts the links between a and b in both directions.
func (n *Net) Cut(a, b string) {
	n.links.Cut(a, b)
	n.breakCut()
}

// CutOneWay cuts only the direction from → to. A connection carries both directions, so
// connections dialled either way between the two break; new dials either way fail.
func (n *Net) CutOneWay(from, to string) {
	n.links.CutOneWay(from, to)
	n.breakCut()
}

// Partition splits the nodes in two groups: group and everyone else among all.
func (n *Net) Partition(group, all []string) {
	n.links.Partition(group, all)
	n.breakCut()
}

// Isolate cuts node off from every node in all.
func (n *Net) Isolate(node string, all []string) { n.Partition([]string{node}, all) }

// Heal restores every link and removes every delay. Connections a cut broke stay broken.
func (n *Net) Heal() { n.links.Heal() }

// Delay makes the links between a and b (both directions) slow: bytes written on them reach
// the reader d later, on the caller's clock (in a bubble, the fake one). Writes do not wait for
// the delay; bytes written before Delay, or after Heal, are not delayed, and order is kept.
func (n *Net) Delay(a, b string, d time.Duration) { n.links.SetDelay(a, b, d) }

// Dropped returns how many dials were refused because of cut links.
func (n *Net) Dropped() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.dropped
}

func (n *Net) breakCut() {
	n.mu.Lock()
	var victims []*pair
	for p := range n.conns {
		if n.links.Blocked(p.l.from, p.l.to) {
			victims = append(victims, p)
			delete(n.conns, p)
		}
	}
	n.mu.Unlock()
	for _, p := range victims {
		p.fail(ErrUnreachable)
	}
}

func (n *Net) forget(p *pair) {
	n.mu.Lock()
	delete(n.conns, p)
	n.mu.Unlock()
}

// Network is the network name of memnet addresses.
const Network = "memnet"

// Addr is a memnet address, "host:port".
type Addr string

func (Addr) Network() string  { return Network }
func (a Addr) String() string { return string(a) }

// signal is a broadcast: wait returns a channel that the next broadcast closes. The owner's
// mutex guards it; waiting happens after that mutex is released.
type signal struct{ ch chan struct{} }

func (s *signal) wait() <-chan struct{} {
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

func (s *signal) broadcast() {
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}

// listener is an open memnet listener.
type listener struct {
	n    *Net
	addr Addr

	mu      sync.Mutex
	queue   []*conn // dialled, not yet accepted
	closed  bool
	changed signal
}

func (l *listener) enqueue(c *conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.queue = append(l.queue, c)
	l.changed.broadcast()
	return true
}

func (l *listener) Accept() (net.Conn, error) {
	for {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return nil, &net.OpError{Op: "accept", Net: Network, Addr: l.addr, Err: net.ErrClosed}
		}
		if len(l.queue) > 0 {
			c := l.queue[0]
			l.queue[0] = nil
			l.queue = l.queue[1:]
			l.mu.Unlock()
			return c, nil
		}
		ch := l.changed.wait()
		l.mu.Unlock()
		<-ch
	}
}

func (l *listener) Close() error {
	l.n.mu.Lock()
	if l.n.listeners[string(l.addr)] == l {
		delete(l.n.listeners, string(l.addr))
	}
	l.n.mu.Unlock()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return &net.OpError{Op: "close", Net: Network, Addr: l.addr, Err: net.ErrClosed}
	}
	l.closed = true
	q := l.queue
	l.queue = nil
	l.changed.broadcast()
	l.mu.Unlock()
	for _, c := range q {
		c.p.fail(os.NewSyscallError("read", syscall.ECONNRESET))
	}
	return nil
}

func (l *listener) Addr() net.Addr { return l.addr }

// pipe is one direction of a connection: bytes written by one end for the other to read.
type pipe struct {
	mu      sync.Mutex
	chunks  []chunk // written, not yet read, in order
	size    int     // bytes in chunks
	wclosed bool    // the writing end closed: the reader gets io.EOF after chunks
	rclosed bool    // the reading end closed: writes fail
	err     error   // broken: both ends fail with it
	changed signal
}

// chunk is written bytes that the reader may have from at on (zero: at once).
type chunk struct {
	b  []byte
	at time.Time
}

// ready returns the bytes that may be read now, or when none may, how long until the first may.
func (p *pipe) ready(now time.Time) (n int, wait time.Duration) {
	for _, c := range p.chunks {
		if !c.at.IsZero() && c.at.After(now) {
			if n == 0 {
				return 0, c.at.Sub(now)
			}
			break
		}
		n += len(c.b)
	}
	return n, 0
}

// read moves up to len(b) ready bytes into b.
func (p *pipe) read(b []byte, now time.Time) int {
	n := 0
	for len(p.chunks) > 0 && n < len(b) {
		c := &p.chunks[0]
		if !c.at.IsZero() && c.at.After(now) {
			break
		}
		k := copy(b[n:], c.b)
		n += k
		c.b = c.b[k:]
		if len(c.b) == 0 {
			p.chunks[0] = chunk{}
			p.chunks = p.chunks[1:]
		}
	}
	if len(p.chunks) == 0 {
		p.chunks = nil
	}
	p.size -= n
	return n
}

// write appends b, readable from at on.
func (p *pipe) write(b []byte, at time.Time) {
	if k := len(p.chunks); k > 0 && p.chunks[k-1].at.Equal(at) {
		p.chunks[k-1].b = append(p.chunks[k-1].b, b...)
	} else {
		p.chunks = append(p.chunks, chunk{b: bytes.Clone(b), at: at})
	}
	p.size += len(b)
}

// pair is a connection: its two ends and the link it was dialled on (client → server).
type pair struct {
	n              *Net
	l              link
	client, server *conn
	once           sync.Once
}

func newPair(n *Net, l link, client, server Addr) *pair {
	up, down := &pipe{}, &pipe{}
	p := &pair{n: n, l: l}
	p.client = &conn{p: p, dir: l, r: down, w: up, local: client, remote: server, done: make(chan struct{}),
		rd: newDeadline(), wd: newDeadline()}
	p.server = &conn{p: p, dir: link{l.to, l.from}, r: up, w: down, local: server, remote: client, done: make(chan struct{}),
		rd: newDeadline(), wd: newDeadline()}
	return p
}

// fail breaks both directions with err.
func (p *pair) fail(err error) {
	for _, pp := range []*pipe{p.client.w, p.server.w} {
		pp.mu.Lock()
		if pp.err == nil {
			pp.err = err
		}
		pp.chunks, pp.size = nil, 0
		pp.changed.broadcast()
		pp.mu.Unlock()
	}
}

// conn is one end of a connection.
type conn struct {
	p             *pair
	dir           link // the link this end writes on
	r, w          *pipe
	local, remote Addr
	rd, wd        *deadline
	once          sync.Once
	done          chan struct{} // closed by Close
}

func (c *conn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: Network, Source: c.local, Addr: c.remote, Err: err}
}

func (c *conn) closed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func (c *conn) Read(b []byte) (int, error) {
	r := c.r
	for {
		var timer *time.Timer
		var wait <-chan time.Time
		r.mu.Lock()
		ready, later := r.ready(time.Now())
		switch {
		case c.closed():
			r.mu.Unlock()
			return 0, c.opErr("read", net.ErrClosed)
		case r.err != nil:
			err := r.err
			r.mu.Unlock()
			return 0, c.opErr("read", err)
		case c.rd.expired():
			r.mu.Unlock()
			return 0, c.opErr("read", os.ErrDeadlineExceeded)
		case ready > 0:
			n := r.read(b, time.Now())
			r.changed.broadcast()
			r.mu.Unlock()
			return n, nil
		case len(b) == 0:
			r.mu.Unlock()
			return 0, nil
		case later > 0:
			// Bytes on a delayed link: they arrive after the delay.
			timer = time.NewTimer(later)
			wait = timer.C
		case r.wclosed:
			r.mu.Unlock()
			return 0, io.EOF
		}
		ch := r.changed.wait()
		r.mu.Unlock()
		select {
		case <-ch:
		case <-wait:
		case <-c.rd.wait():
		case <-c.done:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

func (c *conn) Write(b []byte) (int, error) {
	var at time.Time // when the reader may have the bytes: zero, at once
	if d := c.p.n.links.Delay(c.dir.from, c.dir.to); d > 0 {
		at = time.Now().Add(d)
	}
	w := c.w
	n := 0
	for {
		w.mu.Lock()
		switch {
		case c.closed():
			w.mu.Unlock()
			return n, c.opErr("write", net.ErrClosed)
		case w.err != nil:
			err := w.err
			w.mu.Unlock()
			return n, c.opErr("write", err)
		case w.rclosed:
			w.mu.Unlock()
			return n, c.opErr("write", os.NewSyscallError("write", syscall.EPIPE))
		case c.wd.expired():
			w.mu.Unlock()
			return n, c.opErr("write", os.ErrDeadlineExceeded)
		}
		if room := BufferSize - w.size; room > 0 {
			k := min(room, len(b)-n)
			w.write(b[n:n+k], at)
			n += k
			w.changed.broadcast()
		}
		if n == len(b) {
			w.mu.Unlock()
			return n, nil
		}
		ch := w.changed.wait()
		w.mu.Unlock()
		select {
		case <-ch:
		case <-c.wd.wait():
		case <-c.done:
		}
	}
}

// Close closes this end: the other end reads what was written and then io.EOF, and its writes
// fail.
func (c *conn) Close() error {
	first := false
	c.once.Do(func() {
		first = true
		close(c.done)
		c.r.mu.Lock()
		c.r.rclosed = true
		c.r.chunks, c.r.size = nil, 0
		c.r.changed.broadcast()
		c.r.mu.Unlock()
		c.w.mu.Lock()
		c.w.wclosed = true
		c.w.changed.broadcast()
		c.w.mu.Unlock()
		c.rd.set(time.Time{})
		c.wd.set(time.Time{})
		c.p.once.Do(func() { c.p.n.forget(c.p) })
	})
	if !first {
		return c.opErr("close", net.ErrClosed)
	}
	return nil
}

func (c *conn) LocalAddr() net.Addr  { return c.local }
func (c *conn) RemoteAddr() net.Addr { return c.remote }

func (c *conn) SetDeadline(t time.Time) error {
	if c.closed() {
		return c.opErr("set", net.ErrClosed)
	}
	c.rd.set(t)
	c.wd.set(t)
	return nil
}

func (c *conn) SetReadDeadline(t time.Time) error {
	if c.closed() {
		return c.opErr("set", net.ErrClosed)
	}
	c.rd.set(t)
	return nil
}

func (c *conn) SetWriteDeadline(t time.Time) error {
	if c.closed() {
		return c.opErr("set", net.ErrClosed)
	}
	c.wd.set(t)
	return nil
}

// deadline is a channel that is closed when the deadline passes (as in net.Pipe). The timer is
// the caller's clock: in a synctest bubble, the bubble's.
type deadline struct {
	mu     sync.Mutex
	timer  *time.Timer
	cancel chan struct{} // closed when the deadline passed
}

func newDeadline() *deadline { return &deadline{cancel: make(chan struct{})} }

func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil && !d.timer.Stop() {
		<-d.cancel // the timer fired: its function closes cancel, if it has not yet
	}
	d.timer = nil
	closed := isClosed(d.cancel)
	if t.IsZero() {
		if closed {
			d.cancel = make(chan struct{})
		}
		return
	}
	if dur := time.Until(t); dur > 0 {
		if closed {
			d.cancel = make(chan struct{})
		}
		cancel := d.cancel
		d.timer = time.AfterFunc(dur, func() { close(cancel) })
		return
	}
	if !closed {
		close(d.cancel)
	}
}

func (d *deadline) wait() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cancel
}

func (d *deadline) expired() bool { return isClosed(d.wait()) }

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
