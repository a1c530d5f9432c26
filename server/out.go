package server

import (
	"errors"
	"net"
	"sync"
	"time"

	"github.com/zkd-io/zkd/jute"
)

// errSlowConsumer reports a client that did not read its replies and notifications fast enough.
var errSlowConsumer = errors.New("server: slow consumer: outbound limit reached")

// outQueue is a connection's single ordered output: replies, ping replies and watch
// notifications are encoded straight into one byte buffer under a mutex, in the order they are
// queued. The connection's writer goroutine swaps the buffer for an empty one and writes it in one
// call, so every burst is one coalesced write. Pushing never blocks: a queue that grows past its
// limit marks the connection as a slow consumer and closes it, so watch delivery never stalls
// apply.
type outQueue struct {
	mu struct {
		sync.Mutex
		buf       []byte
		closed    bool  // no more frames are accepted
		finish    bool  // close the socket once what is queued is written
		err       error // why the queue was closed
		sentCount int64 // frames queued
		// timed are the requests whose replies are in buf and are timed for the slow-request
		// log; the writer hands them back once buf is written.
		timed []*request
	}
	limit int
	wake  chan struct{}
}

func newOutQueue(limit int) *outQueue {
	return &outQueue{limit: limit, wake: make(chan struct{}, 1)}
}

func (q *outQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// pushReply queues a reply frame. body is encoded only when h.Err is OK (error replies are
// header-only). timed, if not nil, is the request it answers, to be handed to the writer's
// written callback once the reply is on the socket. It returns the frame's size and false if the
// queue is closed or overflowed.
func (q *outQueue) pushReply(h jute.ReplyHeader, body jute.Record, timed *request) (int, bool) {
	if h.Err != jute.CodeOK {
		body = nil
	}
	return q.push(timed, &h, body)
}

// pushFrame queues one frame holding recs in order (nil records are skipped).
func (q *outQueue) pushFrame(recs ...jute.Record) bool {
	_, ok := q.push(nil, recs...)
	return ok
}

// push queues one frame holding recs and returns its size.
func (q *outQueue) push(timed *request, recs ...jute.Record) (int, bool) {
	q.mu.Lock()
	if q.mu.closed {
		q.mu.Unlock()
		return 0, false
	}
	before := len(q.mu.buf)
	q.mu.buf = jute.AppendFrame(q.mu.buf, recs...)
	size := len(q.mu.buf) - before
	q.mu.sentCount++
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
	q.signal()
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

// writeLoop is the only goroutine that writes to nc. It returns when the queue is closed and
// drained, or when a write fails, and closes nc either way. After each write it calls sent with
// the bytes written and, when timed replies were among them, written with their requests and the
// time (read once per write).
func (q *outQueue) writeLoop(nc net.Conn, writeTimeout time.Duration, sent func(bytes int), written func([]*request, time.Time)) error {
	defer nc.Close()
	var spare []byte
	var spareTimed []*request
	for {
		q.mu.Lock()
		buf := q.mu.buf
		closed, finish, err := q.mu.closed, q.mu.finish, q.mu.err
		timed := q.mu.timed
		if len(buf) > 0 {
			q.mu.buf = spare[:0]
			q.mu.timed = spareTimed[:0]
		}
		q.mu.Unlock()
		if len(buf) > 0 {
			if writeTimeout > 0 {
				_ = nc.SetWriteDeadline(time.Now().Add(writeTimeout))
			}
			if _, werr := nc.Write(buf); werr != nil {
				q.close(werr, false)
				return werr
			}
			if sent != nil {
				sent(len(buf))
			}
			if len(timed) > 0 && written != nil {
				written(timed, time.Now())
			}
			clear(timed)
			spareTimed = timed[:0]
			if cap(buf) <= 1<<20 {
				spare = buf[:0]
			} else {
				spare = nil
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
