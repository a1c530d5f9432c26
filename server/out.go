package server

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/zkd-io/zkd/jute"
)

// errSlowConsumer reports a client that did not read its replies and notifications fast enough.
var errSlowConsumer = errors.New("server: slow consumer: outbound limit reached")

// outQueue is a connection's single ordered output: replies, ping replies and watch
// notifications are encoded straight into one byte buffer under a mutex, in the order they are
// queued. Whoever writes swaps the buffer for an empty one and writes it in one call, so every
// burst is one coalesced write. The connection's writer (writeLoop) writes what pushes from
// anywhere queue; the reader, for a read it answers itself, writes the reply with writeInline,
// saving a wake-up of the writer per reply. One at a time: the one that takes the buffer sets
// writing, and the other leaves the socket alone until it is cleared. The writer is a goroutine
// only while there is something for it to write: signal starts it, and it ends once the queue is
// empty, so an idle connection holds no writer. The writer that finds the queue closed and
// drained calls the queue's end function, once.
// Pushing never blocks: a queue that grows past its limit marks the connection as a slow
// consumer and closes it, so watch delivery never stalls apply.
// A long child list is queued as a stream (outstream.go) rather than as bytes: segs holds, ahead of
// buf, the streams and the bytes queued before each, and the stream is encoded as it is written.
type outQueue struct {
	mu struct {
		sync.Mutex
		buf []byte
		// segs is what is queued ahead of buf, in order: streams, and the bytes queued before
		// each (or left by a partial write). segBytes is the bytes among them and streamBytes
		// what the streams have left to write.
		segs                  []outSeg
		segBytes, streamBytes int
		closed                bool  // no more frames are accepted
		finish                bool  // close the socket once what is queued is written
		err                   error // why the queue was closed
		// timed are the requests whose replies are in buf and are timed for the slow-request
		// log; the goroutine that writes buf hands them back once it is written.
		timed []*request
		// writing is set while a goroutine writes a buffer it took; only it writes the socket.
		writing bool
		// running is set while the writer runs; done once it ended the queue (end was called).
		running, done bool
		// run starts the writer, and end is told why the queue ended (nil: closed after a
		// flush); both set by setWriter. Until then nothing starts the writer.
		run func(func())
		end func(error)
		// spare and spareTimed are the buffers of the last write, emptied for reuse.
		spare      []byte
		spareTimed []*request
		// inWrite is the bytes being written (inWriteStream: of them, what streams had left);
		// accounted, the bytes held in memory last told to budget (everything queued or being
		// written but the streams, which hold no encoded bytes).
		inWrite, inWriteStream, accounted int
	}
	// limit is the most bytes the queue may hold (streams counted at their size) before the
	// client counts as a slow consumer; pressured, the most it may hold in memory while the
	// server's budget is exceeded.
	limit, pressured int
	// budget bounds what all queues hold in memory together; held is what the queue holds,
	// streams included, for the reader's lock-free check, and room is signalled whenever it
	// went down.
	budget *outBudget
	held   atomic.Int64
	room   chan struct{}

	// The socket and what is told of each write, set by setSink before anything writes.
	nc           net.Conn
	writeTimeout time.Duration
	sent         func(bytes int)
	written      func([]*request, time.Time)
	// raw is nc's file descriptor when nc is a plain socket, nil otherwise (TLS); flush writes
	// only to a plain socket, with one non-blocking write.
	raw syscall.RawConn
}

// keptOutBuf is the largest written buffer a queue keeps for its next burst. Anything bigger
// (a large reply, a burst of pipelined ones) is let go once written, so what a connection holds
// follows what it has in flight, not the largest reply it ever got: 6,000 idle lock contenders
// that had each read a 6,000-child directory once held 1.6 GB when every queue kept up to 1 MiB.
const keptOutBuf = 16 << 10

// readerStall is how many queued bytes make a connection's reader wait before it reads the next
// request: a client that does not read its replies gets TCP back-pressure rather than a growing
// queue. Watch notifications still queue, up to the queue's limit.
const readerStall = 1 << 20

// pressuredOutLimit is a queue's limit while the server's outbound budget is exceeded (or twice
// the largest frame, if more).
const pressuredOutLimit = 4 << 20

// newOutQueue returns a queue that closes as a slow consumer past limit bytes (past pressured
// while budget is exceeded). budget may be nil: no server-wide bound.
func newOutQueue(limit, pressured int, budget *outBudget) *outQueue {
	return &outQueue{limit: limit, pressured: min(limit, pressured), budget: budget,
		room: make(chan struct{}, 1)}
}

// outSeg is one of outQueue's segments: bytes, or a stream.
type outSeg struct {
	b []byte
	s outStream
}

// settleLocked brings the queue's share of the budget to what it holds in memory and held to
// what it holds in all, and returns the budget's change and whether held went down, which the
// caller passes to settled once q.mu is released.
func (q *outQueue) settleLocked() (int64, bool) {
	now := len(q.mu.buf) + q.mu.segBytes + q.mu.inWrite
	d := now - q.mu.accounted
	q.mu.accounted = now
	held := int64(now + q.mu.streamBytes + q.mu.inWriteStream)
	return int64(d), q.held.Swap(held) > held
}

// settled tells the budget of a change returned by settleLocked; a queue that went down also
// wakes a reader waiting for room.
func (q *outQueue) settled(d int64, freed bool) {
	if d != 0 {
		q.budget.add(d)
	}
	if freed {
		select {
		case q.room <- struct{}{}:
		default:
		}
	}
}

// queuedLocked is what the queue holds, not counting what is being written: in memory, and
// in all (streams at what they have left).
func (q *outQueue) queuedLocked() (mem, all int) {
	mem = len(q.mu.buf) + q.mu.segBytes
	return mem, mem + q.mu.streamBytes
}

// overLocked reports whether the queue is past its limit: what it holds in all beyond limit,
// or in memory beyond pressured while the server's budget is exceeded.
func (q *outQueue) overLocked() bool {
	mem, all := q.queuedLocked()
	return all > q.limit || (mem > q.pressured && q.budget.over())
}

// dropLocked empties the queue of everything not yet being written.
func (q *outQueue) dropLocked() {
	q.mu.buf = q.mu.buf[:0]
	clear(q.mu.segs)
	q.mu.segs = q.mu.segs[:0]
	q.mu.segBytes, q.mu.streamBytes = 0, 0
	clear(q.mu.timed)
	q.mu.timed = q.mu.timed[:0]
}

// roomy reports whether the connection's reader may read its next request: the queue holds at
// most readerStall bytes and, while the server's budget is exceeded, nothing.
func (q *outQueue) roomy() bool {
	h := q.held.Load()
	return h == 0 || (h <= readerStall && !q.budget.over())
}

// waitRoom waits until roomy or stop is closed, and reports whether it is roomy.
func (q *outQueue) waitRoom(stop <-chan struct{}) bool {
	for !q.roomy() {
		q.signal() // whatever is queued is the writer's to write
		select {
		case <-q.room:
		case <-q.budget.under():
		case <-stop:
			return false
		}
	}
	return true
}

// outBudget bounds the reply and notification bytes queued for clients across all connections
// (Config.MaxTotalOutboundBytes). While it is exceeded, readers with anything queued wait before
// reading more requests, and a queue's slow-consumer limit drops to pressuredOutLimit. A nil
// budget bounds nothing.
type outBudget struct {
	limit  int64
	queued atomic.Int64
	isOver atomic.Bool
	mu     sync.Mutex
	// open is closed while queued is within limit; a new, open one is made when it goes over.
	open chan struct{}
}

func newOutBudget(limit int64) *outBudget {
	if limit <= 0 {
		return nil
	}
	b := &outBudget{limit: limit, open: make(chan struct{})}
	close(b.open)
	return b
}

func (b *outBudget) add(d int64) {
	if b == nil {
		return
	}
	if (b.queued.Add(d) > b.limit) == b.isOver.Load() {
		return
	}
	b.mu.Lock()
	over := b.queued.Load() > b.limit
	if over != b.isOver.Load() {
		b.isOver.Store(over)
		if over {
			b.open = make(chan struct{})
		} else {
			close(b.open)
		}
	}
	b.mu.Unlock()
}

func (b *outBudget) over() bool { return b != nil && b.isOver.Load() }

// under returns a channel that is closed once the budget is not exceeded (nil for no budget).
func (b *outBudget) under() <-chan struct{} {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.open
}

// queuedBytes is what all queues hold.
func (b *outBudget) queuedBytes() int64 {
	if b == nil {
		return 0
	}
	return b.queued.Load()
}

// setSink sets where the queue writes: nc, each write bounded by writeTimeout (0: none). After
// each write, sent is told the bytes written and, when timed replies were among them, written is
// given their requests and the time (read once per write). It must be called before setWriter
// and writeInline.
func (q *outQueue) setSink(nc net.Conn, writeTimeout time.Duration, sent func(bytes int), written func([]*request, time.Time)) {
	q.nc, q.writeTimeout, q.sent, q.written = nc, writeTimeout, sent, written
	q.raw = rawConn(nc)
}

// setWriter lets the queue start its writer with run whenever something is to be written, and
// starts it at once if something is. end is called once, by the writer, when the queue has
// ended: with nil after a flushing close, or with the error it was closed with (or of the write
// that failed). The caller closes the socket.
func (q *outQueue) setWriter(run func(func()), end func(error)) {
	q.mu.Lock()
	q.mu.run, q.mu.end = run, end
	q.mu.Unlock()
	q.signal()
}

// signal makes sure what is queued will be written, and a closed queue ended: it starts the
// writer unless it runs already or an inline write is in progress (which signals again once it
// is done, if anything is left).
func (q *outQueue) signal() {
	q.mu.Lock()
	run := q.claimWriterLocked()
	q.mu.Unlock()
	if run != nil {
		run(q.writeLoop)
	}
}

// claimWriterLocked returns the function to start the writer with when the writer must start
// now, and marks it running; nil otherwise. q.mu must be held.
func (q *outQueue) claimWriterLocked() func(func()) {
	if q.mu.running || q.mu.writing || q.mu.done || q.mu.run == nil || (q.emptyLocked() && !q.mu.closed) {
		return nil
	}
	q.mu.running = true
	return q.mu.run
}

// emptyLocked reports whether nothing is queued.
func (q *outQueue) emptyLocked() bool { return len(q.mu.buf) == 0 && len(q.mu.segs) == 0 }

// pushReply queues a reply frame without waking the writer: whoever answered the request calls
// flush or writeInline once it is answered. body is encoded only when h.Err is OK (error
// replies are header-only); a long child list is queued as a stream. timed, if not nil, is the
// request it answers, to be handed to the written callback once the reply is on the socket. It
// returns the frame's size and false if the queue is closed or overflowed.
func (q *outQueue) pushReply(h jute.ReplyHeader, body jute.Record, timed *request) (int, bool) {
	if h.Err != jute.CodeOK {
		body = nil
	}
	if r, ok := body.(*childrenReply); ok {
		if s := r.stream(&h); s != nil {
			return q.pushStream(s, timed)
		}
	}
	return q.push(false, timed, &h, body)
}

// pushStream queues a stream frame without waking the writer, as pushReply does.
func (q *outQueue) pushStream(s outStream, timed *request) (int, bool) {
	size := s.remaining()
	q.mu.Lock()
	if q.mu.closed {
		q.mu.Unlock()
		return 0, false
	}
	if len(q.mu.buf) > 0 {
		q.mu.segs = append(q.mu.segs, outSeg{b: q.mu.buf})
		q.mu.segBytes += len(q.mu.buf)
		q.mu.buf = nil
	}
	q.mu.segs = append(q.mu.segs, outSeg{s: s})
	q.mu.streamBytes += size
	return size, q.pushedLocked(false, timed)
}

// pushFrame queues one frame holding recs in order (nil records are skipped) and wakes the
// writer.
func (q *outQueue) pushFrame(recs ...jute.Record) bool {
	_, ok := q.push(true, nil, recs...)
	return ok
}

// push queues one frame holding recs and returns its size; wake wakes the writer.
func (q *outQueue) push(wake bool, timed *request, recs ...jute.Record) (int, bool) {
	q.mu.Lock()
	if q.mu.closed {
		q.mu.Unlock()
		return 0, false
	}
	before := len(q.mu.buf)
	q.mu.buf = jute.AppendFrame(q.mu.buf, recs...)
	return len(q.mu.buf) - before, q.pushedLocked(wake, timed)
}

// pushedLocked ends a push, which queued a frame with q.mu held: it records timed, closes an
// overflowed queue as a slow consumer, settles the budget and, if wake (or overflowed), starts
// the writer. It releases q.mu, and reports false if the queue overflowed.
func (q *outQueue) pushedLocked(wake bool, timed *request) bool {
	if timed != nil {
		q.mu.timed = append(q.mu.timed, timed)
	}
	over := q.overLocked()
	if over {
		q.mu.closed = true
		q.mu.err = errSlowConsumer
		q.dropLocked()
	}
	var run func(func())
	if wake || over {
		run = q.claimWriterLocked()
	}
	d, freed := q.settleLocked()
	q.mu.Unlock()
	q.settled(d, freed)
	if run != nil {
		run(q.writeLoop)
	}
	return !over
}

// close stops the queue. With flush, what is already queued is still written before the socket
// closes (closeSession's reply); without it, pending output is dropped.
func (q *outQueue) close(err error, flush bool) {
	q.mu.Lock()
	if !q.mu.closed {
		q.mu.closed = true
		q.mu.err = err
		if flush {
			q.mu.finish = true
		} else {
			q.dropLocked()
		}
	}
	d, freed := q.settleLocked()
	q.mu.Unlock()
	q.settled(d, freed)
	q.signal()
}

// release gives back the queue's share of the budget once the connection has ended and nothing
// writes it any more.
func (q *outQueue) release() {
	q.mu.Lock()
	q.mu.closed = true
	q.mu.buf, q.mu.segs = nil, nil
	q.mu.segBytes, q.mu.streamBytes, q.mu.inWrite, q.mu.inWriteStream = 0, 0, 0, 0
	d, freed := q.settleLocked()
	q.mu.Unlock()
	q.settled(d, freed)
}

// taken is what a writer claimed from the queue with takeLocked: the segments, then buf.
type taken struct {
	segs  []outSeg
	buf   []byte
	timed []*request
}

// takeLocked claims what is queued for the caller to write, or reports false when nothing is
// queued or another goroutine is writing. q.mu must be held.
func (q *outQueue) takeLocked() (taken, bool) {
	if q.mu.writing || q.emptyLocked() {
		return taken{}, false
	}
	t := taken{segs: q.mu.segs, buf: q.mu.buf, timed: q.mu.timed}
	q.mu.buf, q.mu.timed = q.mu.spare[:0], q.mu.spareTimed[:0]
	q.mu.spare, q.mu.spareTimed, q.mu.segs = nil, nil, nil
	q.mu.writing = true
	q.mu.inWrite, q.mu.inWriteStream = len(t.buf)+q.mu.segBytes, q.mu.streamBytes
	q.mu.segBytes, q.mu.streamBytes = 0, 0
	return t, true
}

// writeBytes writes b: inline, only what the socket takes at once; otherwise all of it, within
// the write timeout.
func (q *outQueue) writeBytes(b []byte, inline bool) (int, error) {
	switch {
	case inline:
		return tryWrite(q.raw, b)
	case q.writeTimeout > 0:
		// The deadline bounds this write only. It is cleared after it: a deadline left on the
		// socket would fail the next inline write (TryWrite is subject to it too) once it
		// passed, however healthy the client, and close the connection.
		_ = q.nc.SetWriteDeadline(time.Now().Add(q.writeTimeout))
		n, err := q.nc.Write(b)
		_ = q.nc.SetWriteDeadline(time.Time{})
		return n, err
	default:
		return q.nc.Write(b)
	}
}

// writeStream writes s as writeBytes writes bytes, a chunk at a time, each encoded into a
// borrowed buffer just before it is written.
func (q *outQueue) writeStream(s outStream, inline bool) (int, error) {
	if !inline && q.raw != nil {
		if q.writeTimeout > 0 {
			_ = q.nc.SetWriteDeadline(time.Now().Add(q.writeTimeout))
			defer q.nc.SetWriteDeadline(time.Time{})
		}
		return writeStreamWait(q.raw, s)
	}
	bp := streamBufs.Get().(*[]byte)
	defer streamBufs.Put(bp)
	var n int
	for s.remaining() > 0 {
		chunk := s.next((*bp)[:0], streamChunk)
		m, err := q.writeBytes(chunk, inline)
		s.advance(m)
		n += m
		if err != nil || m < len(chunk) {
			return n, err
		}
	}
	return n, nil
}

// write writes t, claimed with takeLocked, then gives up the claim and keeps the buffers for
// reuse. It returns the write's error. An inline write (writeInline) only writes what the socket
// takes at once: it puts what is left back at the head of the queue, with all of timed, and wakes
// the writer, so a client that stops reading holds up the writer and never the reader.
func (q *outQueue) write(t taken, inline bool) error {
	var written int
	var err error
	short := -1 // the segment (len(t.segs): buf) the socket stopped taking at
	for i := 0; i <= len(t.segs) && err == nil && short < 0; i++ {
		var n int
		switch {
		case i == len(t.segs):
			n, err = q.writeBytes(t.buf, inline)
			t.buf = t.buf[n:]
			if len(t.buf) > 0 {
				short = i
			}
		case t.segs[i].s != nil:
			n, err = q.writeStream(t.segs[i].s, inline)
			if t.segs[i].s.remaining() > 0 {
				short = i
			}
		default:
			n, err = q.writeBytes(t.segs[i].b, inline)
			t.segs[i].b = t.segs[i].b[n:]
			if len(t.segs[i].b) > 0 {
				short = i
			}
		}
		written += n
	}
	if q.sent != nil && written > 0 {
		q.sent(written)
	}
	if err == nil && short >= 0 {
		q.putBack(t, short)
		return nil
	}
	if err == nil && len(t.timed) > 0 && q.written != nil {
		q.written(t.timed, time.Now())
	}
	clear(t.segs)
	clear(t.timed)
	q.mu.Lock()
	q.mu.writing, q.mu.inWrite, q.mu.inWriteStream = false, 0, 0
	if buf := t.buf[:0]; len(t.segs) == 0 && cap(buf) <= keptOutBuf {
		q.mu.spare = buf
	}
	q.mu.spareTimed = t.timed[:0]
	d, freed := q.settleLocked()
	q.mu.Unlock()
	q.settled(d, freed)
	return err
}

// putBack returns what an inline write left of t, from segment short on, to the head of the
// queue, ahead of what was queued meanwhile, and wakes the writer for it.
func (q *outQueue) putBack(t taken, short int) {
	q.mu.Lock()
	q.mu.writing, q.mu.inWrite, q.mu.inWriteStream = false, 0, 0
	if !q.mu.closed || q.mu.finish {
		var rest []outSeg
		if short < len(t.segs) {
			rest = append(rest, t.segs[short:]...)
		}
		if len(t.buf) > 0 {
			rest = append(rest, outSeg{b: t.buf})
		}
		q.mu.segs = append(rest, q.mu.segs...)
		q.mu.segBytes, q.mu.streamBytes = 0, 0
		for _, g := range q.mu.segs {
			q.mu.segBytes += len(g.b)
			if g.s != nil {
				q.mu.streamBytes += g.s.remaining()
			}
		}
		q.mu.timed = append(t.timed, q.mu.timed...)
	}
	d, freed := q.settleLocked()
	q.mu.Unlock()
	q.settled(d, freed)
	q.signal()
}

// flush wakes the writer for what is queued.
func (q *outQueue) flush() { q.signal() }

// writeInline writes what is queued from the calling goroutine (the reader, for replies it
// answered itself) when no other write is in progress; otherwise the writer is woken for it. A
// write in progress picks up what was queued meanwhile, and whatever is queued after an inline
// write wakes the writer, so nothing is left behind.
func (q *outQueue) writeInline() {
	if q.raw == nil {
		q.signal()
		return
	}
	q.mu.Lock()
	if q.mu.closed {
		q.mu.Unlock()
		q.signal()
		return
	}
	t, ok := q.takeLocked()
	q.mu.Unlock()
	if !ok {
		return
	}
	if err := q.write(t, true); err != nil {
		q.close(err, false) // wakes the writer, which ends with err
		return
	}
	q.mu.Lock()
	more := !q.emptyLocked() || q.mu.closed
	q.mu.Unlock()
	if more {
		q.signal()
	}
}

// writeLoop is the writer: it writes what is queued until nothing is, or an inline write takes
// over, and then ends. The writer that finds the queue closed and drained (or whose write failed)
// ends the queue: it calls end, once.
func (q *outQueue) writeLoop() {
	for {
		q.mu.Lock()
		t, ok := q.takeLocked()
		if !ok {
			// Nothing is queued, or an inline write is in progress: it signals when it is done.
			q.mu.running = false
			ending := q.mu.closed && !q.mu.writing && !q.mu.done
			q.mu.done = q.mu.done || ending
			err, end := q.mu.err, q.mu.end
			if q.mu.finish {
				err = nil
			}
			q.mu.Unlock()
			if ending {
				end(err)
			}
			return
		}
		q.mu.Unlock()
		if werr := q.write(t, false); werr != nil {
			q.close(werr, false)
			q.mu.Lock()
			q.mu.running, q.mu.done = false, true
			end := q.mu.end
			q.mu.Unlock()
			end(werr)
			return
		}
	}
}

// pushRaw queues bytes without framing (four-letter word output).
func (q *outQueue) pushRaw(b []byte) {
	q.mu.Lock()
	if !q.mu.closed {
		q.mu.buf = append(q.mu.buf, b...)
	}
	d, freed := q.settleLocked()
	q.mu.Unlock()
	q.settled(d, freed)
	q.signal()
}
