package recipes

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkd-io/zkd/internal/testkit/zktest"
	"github.com/zkd-io/zkd/server"
)

// The test target is chosen here only: $RECIPES_ZK_ADDR (any ZooKeeper-compatible server,
// comma-separated addresses); else, with RECIPES_TARGET=zookeeper, a real Apache ZooKeeper started
// once for the package; with RECIPES_TARGET=cluster, an in-process 3-server zkd cluster (clients
// are given every member); else (the default) an in-process zkd configured like a stock ZooKeeper
// (tickTime 2s, so 4s is the smallest session timeout).
var (
	targetAddrs []string
	targetSkip  string
)

func TestMain(m *testing.M) {
	code := func() int {
		if a := os.Getenv("RECIPES_ZK_ADDR"); a != "" {
			targetAddrs = strings.Split(a, ",")
			return m.Run()
		}
		if os.Getenv("RECIPES_TARGET") == "cluster" {
			cl, err := server.StartCluster(server.Config{TickTime: 2 * time.Second, MaxClientConns: -1}, 3)
			if err != nil {
				fmt.Fprintln(os.Stderr, "recipes: start a zkd cluster:", err)
				return 1
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				_ = cl.Shutdown(ctx)
			}()
			for _, s := range cl.Servers {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				err := s.WaitServing(ctx)
				cancel()
				if err != nil {
					fmt.Fprintln(os.Stderr, "recipes: zkd cluster:", err)
					return 1
				}
			}
			targetAddrs = cl.Addrs()
			return m.Run()
		}
		if os.Getenv("RECIPES_TARGET") != "zookeeper" {
			s, err := server.Start(server.Config{TickTime: 2 * time.Second, MaxClientConns: -1})
			if err != nil {
				fmt.Fprintln(os.Stderr, "recipes: start zkd:", err)
				return 1
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = s.Shutdown(ctx)
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := s.WaitServing(ctx); err != nil {
				fmt.Fprintln(os.Stderr, "recipes: zkd:", err)
				return 1
			}
			targetAddrs = []string{s.Addr()}
			return m.Run()
		}
		if err := zktest.Check(); err != nil {
			// Without a server only the pure tests can run; Example functions cannot skip, so
			// restrict the run to the pure tests and say why.
			targetSkip = "no ZooKeeper: set RECIPES_ZK_ADDR or install the zookeeper package (" + err.Error() + ")"
			fmt.Fprintln(os.Stderr, "recipes: "+targetSkip+"; running only the tests that need no server")
			flag.Parse()
			_ = flag.Set("test.run", pureTests)
			return m.Run()
		}
		dir, err := os.MkdirTemp("", "recipes-zk-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		z, err := zktest.StartZooKeeper(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer func() { _ = z.Stop() }()
		targetAddrs = z.Addrs
		return m.Run()
	}()
	os.Exit(code)
}

// pureTests names the tests that need no server.
const pureTests = "^(TestNewPrefixGolden|TestCuratorKeyGolden|TestParseNative|TestSeqBeforeAcrossWrap|TestDecideGolden)$"

// testServer returns the addresses of the ZooKeeper under test, or skips.
func testServer(t testing.TB) []string {
	t.Helper()
	if targetSkip != "" {
		t.Skip(targetSkip)
	}
	return targetAddrs
}

const testTimeout = 4 * time.Second // tickTime 2000 makes 4 s the smallest session timeout

type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

// newTestSession connects a Session to the server under test with optional faults.
func newTestSession(t testing.TB, f *faults) *Session {
	t.Helper()
	addrs := testServer(t)
	opts := []func(*zk.Conn){zk.WithLogger(quietLogger{})}
	if f != nil {
		opts = append(opts, zk.WithDialer(f.dial))
	}
	s, err := Connect(addrs, testTimeout, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := s.waitConnected(ctx); err != nil {
		t.Fatalf("session never connected: %v", err)
	}
	return s
}

// testPath returns a fresh lock path for one test.
func testPath(t testing.TB) string {
	return fmt.Sprintf("/recipes-test/%s-%d", strings.ReplaceAll(t.Name(), "/", "_"), time.Now().UnixNano())
}

// testCtx returns a context bounded for one test.
func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// children lists a path with a plain connection of the test, after a sync: on a cluster the
// session's server may not have applied another session's latest writes yet.
func children(t testing.TB, s *Session, p string) []string {
	t.Helper()
	if _, err := s.Conn().Sync(p); err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatal(err)
	}
	c, _, err := s.Conn().Children(p)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatal(err)
	}
	return c
}

// faults is a fault-injecting dialer for go-zookeeper: it sees every request and reply frame
// on real loopback TCP connections, counts watch notifications, records the session password,
// can swallow the reply to a request (closing the connection, as a crash after commit would)
// and can hold a request back until released.
type faults struct {
	mu            sync.Mutex
	dropReplyOp   int32         // opcode whose next reply is swallowed (0: none)
	dropped       chan struct{} // closed when the reply was swallowed
	holdOp        int32         // opcode of a request to hold back
	holdPath      string        // ... whose path contains this text
	holding       chan struct{} // closed when the request is held
	release       chan struct{} // closed by the test to let it go
	sessionID     int64
	passwd        []byte
	notifications atomic.Int64
	conns         []net.Conn
	partitioned   bool // dials fail
	dials         int
	sent          map[int32]int // requests written, by opcode
}

// sentOps returns how many requests with opcode op were written.
func (f *faults) sentOps(op int32) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sent[op]
}

// partition cuts the client off the server (existing connections close, new dials fail) until
// heal is called.
func (f *faults) partition() {
	f.mu.Lock()
	f.partitioned = true
	f.mu.Unlock()
	f.breakConnections()
}

// heal ends a partition.
func (f *faults) heal() {
	f.mu.Lock()
	f.partitioned = false
	f.mu.Unlock()
}

const (
	opCreate  = 1
	opGetData = 4
	opDelete  = 2

	opSetWatches      = 101
	opCreateContainer = 19
)

func (f *faults) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	f.mu.Lock()
	cut := f.partitioned
	f.mu.Unlock()
	if cut {
		return nil, errors.New("faults: partitioned")
	}
	c, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	fc := &faultConn{Conn: c, f: f, xids: map[int32]int32{}}
	f.mu.Lock()
	f.conns = append(f.conns, c)
	f.dials++
	if f.dials > 1 {
		// A reconnection: hold replies back until the client has re-sent its watches (or a
		// moment (300ms) after the connect response, when it has none; timed from the response, as the
		// handshake alone can outlast a timer started at the dial on a loaded machine).
		// go-zookeeper v1.0.4 reads Conn.lastZxid in sendSetWatches while recvLoop writes it for
		// each reply (go-zookeeper/zk PR #35, open), which -race reports; this only delays
		// replies, as a slow network would.
		fc.gate = make(chan struct{})
	}
	f.mu.Unlock()
	return fc, nil
}

// dropNextReply arms the swallowing of the next reply to a request with opcode op.
func (f *faults) dropNextReply(op int32) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dropReplyOp = op
	f.dropped = make(chan struct{})
	return f.dropped
}

// holdNext arms holding back the next request with opcode op whose path contains sub. It returns
// a channel closed once the request is held, and a function that lets it go.
func (f *faults) holdNext(op int32, sub string) (<-chan struct{}, func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.holdOp, f.holdPath = op, sub
	f.holding, f.release = make(chan struct{}), make(chan struct{})
	rel := f.release
	var once sync.Once
	return f.holding, func() { once.Do(func() { close(rel) }) }
}

// credentials returns the last session id and password the server handed out.
func (f *faults) credentials() (int64, []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sessionID, f.passwd
}

// breakConnections closes every connection made so far (a network blip).
func (f *faults) breakConnections() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		_ = c.Close()
	}
	f.conns = nil
}

type faultConn struct {
	net.Conn
	f       *faults
	mu      sync.Mutex
	wrote   bool // the connect request went out
	read    bool // the connect response came in
	xids    map[int32]int32
	pending []byte

	gate      chan struct{} // nil, or closed once replies may flow on a reconnection
	gateOnce  sync.Once
	gateTimer *time.Timer
}

func (c *faultConn) openGate() { c.gateOnce.Do(func() { close(c.gate) }) }

func (c *faultConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	first := !c.wrote
	c.wrote = true
	var xid, op int32
	if !first && len(b) >= 12 {
		xid = int32(binary.BigEndian.Uint32(b[4:8]))
		op = int32(binary.BigEndian.Uint32(b[8:12]))
		c.xids[xid] = op
	}
	c.mu.Unlock()
	if op == opSetWatches && c.gate != nil {
		defer c.openGate() // after the request is written
	}
	if !first && op != 0 {
		c.f.mu.Lock()
		if c.f.sent == nil {
			c.f.sent = map[int32]int{}
		}
		c.f.sent[op]++
		var holding, release chan struct{}
		if c.f.holdOp == op && c.f.holding != nil && strings.Contains(string(b[12:]), c.f.holdPath) {
			holding, release = c.f.holding, c.f.release
			c.f.holdOp, c.f.holding = 0, nil
		}
		c.f.mu.Unlock()
		if holding != nil {
			close(holding)
			<-release
		}
	}
	return c.Conn.Write(b)
}

func (c *faultConn) Read(b []byte) (int, error) {
	for {
		c.mu.Lock()
		if len(c.pending) > 0 {
			n := copy(b, c.pending)
			c.pending = c.pending[n:]
			c.mu.Unlock()
			return n, nil
		}
		c.mu.Unlock()
		var hdr [4]byte
		if _, err := io.ReadFull(c.Conn, hdr[:]); err != nil {
			return 0, err
		}
		body := make([]byte, binary.BigEndian.Uint32(hdr[:]))
		if _, err := io.ReadFull(c.Conn, body); err != nil {
			return 0, err
		}
		if c.read && c.gate != nil {
			<-c.gate
		}
		c.mu.Lock()
		if !c.read {
			c.read = true
			if c.gate != nil {
				c.gateTimer = time.AfterFunc(300*time.Millisecond, c.openGate)
			}
			if len(body) >= 20 {
				sid := int64(binary.BigEndian.Uint64(body[8:16]))
				n := int(binary.BigEndian.Uint32(body[16:20]))
				if n >= 0 && 20+n <= len(body) && sid != 0 {
					c.f.mu.Lock()
					c.f.sessionID, c.f.passwd = sid, append([]byte(nil), body[20:20+n]...)
					c.f.mu.Unlock()
				}
			}
		} else if len(body) >= 4 {
			xid := int32(binary.BigEndian.Uint32(body[0:4]))
			if xid == -1 {
				c.f.notifications.Add(1)
			}
			op := c.xids[xid]
			delete(c.xids, xid)
			c.f.mu.Lock()
			drop := op != 0 && op == c.f.dropReplyOp
			var dropped chan struct{}
			if drop {
				c.f.dropReplyOp = 0
				dropped = c.f.dropped
			}
			c.f.mu.Unlock()
			if drop {
				c.mu.Unlock()
				_ = c.Conn.Close()
				close(dropped)
				return 0, io.ErrUnexpectedEOF
			}
		}
		c.pending = append(append(c.pending, hdr[:]...), body...)
		c.mu.Unlock()
	}
}

// endedWithSession reports whether err is how a lease ends when its session is closed elsewhere
// (expireSession): ErrSessionExpired, or on a target of several servers ErrLockLost too. There the
// session may be closed through another member than the client's, which can deliver the deletion
// of the lease's node before the client learns that its session is gone.
func endedWithSession(t testing.TB, err error) bool {
	return errors.Is(err, ErrSessionExpired) || (len(testServer(t)) > 1 && errors.Is(err, ErrLockLost))
}

// expireSession ends a session on the server the standard way: attach a second connection to it
// with its id and password and close it there.
func expireSession(t testing.TB, sid int64, passwd []byte) {
	t.Helper()
	var lastErr error
	for _, addr := range testServer(t) {
		if lastErr = closeSessionAt(addr, sid, passwd); lastErr == nil {
			return
		}
	}
	t.Fatalf("expire session 0x%x: %v", sid, lastErr)
}

func closeSessionAt(addr string, sid int64, passwd []byte) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	req := binary.BigEndian.AppendUint32(nil, 0) // protocol version
	req = binary.BigEndian.AppendUint64(req, 0)  // last zxid seen
	req = binary.BigEndian.AppendUint32(req, uint32(testTimeout/time.Millisecond))
	req = binary.BigEndian.AppendUint64(req, uint64(sid))
	req = binary.BigEndian.AppendUint32(req, uint32(len(passwd)))
	req = append(req, passwd...)
	if err := writeFrame(c, req); err != nil {
		return err
	}
	resp, err := readFrame(c)
	if err != nil {
		return err
	}
	if len(resp) < 16 || int64(binary.BigEndian.Uint64(resp[8:16])) != sid {
		return errors.New("server refused to attach the session")
	}
	closeReq := binary.BigEndian.AppendUint32(nil, 1)               // xid
	closeReq = binary.BigEndian.AppendUint32(closeReq, ^uint32(10)) // opcode -11: closeSession
	if err := writeFrame(c, closeReq); err != nil {
		return err
	}
	_, err = readFrame(c)
	return err
}

func writeFrame(w io.Writer, b []byte) error {
	_, err := w.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...))
	return err
}

func readFrame(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	_, err := io.ReadFull(r, b)
	return b, err
}
