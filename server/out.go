package server

import (
	"errors"
	"net"
	"sync"
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
// writing, and the other leaves the socket alone until it is cleared.
// Pushing never blocks: a queue that grows past its limit marks the connection as a slow
// consumer and closes it, so watch delivery never stalls apply.
type outQueue struct {
	mu struct {
		sync.Mutex
		buf    []byte
		closed bool  // no more frames are accepted
		finish bool  // close the socket once what is queued is written
		err    error // why the queue was closed
		// timed are the requests whose replies are in buf and are timed for the slow-request
		// log; the goroutine that writes buf hands them back once it is written.
		timed []*request
		// writing is set while a goroutine writes a buffer it took; only it writes the socket.
		writing bool
		// spare and spareTimed are the buffers of the last write, emptied for reuse.
		spare      []byte
		spareTimed []*request
	}
	limit int
	wake  chan struct{}

	// The socket and what is told of each write, set by setSink before anything writes.
	nc           net.Conn
	writeTimeout time.Duration
	sent         func(bytes int)
	written      func([]*request, time.Time)
	// raw is nc's file descriptor when nc is a plain socket, nil otherwise (TLS); flush writes
	// only to a plain socket, with one non-blocking write.
	raw syscall.RawConn
}

func newOutQueue(limit int) *outQueue {
	return &outQueue{limit: limit, wake: make(chan struct{}, 1)}
}

// setSink sets where the queue writes: nc, each write bounded by writeTimeout (0: none). After
// each write, sent is told the bytes written and, when timed replies were among them, written is
// given their requests and the time (read once per write). It must be called before writeLoop
// and writeInline.
func (q *outQueue) setSink(nc net.Conn, writeTimeout time.Duration, sent func(bytes int), written func([]*request, time.Time)) {
	q.nc, q.writeTimeout, q.sent, q.written = nc, writeTimeout, sent, written
	q.raw = rawConn(nc)
}

func (q *outQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// pushReply queues a reply frame without waking the writer: whoever answered the request calls
// flush or writeInline once it is answered. body is encoded only when h.Err is OK (error
// replies are header-only). timed, if not nil, is the request it answers, to be handed to the
// written callback once the reply is on the socket. It returns the frame's size and false if the
// queue is closed or overflowed.
func (q *outQueue) pushReply(h jute.ReplyHeader, body jute.Record, timed *request) (int, bool) {
	if h.Err != jute.CodeOK {
		body = nil
	}
	return q.push(false, timed, &h, body)
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
	size := len(q.mu.buf) - before
	if timed != nil {
		q.mu.timed = append(q.mu.timed, timed)
	}
	over := len(q.mu.buf) > q.limit
	if over {
		q.mu.closed = true
		q.mu.err = errSlowConsumer
		q.mu.buf = q.mu.buf[:0]
		clear(q.mu.timed)
		q.mu.timed = q.mu.timed[:0]
	}
	q.mu.Unlock()
	if wake || over {
		q.signal()
	}
	return size, !over
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
			q.mu.buf = q.mu.buf[:0]
		}
	}
	q.mu.Unlock()
	q.signal()
}

// takeLocked claims what is queued for the caller to write, or returns nil when nothing is queued
// or another goroutine is writing. q.mu must be held.
func (q *outQueue) takeLocked() ([]byte, []*request) {
	if q.mu.writing || len(q.mu.buf) == 0 {
		return nil, nil
	}
	buf, timed := q.mu.buf, q.mu.timed
	q.mu.buf, q.mu.timed = q.mu.spare[:0], q.mu.spareTimed[:0]
	q.mu.spare, q.mu.spareTimed = nil, nil
	q.mu.writing = true
	return buf, timed
}

// write writes buf, claimed with takeLocked, then gives up the claim and keeps the buffers for
// reuse. It returns the write's error. An inline write (writeInline) only writes what the socket takes
// at once: it puts what is left back at the head of the queue, with all of timed, and wakes the
// writer, so a client that stops reading holds up the writer and never the reader.
func (q *outQueue) write(buf []byte, timed []*request, inline bool) error {
	var n int
	var err error
	switch {
	case inline:
		n, err = tryWrite(q.raw, buf)
	case q.writeTimeout > 0:
		// The deadline bounds this write only. It is cleared after it: a deadline left on the
		// socket would fail the next inline write (TryWrite is subject to it too) once it
		// passed, however healthy the client, and close the connection.
		_ = q.nc.SetWriteDeadline(time.Now().Add(q.writeTimeout))
		n, err = q.nc.Write(buf)
		_ = q.nc.SetWriteDeadline(time.Time{})
	default:
		n, err = q.nc.Write(buf)
	}
	if err == nil && n < len(buf) {
		q.mu.Lock()
		q.mu.writing = false
		if !q.mu.closed || q.mu.finish {
			rest := make([]byte, 0, len(buf)-n+len(q.mu.buf))
			rest = append(append(rest, buf[n:]...), q.mu.buf...)
			q.mu.spare, q.mu.buf = q.mu.buf[:0], rest
			q.mu.timed = append(timed, q.mu.timed...)
		}
		q.mu.Unlock()
		if q.sent != nil && n > 0 {
			q.sent(n)
		}
		q.signal()
		return nil
	}
	if err == nil {
		if q.sent != nil {
			q.sent(len(buf))
		}
		if len(timed) > 0 && q.written != nil {
			q.written(timed, time.Now())
		}
	}
	clear(timed)
	q.mu.Lock()
	q.mu.writing = false
	if cap(buf) <= 1<<20 {
		q.mu.spare = buf[:0]
	}
	q.mu.spareTimed = timed[:0]
	q.mu.Unlock()
	return err
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
	buf, timed := q.takeLocked()
	q.mu.Unlock()
	if buf == nil {
		return
	}
	if err := q.write(buf, timed, true); err != nil {
		q.close(err, false) // wakes the writer, which ends with err
		return
	}
	q.mu.Lock()
	more := len(q.mu.buf) > 0 || q.mu.closed
	q.mu.Unlock()
	if more {
		q.signal()
	}
}

// writeLoop writes what is queued whenever it is woken and no flush is writing. It returns when
// the queue is closed and drained (nil, or why it was closed), or with the error of a write that
// failed. The caller closes the socket.
func (q *outQueue) writeLoop() error {
	for {
		q.mu.Lock()
		if q.mu.writing {
			// An inline flush is writing; it wakes the writer when it is done if anything is
			// left or the queue was closed.
			q.mu.Unlock()
			<-q.wake
			continue
		}
		buf, timed := q.takeLocked()
		closed, finish, err := q.mu.closed, q.mu.finish, q.mu.err
		q.mu.Unlock()
		if buf != nil {
			if werr := q.write(buf, timed, false); werr != nil {
				q.close(werr, false)
				return werr
			}
			continue
		}
		if closed {
			if finish {
				return nil
			}
			return err
		}
		<-q.wake
	}
}

// pushRaw queues bytes without framing (four-letter word output).
func (q *outQueue) pushRaw(b []byte) {
	q.mu.Lock()
	if !q.mu.closed {
		q.mu.buf = append(q.mu.buf, b...)
	}
	q.mu.Unlock()
	q.signal()
}
