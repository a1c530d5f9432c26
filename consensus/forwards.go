package consensus

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkd-io/zkd/internal/third_party/raft"
)

// A follower forwards its clients' writes to the leader over the cluster RPC (rpcSubmit), and the
// leader answers each once it applied the entry. The answers are sent from the apply side: the
// leader's FSM recognises a forwarded entry by its proposer's origin tag and sequence number,
// queues the answer on the connection the write came on, and, once the batch is applied, wakes
// the connection's writer (rpcReplies.flush), which sends everything queued in one write. A
// batch of forwarded writes costs one write(2) per connection instead of a goroutine and a
// write(2) per write.
//
// A forwarded write that is never applied here (leadership lost, an enqueue timeout) is learned
// from its raft future, as a write proposed locally is (settle.go): the connection's writer looks
// at what it still waits for every settleFastWait, and reads the future of any write older than
// that on a goroutine of its own. Whichever side answers first answers; the other does nothing.

// forwardKey names a forwarded write: the proposing node incarnation's origin tag and the
// write's sequence number there. Both are in the entry (command.origin, command.seq).
type forwardKey struct {
	origin string
	seq    uint64
}

// forwarded is one write a peer forwarded to this node as leader, from its proposal until its
// answer is queued.
type forwarded struct {
	key      forwardKey
	id       uint64 // the RPC call to answer
	out      *rpcReplies
	fut      raft.ApplyFuture // set before the write is queued on out
	at       time.Time        // when it was proposed
	answered atomic.Bool
	watched  bool // its future is being read; guarded by out.mu
}

// claim reports whether the caller is the one to answer w.
func (w *forwarded) claim() bool { return w.answered.CompareAndSwap(false, true) }

// forwards holds the writes peers forwarded to this node as leader until they are answered, and
// answers them: from the FSM as their entries are applied (forwardApplied, flushForwards), or
// from their raft futures (sweepForwards, forwardOutcome).
type forwards struct {
	n     *Node
	count atomic.Int64 // len(m), so that the FSM of a node nobody forwards to never locks
	mu    sync.Mutex
	m     map[forwardKey]*forwarded

	// FSM goroutine only: the connections answered in the batch being applied, and the last
	// forward answered.
	flushing []*rpcReplies
	last     forwardAnswer
}

func newForwards(n *Node) *forwards { return &forwards{n: n, m: make(map[forwardKey]*forwarded)} }

// add registers w; a write registered earlier under the same key (a resubmission) is left to
// its future.
func (f *forwards) add(w *forwarded) {
	f.mu.Lock()
	if _, dup := f.m[w.key]; !dup {
		f.count.Add(1)
	}
	f.m[w.key] = w
	f.mu.Unlock()
}

// take removes and returns the write registered under k, if any.
func (f *forwards) take(k forwardKey) *forwarded {
	if f.count.Load() == 0 {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.m[k]
	if w != nil {
		delete(f.m, k)
		f.count.Add(-1)
	}
	return w
}

// drop removes w if it is still the write registered under its key.
func (f *forwards) drop(w *forwarded) {
	f.mu.Lock()
	if f.m[w.key] == w {
		delete(f.m, w.key)
		f.count.Add(-1)
	}
	f.mu.Unlock()
}

// rpcReplies writes the answers on one accepted cluster RPC connection. Answers are queued as
// frames; the connection's writer goroutine (runReplies), the only one writing the socket, sends
// everything queued in one write, so frames leave whole and in order. It also keeps the
// forwarded writes that came on the connection until they are answered.
type rpcReplies struct {
	conn net.Conn
	wake chan struct{}
	mu   struct {
		sync.Mutex
		buf     []byte       // frames to write
		spare   []byte       // a written buffer kept for the next frames
		waiting []*forwarded // forwarded writes not known to be answered, in proposal order
		armed   bool         // the writer sweeps waiting every settleFastWait
		closed  bool
	}
}

func newRPCReplies(conn net.Conn) *rpcReplies {
	return &rpcReplies{conn: conn, wake: make(chan struct{}, 1)}
}

// take takes the queued frames for one write, or returns nil when there are none.
func (o *rpcReplies) take() []byte {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.mu.buf) == 0 {
		return nil
	}
	buf := o.mu.buf
	o.mu.buf, o.mu.spare = o.mu.spare[:0], nil
	return buf
}

// wrote keeps buf, written, for the next frames.
func (o *rpcReplies) wrote(buf []byte) {
	if cap(buf) > maxSpareReplies {
		return
	}
	o.mu.Lock()
	o.mu.spare = buf[:0]
	o.mu.Unlock()
}

// flush wakes the writer for the queued frames (the FSM calls it at the end of a batch).
func (o *rpcReplies) flush() { o.signal() }

// queue adds an answer; the writer sends it after the next signal.
func (o *rpcReplies) queue(id uint64, status byte, payload []byte) {
	o.mu.Lock()
	if !o.mu.closed {
		o.mu.buf = appendFrame(o.mu.buf, id, status, payload)
	}
	o.mu.Unlock()
}

// signal wakes the writer.
func (o *rpcReplies) signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// reply queues an answer and wakes the writer.
func (o *rpcReplies) reply(id uint64, status byte, payload []byte) {
	o.queue(id, status, payload)
	o.signal()
}

// await keeps w until it is answered, and has the writer sweep the list until it is empty.
func (o *rpcReplies) await(w *forwarded) {
	o.mu.Lock()
	o.mu.waiting = append(o.mu.waiting, w)
	arm := !o.mu.armed
	o.mu.armed = true
	o.mu.Unlock()
	if arm {
		o.signal()
	}
}

// close stops the writer; answers queued after it are dropped.
func (o *rpcReplies) close() {
	o.mu.Lock()
	o.mu.closed = true
	o.mu.Unlock()
	o.signal()
}

// run writes the queued answers until the connection is closed or fails, or the node stops, and
// watches the forwarded writes that came on it (see the top of this file). On its way out it
// forgets the writes still unanswered: nobody is left to answer.
func (f *forwards) runReplies(o *rpcReplies) {
	n := f.n
	sweep := time.NewTimer(settleFastWait)
	sweep.Stop()
	ticking := false
	defer sweep.Stop()
	defer f.abandonForwards(o)
	for {
		select {
		case <-o.wake:
		case <-sweep.C:
			ticking = false
			f.sweepForwards(o)
		case <-n.stop:
			o.conn.Close()
			return
		}
		o.mu.Lock()
		closed := o.mu.closed
		if o.mu.armed && !ticking {
			sweep.Reset(settleFastWait)
			ticking = true
		}
		o.mu.Unlock()
		if buf := o.take(); buf != nil {
			_ = o.conn.SetWriteDeadline(time.Now().Add(rpcWriteTimeout))
			_, err := o.conn.Write(buf)
			if err != nil {
				o.conn.Close()
				o.close()
				return
			}
			o.wrote(buf)
			o.signal() // frames queued during the write
		}
		if closed {
			return
		}
	}
}

// maxSpareReplies bounds the buffer a writer keeps for the next answers.
const maxSpareReplies = 1 << 20

// sweepForwards drops the answered writes from o's list and reads the future of every one
// proposed more than settleFastWait ago and not watched yet.
func (f *forwards) sweepForwards(o *rpcReplies) {
	n := f.n
	now := time.Now()
	o.mu.Lock()
	keep := o.mu.waiting[:0]
	var late []*forwarded
	for _, w := range o.mu.waiting {
		if w.answered.Load() {
			continue
		}
		keep = append(keep, w)
		if !w.watched && now.Sub(w.at) >= settleFastWait {
			w.watched = true
			late = append(late, w)
		}
	}
	clear(o.mu.waiting[len(keep):])
	o.mu.waiting = keep
	o.mu.armed = len(keep) > 0
	o.mu.Unlock()
	for _, w := range late {
		if !n.goTracked(func() { f.forwardOutcome(w, waitFuture(w.fut, 0, n.stop)) }) {
			return
		}
	}
}

// abandonForwards forgets the writes that came on o and are still unanswered.
func (f *forwards) abandonForwards(o *rpcReplies) {
	o.mu.Lock()
	o.mu.closed = true
	waiting := o.mu.waiting
	o.mu.waiting = nil
	o.mu.Unlock()
	for _, w := range waiting {
		if w.claim() {
			f.drop(w)
		}
	}
}

// forwardOutcome answers w from its raft future, unless it was answered already.
func (f *forwards) forwardOutcome(w *forwarded, err error) {
	n := f.n
	if !w.claim() {
		return
	}
	f.drop(w)
	status, out := classifyApply(err)
	if status == statusOK {
		out = encodeMsg(&commitMsg{Index: w.fut.Index(), Term: n.raft.CurrentTerm()})
	}
	w.out.reply(w.id, status, out)
}

// forwardApplied is called by the FSM for every applied entry another node proposed: if that
// node forwarded it here, its answer (the entry's index and term, which let the follower relay
// the commit to its own Raft: relay.go) is queued, and sent when the batch is done
// (flushForwards). It runs on the FSM goroutine, which alone touches f.flushing.
func (f *forwards) forwardApplied(origin string, seq, index, term uint64) {
	w := f.take(forwardKey{origin, seq})
	if w == nil || !w.claim() {
		return
	}
	w.out.queue(w.id, statusOK, encodeMsg(&commitMsg{Index: index, Term: term}))
	f.last = forwardAnswer{server: originServer(origin), index: index}
	for _, o := range f.flushing {
		if o == w.out {
			return
		}
	}
	f.flushing = append(f.flushing, w.out)
}

// forwardAnswer names the server whose forwarded write was the last one answered as applied,
// and the index its answer carried.
type forwardAnswer struct {
	server string
	index  uint64
}

// flushForwards sends the answers queued in this batch (rpcReplies.flush).
func (f *forwards) flushForwards() {
	for i, o := range f.flushing {
		o.flush()
		f.flushing[i] = nil
	}
	f.flushing = f.flushing[:0]
}
