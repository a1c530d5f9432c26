package chaos

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// errSessionOver is the dialer's refusal once the session it served has expired: the workload
// then starts a new session with a new name and marker, instead of go-zookeeper opening one
// silently under the old name.
var errSessionOver = errors.New("chaos: session over, not reconnecting")

// zkDialer is the go-zookeeper dialer of one workload session. It refuses to reconnect once the
// session has expired (go-zookeeper would otherwise start a new session on the same Conn, and
// writes would be attributed to the wrong session). On a reconnection it holds replies back
// until the client has re-sent its watches, or 300ms after the connect response passed (a
// client with no watches sends none): go-zookeeper v1.0.4 reads Conn.lastZxid in sendSetWatches,
// right after the handshake, while its receive loop writes it (go-zookeeper/zk PR #35), a race
// the detector reports; the setWatches frame orders the two. The wait runs from the end of the
// handshake, not from the dial: on a loaded machine the handshake alone can take longer than a
// timer started at the dial allowed (a CI run saw the race that way).
type zkDialer struct {
	conn  atomic.Pointer[zk.Conn]
	hadID atomic.Bool
	dials atomic.Int32
	// paused is open while the client is paused (pause): its connections neither send nor
	// deliver what they received, and it dials nothing, as a stopped process would.
	paused atomic.Pointer[chan struct{}]
}

// pause stops the client's traffic, as SIGSTOP would stop a client process, until the returned
// func is called.
func (d *zkDialer) pause() (resume func()) {
	ch := make(chan struct{})
	d.paused.Store(&ch)
	return func() {
		d.paused.Store(nil)
		close(ch)
	}
}

// waitResumed blocks while the client is paused.
func (d *zkDialer) waitResumed() {
	if ch := d.paused.Load(); ch != nil {
		<-*ch
	}
}

// pausableConn is a connection of a client that pause can stop: writes wait, and what a read
// returns is delivered only once the client runs again.
type pausableConn struct {
	net.Conn
	d *zkDialer
}

func (p *pausableConn) Write(b []byte) (int, error) {
	p.d.waitResumed()
	return p.Conn.Write(b)
}

func (p *pausableConn) Read(b []byte) (int, error) {
	n, err := p.Conn.Read(b)
	p.d.waitResumed()
	return n, err
}

// options returns the go-zookeeper options that install the dialer and a logger.
func (d *zkDialer) options(log *slog.Logger) []func(*zk.Conn) {
	return []func(*zk.Conn){
		func(c *zk.Conn) { d.conn.Store(c) },
		zk.WithDialer(d.dial),
		zk.WithLogger(zkLogger{log}),
	}
}

func (d *zkDialer) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	if c := d.conn.Load(); c != nil {
		if c.SessionID() != 0 {
			d.hadID.Store(true)
		} else if d.hadID.Load() {
			return nil, errSessionOver
		}
	}
	d.waitResumed()
	raw, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	nc := net.Conn(&pausableConn{Conn: raw, d: d})
	if d.dials.Add(1) == 1 {
		return nc, nil
	}
	return &gatedConn{Conn: nc, gate: make(chan struct{})}, nil
}

// gatedConn passes the connect response through, then holds further reads until a setWatches
// request was written or 300ms passed since the response did.
type gatedConn struct {
	net.Conn
	gate  chan struct{}
	once  sync.Once
	timer *time.Timer // started when the connect response has passed; guarded by mu

	mu        sync.Mutex
	handshake int // bytes of the connect response still to pass; -1 until its length is known
	hdr       []byte
	started   bool
}

func (g *gatedConn) open() { g.once.Do(func() { close(g.gate) }) }

func (g *gatedConn) Write(b []byte) (int, error) {
	// A request frame: length, xid, opcode. go-zookeeper writes one frame per Write.
	if len(b) >= 12 && int32(binary.BigEndian.Uint32(b[8:12])) == opSetWatches {
		g.open()
	}
	return g.Conn.Write(b)
}

const opSetWatches = 101

func (g *gatedConn) Read(b []byte) (int, error) {
	g.mu.Lock()
	if !g.started {
		g.started, g.handshake = true, -1
	}
	passing := g.handshake != 0
	g.mu.Unlock()
	if !passing {
		<-g.gate
		return g.Conn.Read(b)
	}
	n, err := g.Conn.Read(b)
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := 0; i < n && g.handshake != 0; i++ {
		if g.handshake < 0 {
			g.hdr = append(g.hdr, b[i])
			if len(g.hdr) == 4 {
				g.handshake = int(binary.BigEndian.Uint32(g.hdr))
			}
			continue
		}
		g.handshake--
		if g.handshake == 0 && g.timer == nil {
			g.timer = time.AfterFunc(300*time.Millisecond, g.open)
		}
	}
	return n, err
}

func (g *gatedConn) Close() error {
	g.mu.Lock()
	if g.timer != nil {
		g.timer.Stop()
	}
	g.mu.Unlock()
	g.open()
	return g.Conn.Close()
}

// zkLogger sends go-zookeeper's log lines to slog at debug level.
type zkLogger struct{ log *slog.Logger }

func (l zkLogger) Printf(format string, args ...any) { l.log.Debug(fmt.Sprintf(format, args...)) }

// classify maps a go-zookeeper write error to what the client knows about the write: a server's
// error code is definite; a request that was never sent (ErrNoServer) took no effect; anything
// else (connection loss, session expiry while waiting) leaves it unknown.
func classify(err error) (Outcome, bool) {
	switch {
	case err == nil:
		return OK, true
	case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrSessionMoved):
		return Failed, true
	case errors.Is(err, zk.ErrNoServer):
		return Failed, false // never sent: leave it out of the history
	default:
		return Unknown, true
	}
}
