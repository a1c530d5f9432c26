package server

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/zkd-io/zkd/internal/testkit"
	"github.com/zkd-io/zkd/internal/testkit/zktest"
	"github.com/zkd-io/zkd/jute"
)

// runWriter lets q's writer write to one end of a pipe and returns the other end and a func that
// waits for the queue's end and returns its error.
func runWriter(t *testing.T, q *outQueue) (net.Conn, func() error) {
	t.Helper()
	srv, cli := net.Pipe()
	q.setSink(srv, 0, nil, nil)
	wait, _ := startWriters(t, q, func() { srv.Close() })
	t.Cleanup(func() { cli.Close() })
	return cli, wait
}

// startWriters lets q start its writer on new goroutines, counted in starts, and returns a func
// that waits for the queue's end and returns the error it ended with. closed, if not nil, runs
// when the queue ends, as the connection closes its socket. The test's cleanup closes the queue
// and waits for its end.
func startWriters(t *testing.T, q *outQueue, closed func()) (wait func() error, starts *atomic.Int32) {
	t.Helper()
	starts = new(atomic.Int32)
	ended := make(chan error, 1)
	var writers sync.WaitGroup
	q.setWriter(func(f func()) { starts.Add(1); writers.Go(f) }, func(err error) {
		if closed != nil {
			closed()
		}
		ended <- err
	})
	var once sync.Once
	var err error
	wait = func() error {
		once.Do(func() { err = <-ended; writers.Wait() })
		return err
	}
	t.Cleanup(func() { q.close(errClosedByServer, false); _ = wait() })
	return wait, starts
}

// readFrames reads frames until the pipe closes and returns their payloads.
func readFrames(t *testing.T, c io.Reader) [][]byte {
	t.Helper()
	fr := jute.NewFrameReader(c, 1<<20)
	var out [][]byte
	for {
		f, err := fr.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
				t.Fatalf("read frame: %v", err)
			}
			return out
		}
		out = append(out, bytes.Clone(f))
	}
}

func replyXid(t *testing.T, frame []byte) int32 {
	t.Helper()
	h, err := jute.PeekReplyHeader(frame)
	if err != nil {
		t.Fatal(err)
	}
	return h.Xid
}

// Frames leave in the order they were queued, and a flushing close writes what is queued before
// the socket closes (closeSession's reply).
func TestOutQueueOrderAndFlush(t *testing.T) {
	q := newOutQueue(1<<20, 1<<20, nil)
	cli, done := runWriter(t, q)
	for xid := int32(1); xid <= 100; xid++ {
		if _, ok := q.pushReply(jute.ReplyHeader{Xid: xid, Zxid: int64(xid)}, &jute.SetDataResponse{}, nil); !ok {
			t.Fatalf("push %d refused", xid)
		}
	}
	q.close(errClosedByServer, true)
	frames := readFrames(t, cli)
	if len(frames) != 100 {
		t.Fatalf("%d frames written; want 100", len(frames))
	}
	for i, f := range frames {
		if xid := replyXid(t, f); xid != int32(i+1) {
			t.Fatalf("frame %d has xid %d", i, xid)
		}
	}
	if err := done(); err != nil {
		t.Fatalf("writer after a flushing close = %v", err)
	}
	if _, ok := q.pushReply(jute.ReplyHeader{Xid: 101}, nil, nil); ok {
		t.Fatal("a closed queue took a frame")
	}
}

// An error reply carries no body, whatever body is given.
func TestOutQueueErrorReplyHasNoBody(t *testing.T) {
	q := newOutQueue(1<<20, 1<<20, nil)
	cli, _ := runWriter(t, q)
	q.pushReply(jute.ReplyHeader{Xid: 7, Err: jute.CodeNoNode}, &jute.GetDataResponse{Data: []byte("x")}, nil)
	q.close(errClosedByServer, true)
	frames := readFrames(t, cli)
	if len(frames) != 1 || len(frames[0]) != 16 {
		t.Fatalf("frames %v; want one 16-byte header-only reply", frames)
	}
}

// Without flush, a close drops what is queued; a queue past its limit closes as a slow consumer
// and drops everything, so watch delivery never blocks on a client that does not read.
func TestOutQueueDropAndSlowConsumer(t *testing.T) {
	q := newOutQueue(1<<20, 1<<20, nil)
	q.pushReply(jute.ReplyHeader{Xid: 1}, nil, nil)
	q.close(errSessionGone, false)
	cli, done := runWriter(t, q)
	if frames := readFrames(t, cli); len(frames) != 0 {
		t.Fatalf("an aborted queue wrote %d frames", len(frames))
	}
	if err := done(); !errors.Is(err, errSessionGone) {
		t.Fatalf("writer = %v; want the close's reason", err)
	}

	slow := newOutQueue(1024, 1024, nil)
	big := &jute.GetDataResponse{Data: make([]byte, 600)}
	if _, ok := slow.pushReply(jute.ReplyHeader{Xid: 1}, big, nil); !ok {
		t.Fatal("the first frame under the limit was refused")
	}
	if _, ok := slow.pushReply(jute.ReplyHeader{Xid: 2}, big, nil); ok {
		t.Fatal("a frame over the limit was accepted")
	}
	cli, done = runWriter(t, slow)
	if frames := readFrames(t, cli); len(frames) != 0 {
		t.Fatalf("a slow consumer's queue still wrote %d frames", len(frames))
	}
	if err := done(); !errors.Is(err, errSlowConsumer) {
		t.Fatalf("writer = %v; want errSlowConsumer", err)
	}
}

// Frames queued while the writer is busy go out together, in one write: a burst of notifications
// costs one syscall, not one per frame.
func TestOutQueueCoalescesBursts(t *testing.T) {
	q := newOutQueue(1<<20, 1<<20, nil)
	rec := &recordingConn{}
	for xid := int32(1); xid <= 50; xid++ {
		q.pushFrame(&jute.ReplyHeader{Xid: jute.XidNotification}, &jute.WatcherEvent{Type: jute.EventNodeDataChanged, Path: "/p"})
	}
	q.close(errClosedByServer, true)
	q.setSink(rec, 0, nil, nil)
	wait, _ := startWriters(t, q, nil)
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	if rec.writes != 1 {
		t.Fatalf("%d writes for a burst queued at once; want 1", rec.writes)
	}
}

// recordingConn counts writes; reads are never made by the writer.
type recordingConn struct {
	net.Conn
	writes int
	buf    bytes.Buffer
}

func (r *recordingConn) Write(b []byte) (int, error) { r.writes++; return r.buf.Write(b) }
func (r *recordingConn) Close() error                { return nil }

// framesFrom reads n frames of up to max bytes from r.
func framesFrom(t *testing.T, r io.Reader, n, max int) [][]byte {
	t.Helper()
	fr := jute.NewFrameReader(r, max)
	var out [][]byte
	for range n {
		f, err := fr.Next()
		if err != nil {
			t.Fatalf("after %d frames: %v", len(out), err)
		}
		out = append(out, bytes.Clone(f))
	}
	return out
}

// inlineQueue returns a queue of the given limit writing to a loopback socket, and the socket's
// client end; it skips the test where the reader cannot write inline.
func inlineQueue(t *testing.T, limit int) (*outQueue, net.Conn) {
	t.Helper()
	if !tryWriteSupported {
		t.Skip("no inline writes on this platform")
	}
	srv, cli := zktest.TCPPair(t)
	q := newOutQueue(limit, limit, nil)
	q.setSink(srv, 0, nil, nil)
	return q, cli
}

// writeInline writes the queued replies from the calling goroutine, in one write, with no writer
// started; the writer starts only when something is left for it, and ends once it wrote it.
func TestOutQueueFlushWritesInline(t *testing.T) {
	q, cli := inlineQueue(t, 1<<20)
	_, starts := startWriters(t, q, nil)
	for xid := int32(1); xid <= 3; xid++ {
		q.pushReply(jute.ReplyHeader{Xid: xid}, &jute.SetDataResponse{}, nil)
	}
	if n := starts.Load(); n != 0 {
		t.Fatalf("replies started the writer %d times; their answerer writes or flushes them", n)
	}
	q.writeInline()
	_ = cli.SetReadDeadline(time.Now().Add(10 * time.Second))
	frames := framesFrom(t, cli, 3, 1<<20)
	for i, f := range frames {
		if xid := replyXid(t, f); xid != int32(i+1) {
			t.Fatalf("frame %d has xid %d", i, xid)
		}
	}
	q.flush()
	if n := starts.Load(); n != 0 {
		t.Fatalf("the writer started %d times with nothing left to write", n)
	}
	q.pushReply(jute.ReplyHeader{Xid: 4}, &jute.SetDataResponse{}, nil)
	q.flush()
	if f := framesFrom(t, cli, 1, 1<<20); replyXid(t, f[0]) != 4 || starts.Load() != 1 {
		t.Fatalf("after a flush: reply %d, %d writer starts; want reply 4 from one writer", replyXid(t, f[0]), starts.Load())
	}
	if !testkit.Until(10*time.Second, func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return !q.mu.running
	}) {
		t.Fatal("the writer still runs with nothing to write")
	}
}

// An inline write to a client that is not reading writes only what the socket takes: the rest
// goes to the writer, ahead of what was queued since, and every frame arrives whole and in order.
func TestOutQueueStalledFlushHandsOverToWriter(t *testing.T) {
	q, cli := inlineQueue(t, 1<<30)
	// Far more than loopback's socket buffers hold.
	first := &jute.GetDataResponse{Data: bytes.Repeat([]byte{7}, 32<<20)}
	q.pushReply(jute.ReplyHeader{Xid: 1}, first, nil)
	q.writeInline() // must return without a reader
	q.mu.Lock()
	_, left := q.queuedLocked()
	q.mu.Unlock()
	if left == 0 {
		t.Fatal("32 MiB went out with nobody reading; the test needs a bigger reply")
	}
	q.pushReply(jute.ReplyHeader{Xid: 2}, &jute.SetDataResponse{}, nil)
	q.close(errClosedByServer, true)
	wait, _ := startWriters(t, q, nil)
	frames := framesFrom(t, cli, 2, 64<<20)
	want := len(jute.AppendFrame(nil, &jute.ReplyHeader{Xid: 1}, first)) - 4
	if replyXid(t, frames[0]) != 1 || len(frames[0]) != want || replyXid(t, frames[1]) != 2 {
		t.Fatalf("frames of %d and %d bytes; want reply 1 whole (%d bytes), then reply 2", len(frames[0]), len(frames[1]), want)
	}
	if !bytes.Equal(frames[0][len(frames[0])-68-(32<<20):len(frames[0])-68], first.Data) {
		t.Fatal("reply 1's data arrived changed")
	}
	if err := wait(); err != nil {
		t.Fatalf("writer = %v", err)
	}
}

// The writer and inline flushes never write the socket at the same time: with a reader slower
// than both, inline writes are often partial, and any overlap would interleave frames. Together
// they write every frame once, each source's in order.
func TestOutQueueFlushAndWriterTakeTurns(t *testing.T) {
	srv, cli := zktest.TCPPair(t)
	guard := &exclusiveConn{Conn: srv, overlapped: make(chan struct{})}
	q := newOutQueue(1<<30, 1<<30, nil)
	q.setSink(guard, 0, nil, nil)
	wait, _ := startWriters(t, q, nil)
	const n = 2000
	data := make([]byte, 4<<10)
	pushed := make(chan struct{}, 1) // a source queued a frame
	note := func() {
		select {
		case pushed <- struct{}{}:
		default:
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { // the reader: replies with odd xids, mostly written inline
		for xid := int32(1); xid < 2*n; xid += 2 {
			q.pushReply(jute.ReplyHeader{Xid: xid}, &jute.GetDataResponse{Data: data}, nil)
			note()
			if xid%3 != 0 {
				q.writeInline()
			} else {
				q.flush()
			}
		}
	})
	wg.Go(func() { // the apply hook: notifications with even xids, through the writer
		for xid := int32(2); xid <= 2*n; xid += 2 {
			q.pushFrame(&jute.ReplyHeader{Xid: xid}, &jute.WatcherEvent{Path: "/p"})
			note()
		}
	})
	produced := make(chan struct{})
	go func() { wg.Wait(); close(produced) }()
	// backedUp reports whether the socket is full: a write is in progress and a socket buffer's
	// worth is queued behind it.
	backedUp := func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.mu.writing && len(q.mu.buf) >= 64<<10
	}
	read := make(chan [][]byte, 1)
	go func() { // a slow reader; it may not fail the test from here
		fr := jute.NewFrameReader(cli, 1<<20)
		var out [][]byte
		for {
			f, err := fr.Next()
			if err != nil {
				read <- out
				return
			}
			out = append(out, bytes.Clone(f))
			if len(out)%64 == 0 {
				// A slow reader on purpose: every 64 frames it stops reading until the socket is
				// full (inline writes come back partial, the writer waits) or the sources are done.
				// (Or writes overlapped: the test fails, and a source may be stuck behind the
				// writer's blocked write, on the descriptor's lock.)
				for wait := true; wait && !backedUp(); {
					select {
					case <-pushed:
					case <-produced:
						wait = false
					case <-guard.overlapped:
						wait = false
					}
				}
			}
		}
	}()
	wg.Wait()
	q.close(errClosedByServer, true)
	if err := wait(); err != nil {
		t.Fatalf("writer = %v", err)
	}
	guard.Close() // as the connection does once its writer is done
	frames := <-read
	if len(frames) != 2*n {
		t.Fatalf("%d frames; want %d", len(frames), 2*n)
	}
	last := map[bool]int32{}
	for _, f := range frames {
		xid := replyXid(t, f)
		if xid <= last[xid%2 == 0] {
			t.Fatalf("xid %d after %d: a source's frames out of order", xid, last[xid%2 == 0])
		}
		last[xid%2 == 0] = xid
	}
	if tryWriteSupported && guard.inline.Load() == 0 {
		t.Fatal("no inline write was made")
	}
	if o := guard.overlaps.Load(); o != 0 {
		t.Fatalf("%d writes started while another was in progress", o)
	}
}

// exclusiveConn counts writes, through Write or the raw descriptor, that start while another is
// in progress, and closes overlapped at the first.
type exclusiveConn struct {
	net.Conn
	active, overlaps, inline atomic.Int32
	overlapped               chan struct{}
}

func (e *exclusiveConn) enter() {
	if e.active.Add(1) > 1 && e.overlaps.Add(1) == 1 {
		close(e.overlapped)
	}
}

func (e *exclusiveConn) Write(b []byte) (int, error) {
	e.enter()
	defer e.active.Add(-1)
	return e.Conn.Write(b)
}

func (e *exclusiveConn) SyscallConn() (syscall.RawConn, error) {
	rc, err := e.Conn.(syscall.Conn).SyscallConn()
	return exclusiveRaw{rc, e}, err
}

type exclusiveRaw struct {
	syscall.RawConn
	e *exclusiveConn
}

func (r exclusiveRaw) Write(f func(uintptr) bool) error {
	r.e.enter()
	r.e.inline.Add(1)
	defer r.e.active.Add(-1)
	return r.RawConn.Write(f)
}

// A writer's deadline bounds its own write and nothing after it: once it has passed, an inline
// write to a healthy client still goes out and the connection stays up. (A deadline left on the
// socket made the first inline write after it fail, and every connection closed MaxSessionTimeout
// after its first write by the writer.)
func TestOutQueueWriterDeadlineDoesNotOutliveItsWrite(t *testing.T) {
	if !tryWriteSupported {
		t.Skip("no inline writes on this platform")
	}
	accepted, cli := zktest.TCPPair(t)
	srv := &expiringConn{TCPConn: accepted.(*net.TCPConn)}
	q := newOutQueue(1<<20, 1<<20, nil)
	// Far longer than the test: only expire makes the deadline pass.
	const timeout = time.Hour
	q.setSink(srv, timeout, nil, nil)
	startWriters(t, q, nil)
	_ = cli.SetReadDeadline(time.Now().Add(10 * time.Second))
	q.pushFrame(&jute.ReplyHeader{Xid: 1}) // by the writer, with its deadline
	framesFrom(t, cli, 1, 1<<20)
	if err := srv.expire(); err != nil { // the writer's deadline, were it still set, has passed
		t.Fatal(err)
	}
	for xid := int32(2); xid <= 4; xid++ {
		q.pushReply(jute.ReplyHeader{Xid: xid}, &jute.SetDataResponse{}, nil)
		q.writeInline()
		f := framesFrom(t, cli, 1, 1<<20)
		if got := replyXid(t, f[0]); got != xid {
			t.Fatalf("reply %d arrived as %d", xid, got)
		}
	}
	q.mu.Lock()
	closed, err := q.mu.closed, q.mu.err
	q.mu.Unlock()
	if closed {
		t.Fatalf("the queue closed (%v): an inline write failed on the writer's old deadline", err)
	}
}

// expiringConn is a socket whose write deadline the test can make pass at once, as waiting it out
// would: expire moves a deadline still in force to a moment long past (a cleared deadline stays
// cleared). Writes through the descriptor (SyscallConn) are subject to it like Write.
type expiringConn struct {
	*net.TCPConn
	mu  sync.Mutex
	set bool // a write deadline is in force
}

func (c *expiringConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.set = !t.IsZero()
	return c.TCPConn.SetWriteDeadline(t)
}

func (c *expiringConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.set = !t.IsZero()
	return c.TCPConn.SetDeadline(t)
}

func (c *expiringConn) expire() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.set {
		return nil
	}
	return c.TCPConn.SetWriteDeadline(time.Unix(1, 0))
}

// writingNow reports whether the queue has anything queued or being written.
func (q *outQueue) writingNow() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.mu.writing || len(q.mu.buf) > 0
}

// bigRecord is a reply of about n bytes.
func bigRecord(n int) jute.Record { return &jute.GetDataResponse{Data: make([]byte, n)} }

// A queue keeps a small buffer for its next burst but lets a large one go once it is written, so
// that what an idle connection holds does not depend on the largest reply it ever got.
func TestOutQueueLetsLargeBuffersGo(t *testing.T) {
	q := newOutQueue(1<<30, 1<<30, nil)
	cli, _ := runWriter(t, q)
	held := func() int {
		q.mu.Lock()
		defer q.mu.Unlock()
		return cap(q.mu.buf) + cap(q.mu.spare)
	}
	for _, size := range []int{100, 300 << 10, 100} {
		q.pushFrame(bigRecord(size))
		fr := jute.NewFrameReader(cli, 1<<20)
		if _, err := fr.Next(); err != nil {
			t.Fatal(err)
		}
		// The frame was read, so the writer's Write returned; it gives the buffer back right after.
		if !testkit.Until(5*time.Second, func() bool { return !q.writingNow() }) {
			t.Fatal("the writer never finished its write")
		}
		if h := held(); h > keptOutBuf {
			t.Fatalf("after a %d-byte reply the idle queue holds %d bytes of buffers; want at most %d", size, h, keptOutBuf)
		}
	}
	q.close(errClosedByServer, false)
}

// The budget follows every byte in and out of its queues: pushed, written whole or in part,
// dropped at a close, or left when the connection ends; it reports over and under as the total
// crosses its limit, and a reader waiting for room is woken when bytes leave.
func TestOutBudgetAccounting(t *testing.T) {
	b := newOutBudget(1000)
	q1 := newOutQueue(1<<20, 1<<20, b)
	q2 := newOutQueue(1<<20, 1<<20, b)
	q1.pushFrame(bigRecord(600))
	if b.over() || !q1.roomy() {
		t.Fatalf("over, or q1 not roomy, at %d of 1000", b.queuedBytes())
	}
	q2.pushFrame(bigRecord(600))
	if !b.over() {
		t.Fatalf("not over at %d of 1000", b.queuedBytes())
	}
	if q1.roomy() || q2.roomy() {
		t.Fatal("a queue holding bytes is roomy while the budget is exceeded")
	}
	// q1's bytes leave through its writer, which brings the budget under its limit with q2's alone.
	cli, _ := runWriter(t, q1)
	waited := make(chan bool)
	go func() { waited <- q2.waitRoom(make(chan struct{})) }()
	if _, err := jute.NewFrameReader(cli, 1<<20).Next(); err != nil {
		t.Fatal(err)
	}
	// With q1 drained the budget is under its limit: q2's reader may go on although q2 holds bytes.
	if !<-waited {
		t.Fatal("waitRoom gave up")
	}
	if !testkit.Until(5*time.Second, func() bool { return q1.held.Load() == 0 }) {
		t.Fatalf("q1 still accounts %d bytes after its frame was read", q1.held.Load())
	}
	q1.close(errClosedByServer, false)
	q2.close(errClosedByServer, false) // dropped, never written
	q3 := newOutQueue(1<<20, 1<<20, b)
	q3.pushFrame(bigRecord(50))
	q3.release() // the connection ended with bytes queued
	if got := b.queuedBytes(); got != 0 {
		t.Fatalf("budget holds %d bytes once every queue is drained, closed or released", got)
	}
	if b.over() {
		t.Fatal("budget still over at 0 bytes")
	}
}

// While the server-wide budget is exceeded a queue is closed as a slow consumer at its lower
// pressured limit; otherwise only at its own limit.
func TestOutQueuePressuredLimit(t *testing.T) {
	b := newOutBudget(10 << 10)
	hog := newOutQueue(1<<20, 1<<20, b)
	hog.pushFrame(bigRecord(12 << 10)) // budget now over
	q := newOutQueue(1<<20, 8<<10, b)
	if !q.pushFrame(bigRecord(6 << 10)) {
		t.Fatal("closed under its pressured limit")
	}
	if q.pushFrame(bigRecord(6 << 10)) {
		t.Fatal("a queue past its pressured limit was not closed while the budget is exceeded")
	}
	hog.release()
	q.release()
	calm := newOutQueue(1<<20, 8<<10, b)
	for range 3 {
		if !calm.pushFrame(bigRecord(6 << 10)) {
			t.Fatal("a queue under its own limit was closed while the budget is not exceeded")
		}
		if b.over() {
			break
		}
	}
}
