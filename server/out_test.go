package server

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/zkd-io/zkd/jute"
)

// runWriter starts q's writer on one end of a pipe and returns the other end and a func that
// waits for the writer's result.
func runWriter(t *testing.T, q *outQueue) (net.Conn, func() error) {
	t.Helper()
	srv, cli := net.Pipe()
	exited := make(chan struct{})
	var err error
	go func() { defer close(exited); err = q.writeLoop(srv, 0, nil, nil) }()
	wait := func() error { <-exited; return err }
	t.Cleanup(func() { cli.Close(); <-exited })
	return cli, wait
}

// readFrames reads frames until the pipe closes and returns their payloads.
func readFrames(t *testing.T, c net.Conn) [][]byte {
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
	q := newOutQueue(1 << 20)
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
	q := newOutQueue(1 << 20)
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
	q := newOutQueue(1 << 20)
	q.pushReply(jute.ReplyHeader{Xid: 1}, nil, nil)
	q.close(errSessionGone, false)
	cli, done := runWriter(t, q)
	if frames := readFrames(t, cli); len(frames) != 0 {
		t.Fatalf("an aborted queue wrote %d frames", len(frames))
	}
	if err := done(); !errors.Is(err, errSessionGone) {
		t.Fatalf("writer = %v; want the close's reason", err)
	}

	slow := newOutQueue(1024)
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
	q := newOutQueue(1 << 20)
	rec := &recordingConn{}
	for xid := int32(1); xid <= 50; xid++ {
		q.pushFrame(&jute.ReplyHeader{Xid: jute.XidNotification}, &jute.WatcherEvent{Type: jute.EventNodeDataChanged, Path: "/p"})
	}
	q.close(errClosedByServer, true)
	if err := q.writeLoop(rec, 0, nil, nil); err != nil {
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
