package consensus

import (
	"bufio"
	"bytes"
	"net"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zkd-io/zkd/internal/third_party/raft"

	"github.com/zkd-io/zkd/internal/testkit/zktest"
)

// stuckFuture is a raft future that resolves with err once release is closed.
type stuckFuture struct {
	release chan struct{}
	err     error
}

func (f *stuckFuture) Error() error          { <-f.release; return f.err }
func (f *stuckFuture) Index() uint64         { return 0 }
func (f *stuckFuture) Response() interface{} { return nil }

// countingConn counts the writes made on a connection.
type countingConn struct {
	net.Conn
	writes atomic.Int64
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

type frame struct {
	id      uint64
	status  byte
	payload []byte
}

// forwardRig is a node's answering side of one cluster RPC connection, without Raft: what the
// peer receives comes out of frames.
type forwardRig struct {
	n      *Node
	out    *rpcReplies
	conn   *countingConn
	frames chan frame
}

func newForwardRig(t *testing.T) *forwardRig {
	t.Helper()
	local, peer := net.Pipe()
	r := &forwardRig{
		n:      forwardNode(t),
		conn:   &countingConn{Conn: local},
		frames: make(chan frame, 100),
	}
	r.out = newRPCReplies(r.conn)
	if !r.n.goTracked(func() { r.n.fwd.runReplies(r.out) }) {
		t.Fatal("goTracked refused")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		br := bufio.NewReader(peer)
		for {
			id, status, payload, err := readFrame(br)
			if err != nil {
				return
			}
			r.frames <- frame{id, status, payload}
		}
	}()
	t.Cleanup(func() {
		close(r.n.stop)
		r.n.wg.Wait()
		local.Close()
		peer.Close()
		<-done
	})
	return r
}

// forwardNode is a node with only what answering forwarded writes needs: no Raft.
func forwardNode(t *testing.T) *Node {
	n := &Node{log: testLogger(t), stop: make(chan struct{})}
	n.fwd = newForwards(n)
	return n
}

// forward registers a forwarded write as submitForwarded does once it is proposed.
func (r *forwardRig) forward(origin string, seq, id uint64, fut raft.ApplyFuture) *forwarded {
	w := &forwarded{key: forwardKey{origin, seq}, id: id, out: r.out, fut: fut, at: time.Now()}
	r.n.fwd.add(w)
	r.out.await(w)
	return w
}

// TestForwardAnswersPerBatch: the answers to forwarded writes applied in one batch go out in one
// write, each with its call id and the entry's index and term; the futures are never read.
//
// In a synctest bubble: the test needs the writer idle (blocked) while the batch is queued. It
// used to wait only until the writer had taken its wake-up, and a writer that took it but had
// not yet looked at the queue sent the batch's first answers early (seen once in CI).
func TestForwardAnswersPerBatch(t *testing.T) {
	synctest.Test(t, testForwardAnswersPerBatch)
}

func testForwardAnswersPerBatch(t *testing.T) {
	r := newForwardRig(t)
	never := &stuckFuture{release: make(chan struct{})}
	for i := uint64(1); i <= 5; i++ {
		r.forward("f1", i, 100+i, never)
	}
	r.forward("f2", 1, 200, never) // applied in a later batch
	// The writer took the signal that armed its sweep and waits again.
	synctest.Wait()
	before := r.conn.writes.Load()
	// One batch, as the FSM applies it: a local entry, the five forwarded ones, one unknown.
	r.n.fwd.forwardApplied("other", 9, 40, 3)
	for i := uint64(1); i <= 5; i++ {
		r.n.fwd.forwardApplied("f1", i, 40+i, 3)
	}
	// Nothing has woken the writer yet: the five answers wait for the end of the batch.
	r.out.mu.Lock()
	queued := len(r.out.mu.buf)
	r.out.mu.Unlock()
	if len(r.out.wake) > 0 {
		t.Fatal("the writer was woken before the batch ended")
	}
	if want := 5 * (13 + len(encodeMsg(&commitMsg{Index: 41, Term: 3}))); queued != want {
		t.Fatalf("%d bytes queued before the batch ended, want %d", queued, want)
	}
	r.n.fwd.flushForwards()
	for i := uint64(1); i <= 5; i++ {
		f := <-r.frames
		var m commitMsg
		if err := decodeMsg(f.payload, &m); err != nil || f.id != 100+i || f.status != statusOK || m.Index != 40+i || m.Term != 3 {
			t.Fatalf("answer %d: id %d status %d %+v (%v)", i, f.id, f.status, m, err)
		}
	}
	if got := r.conn.writes.Load() - before; got != 1 {
		t.Fatalf("five answers of one batch took %d writes", got)
	}
	// Applying an entry twice (it cannot be, but a resubmission shares the key) answers once.
	r.n.fwd.forwardApplied("f1", 3, 43, 3)
	r.n.fwd.forwardApplied("f2", 1, 50, 3)
	r.n.fwd.flushForwards()
	if f := <-r.frames; f.id != 200 {
		t.Fatalf("next answer is for call %d, want 200", f.id)
	}
	if n := r.n.fwd.count.Load(); n != 0 {
		t.Fatalf("%d forwarded writes still registered", n)
	}
}

// TestForwardFailureFromFuture: a forwarded write that is not applied is answered from its
// future (after settleFastWait) with the status the follower acts on, and only once.
func TestForwardFailureFromFuture(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status byte
	}{
		{raft.ErrNotLeader, statusNotProposed},
		{raft.ErrEnqueueTimeout, statusNotProposed},
		{raft.ErrLeadershipLost, statusUnknown},
	} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			r := newForwardRig(t)
			fut := &stuckFuture{release: make(chan struct{}), err: tc.err}
			ok := &stuckFuture{release: make(chan struct{})}
			r.forward("f1", 1, 7, fut)
			r.forward("f1", 2, 8, ok)
			close(fut.release)
			// The second is applied: answered by the apply side, whatever its future says later.
			r.n.fwd.forwardApplied("f1", 2, 12, 4)
			r.n.fwd.flushForwards()
			got := map[uint64]byte{}
			for range 2 {
				f := <-r.frames
				got[f.id] = f.status
			}
			if got[7] != tc.status || got[8] != statusOK {
				t.Fatalf("answers %v, want call 7 %d and call 8 %d", got, tc.status, statusOK)
			}
			// Applied after all (a leadership change can still commit it): no second answer.
			r.n.fwd.forwardApplied("f1", 1, 11, 4)
			r.n.fwd.flushForwards()
			close(ok.release)
			r.out.reply(99, statusOK, nil)
			if f := <-r.frames; f.id != 99 {
				t.Fatalf("call %d answered again", f.id)
			}
			if n := r.n.fwd.count.Load(); n != 0 {
				t.Fatalf("%d forwarded writes still registered", n)
			}
		})
	}
}

// TestForwardAbandoned: when the connection ends, the writes that came on it are forgotten, and
// applying them later answers nothing.
func TestForwardAbandoned(t *testing.T) {
	r := newForwardRig(t)
	never := &stuckFuture{release: make(chan struct{})}
	defer close(never.release)
	w := r.forward("f1", 1, 5, never)
	r.out.close()
	r.n.wg.Wait() // the writer ends with the connection
	if !w.answered.Load() || r.n.fwd.count.Load() != 0 {
		t.Fatalf("answered %v, %d still registered", w.answered.Load(), r.n.fwd.count.Load())
	}
	r.n.fwd.forwardApplied("f1", 1, 9, 2)
	r.n.fwd.flushForwards()
	if len(r.frames) != 0 {
		t.Fatalf("%d answers after the connection ended", len(r.frames))
	}
}

// socketRig is a node's answering side of one cluster RPC connection on a real loopback socket,
// with no writer goroutine started; peer is the other end.
func socketRig(t *testing.T) (*Node, *rpcReplies, net.Conn) {
	t.Helper()
	local, peer := zktest.TCPPair(t)
	n := forwardNode(t)
	return n, newRPCReplies(local), peer
}

// TestForwardFlushFullSocket: when the peer does not read, the FSM's flush still returns at
// once; the writer sends everything once the peer reads, every frame whole and in order.
func TestForwardFlushFullSocket(t *testing.T) {
	n, out, peer := socketRig(t)
	const frames, size = 256, 64 << 10 // 16 MiB: more than loopback socket buffers hold
	payload := func(i int) []byte {
		b := make([]byte, size)
		for j := range b {
			b[j] = byte(i + j)
		}
		return b
	}
	for i := range frames {
		out.queue(uint64(i+1), statusOK, payload(i))
	}
	out.flush() // must not wait for the peer
	if len(out.wake) == 0 {
		t.Fatal("the flush left frames without waking the writer")
	}
	if !n.goTracked(func() { n.fwd.runReplies(out) }) {
		t.Fatal("goTracked refused")
	}
	defer func() { close(n.stop); n.wg.Wait() }()
	_ = peer.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(peer)
	for i := range frames {
		id, status, got, err := readFrame(br)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if id != uint64(i+1) || status != statusOK || !bytes.Equal(got, payload(i)) {
			t.Fatalf("frame %d: id %d status %d, %d bytes; want id %d and its payload", i, id, status, len(got), i+1)
		}
	}
}
