package conformance

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/zkd-io/zkd/jute"
)

// Errors returned by Raw.
var (
	ErrUnexpectedXid = errors.New("conformance: reply xid does not match the request")
	ErrFrameTooLarge = errors.New("conformance: frame length out of range")
	ErrStillOpen     = errors.New("conformance: connection still open")
	ErrNotClosed     = errors.New("conformance: server sent data where it should have closed the connection")
)

// maxReplyFrame bounds the frames Raw accepts. The server does not limit replies, but nothing the
// suite provokes comes near this.
const maxReplyFrame = 64 << 20

// Reply is one frame received from the server: its reply header and the bytes after the header.
type Reply struct {
	Header jute.ReplyHeader
	Body   []byte
}

// Event decodes the body of a watch notification (xid -1).
func (r Reply) Event() (jute.WatcherEvent, error) {
	var ev jute.WatcherEvent
	if err := jute.Unmarshal(r.Body, 0, &ev); err != nil {
		return ev, fmt.Errorf("conformance: decode notification: %w", err)
	}
	return ev, nil
}

// Decode decodes the reply body into resp and fails if bytes are missing or left over, so a body of
// the wrong shape is caught. A nil resp requires an empty body.
func (r Reply) Decode(resp jute.Record) error {
	if resp == nil {
		if len(r.Body) != 0 {
			return fmt.Errorf("conformance: expected an empty body, got %d bytes", len(r.Body))
		}
		return nil
	}
	if err := jute.Unmarshal(r.Body, maxReplyFrame, resp); err != nil {
		return fmt.Errorf("conformance: decode %T: %w", resp, err)
	}
	return nil
}

// Raw is a ZooKeeper client connection that works frame by frame: it can send anything, in any
// order, and shows exactly what the server answers. It keeps watch notifications that arrive while
// it waits for a reply in Events.
type Raw struct {
	nc      net.Conn
	br      *bufio.Reader
	xid     int32
	timeout time.Duration

	// Session is the server's ConnectResponse after a successful Handshake.
	Session jute.ConnectResponse
	// Events are the notifications (xid -1) received while Call waited for its reply, in arrival order.
	Events []Reply
}

// DialRaw opens a TCP connection to addr. timeout bounds the dial and every later read and write
// (zero means 10 seconds).
func DialRaw(addr string, timeout time.Duration) (*Raw, error) {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	nc, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, fmt.Errorf("conformance: dial %s: %w", addr, err)
	}
	return &Raw{nc: nc, br: bufio.NewReader(nc), timeout: timeout}, nil
}

// NewRaw wraps a connection that is already open (one end of a net.Pipe, say); timeout bounds
// every later read and write (zero means 10 seconds).
func NewRaw(nc net.Conn, timeout time.Duration) *Raw {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	return &Raw{nc: nc, br: bufio.NewReader(nc), timeout: timeout}
}

// Close closes the connection.
func (r *Raw) Close() error { return r.nc.Close() }

// LocalAddr returns the client side of the connection.
func (r *Raw) LocalAddr() net.Addr { return r.nc.LocalAddr() }

// WriteBytes writes b to the connection as it is, with no framing.
func (r *Raw) WriteBytes(b []byte) error {
	if err := r.nc.SetWriteDeadline(time.Now().Add(r.timeout)); err != nil {
		return fmt.Errorf("conformance: set deadline: %w", err)
	}
	if _, err := r.nc.Write(b); err != nil {
		return fmt.Errorf("conformance: write: %w", err)
	}
	return nil
}

// Frame returns payload behind a 4-byte big-endian length.
func Frame(payload []byte) []byte {
	b := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(payload)), uint32(len(payload)))
	return append(b, payload...)
}

// EncodeRequest returns the frame of a request: the length, RequestHeader{xid, op}, then req (if any).
func EncodeRequest(xid int32, op jute.Op, req jute.Record) []byte {
	e := jute.NewEncoder(nil)
	h := jute.RequestHeader{Xid: xid, Type: op}
	h.Encode(e)
	if req != nil {
		req.Encode(e)
	}
	return Frame(e.Bytes())
}

// ReadFrame reads one length-prefixed frame and returns its payload.
func (r *Raw) ReadFrame() ([]byte, error) {
	if err := r.nc.SetReadDeadline(time.Now().Add(r.timeout)); err != nil {
		return nil, fmt.Errorf("conformance: set deadline: %w", err)
	}
	var lb [4]byte
	if _, err := io.ReadFull(r.br, lb[:]); err != nil {
		return nil, fmt.Errorf("conformance: read length: %w", err)
	}
	n := int32(binary.BigEndian.Uint32(lb[:]))
	if n < 0 || n > maxReplyFrame {
		return nil, fmt.Errorf("%w: %d", ErrFrameTooLarge, n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r.br, b); err != nil {
		return nil, fmt.Errorf("conformance: read frame: %w", err)
	}
	return b, nil
}

// Handshake sends req as the ConnectRequest and reads the ConnectResponse. On success with a
// non-zero session id the response is kept in Session.
func (r *Raw) Handshake(req jute.ConnectRequest) (jute.ConnectResponse, []byte, error) {
	if err := r.WriteBytes(Frame(jute.Marshal(nil, &req))); err != nil {
		return jute.ConnectResponse{}, nil, err
	}
	b, err := r.ReadFrame()
	if err != nil {
		return jute.ConnectResponse{}, nil, err
	}
	var resp jute.ConnectResponse
	if err := jute.Unmarshal(b, 0, &resp); err != nil {
		return resp, b, fmt.Errorf("conformance: decode ConnectResponse: %w", err)
	}
	if resp.SessionID != 0 {
		r.Session = resp
	}
	return resp, b, nil
}

// NewSession performs the handshake for a new session with the given timeout in milliseconds, as
// go-zookeeper does (no readOnly byte).
func (r *Raw) NewSession(timeoutMs int32) error {
	resp, _, err := r.Handshake(jute.ConnectRequest{TimeOut: timeoutMs, Passwd: make([]byte, 16)})
	if err != nil {
		return err
	}
	if resp.SessionID == 0 || resp.TimeOut <= 0 {
		return fmt.Errorf("conformance: server refused a new session (timeout %d)", resp.TimeOut)
	}
	return nil
}

// NextXid returns the next positive xid.
func (r *Raw) NextXid() int32 {
	r.xid++
	return r.xid
}

// Send writes one request frame.
func (r *Raw) Send(xid int32, op jute.Op, req jute.Record) error {
	return r.WriteBytes(EncodeRequest(xid, op, req))
}

// ReadReply reads one frame and splits it into header and body.
func (r *Raw) ReadReply() (Reply, error) {
	b, err := r.ReadFrame()
	if err != nil {
		return Reply{}, err
	}
	d := jute.NewDecoder(b, 0)
	var rep Reply
	rep.Header.Decode(d)
	if err := d.Err(); err != nil {
		return Reply{}, fmt.Errorf("conformance: decode reply header: %w", err)
	}
	rep.Body = d.Rest()
	return rep, nil
}

// ReadReplyFor reads frames until the reply with the given xid arrives, keeping notifications in
// Events and skipping ping replies. A reply with another xid is an error: replies must come back in
// request order.
func (r *Raw) ReadReplyFor(xid int32) (Reply, error) {
	for {
		rep, err := r.ReadReply()
		if err != nil {
			return rep, err
		}
		switch {
		case rep.Header.Xid == xid:
			return rep, nil
		case rep.Header.Xid == jute.XidNotification:
			r.Events = append(r.Events, rep)
		case rep.Header.Xid == jute.XidPing:
		default:
			return rep, fmt.Errorf("%w: got %d, want %d", ErrUnexpectedXid, rep.Header.Xid, xid)
		}
	}
}

// Call sends a request with the next xid and waits for its reply.
func (r *Raw) Call(op jute.Op, req jute.Record) (Reply, error) {
	return r.CallXid(r.NextXid(), op, req)
}

// CallXid sends a request with the given xid and waits for the reply carrying that xid.
func (r *Raw) CallXid(xid int32, op jute.Op, req jute.Record) (Reply, error) {
	if err := r.Send(xid, op, req); err != nil {
		return Reply{}, err
	}
	return r.ReadReplyFor(xid)
}

// Do sends a request, waits for its reply and decodes a successful body into resp. It returns the
// reply header's code as an error (a jute.Code) when it is not zero.
func (r *Raw) Do(op jute.Op, req, resp jute.Record) (jute.ReplyHeader, error) {
	rep, err := r.Call(op, req)
	if err != nil {
		return rep.Header, err
	}
	if rep.Header.Err != jute.CodeOK {
		if len(rep.Body) != 0 {
			return rep.Header, fmt.Errorf("conformance: error reply %d carries a %d-byte body", rep.Header.Err, len(rep.Body))
		}
		return rep.Header, rep.Header.Err
	}
	return rep.Header, rep.Decode(resp)
}

// WaitEvent returns the next notification, from Events first, then from the connection.
func (r *Raw) WaitEvent() (jute.WatcherEvent, Reply, error) {
	if len(r.Events) > 0 {
		rep := r.Events[0]
		r.Events = r.Events[1:]
		ev, err := rep.Event()
		return ev, rep, err
	}
	for {
		rep, err := r.ReadReply()
		if err != nil {
			return jute.WatcherEvent{}, rep, err
		}
		switch rep.Header.Xid {
		case jute.XidNotification:
			ev, err := rep.Event()
			return ev, rep, err
		case jute.XidPing:
		default:
			return jute.WatcherEvent{}, rep, fmt.Errorf("%w: got %d while waiting for a notification", ErrUnexpectedXid, rep.Header.Xid)
		}
	}
}

// ReadUntilClosed reads frames until the server closes the connection and returns what arrived
// before the close. It fails with ErrStillOpen if the connection is still open after within.
func (r *Raw) ReadUntilClosed(within time.Duration) ([]Reply, error) {
	deadline := time.Now().Add(within)
	var got []Reply
	for {
		if err := r.nc.SetReadDeadline(deadline); err != nil {
			if errors.Is(err, io.ErrClosedPipe) {
				return got, nil // a pipe the server closed
			}
			return got, fmt.Errorf("conformance: set deadline: %w", err)
		}
		var lb [4]byte
		if _, err := io.ReadFull(r.br, lb[:]); err != nil {
			return got, closedOrStillOpen(err)
		}
		n := int32(binary.BigEndian.Uint32(lb[:]))
		if n < 16 || n > maxReplyFrame {
			return got, fmt.Errorf("%w: %d", ErrFrameTooLarge, n)
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(r.br, b); err != nil {
			return got, closedOrStillOpen(err)
		}
		d := jute.NewDecoder(b, 0)
		var rep Reply
		rep.Header.Decode(d)
		rep.Body = d.Rest()
		got = append(got, rep)
	}
}

// ExpectClosed reads until the server closes the connection and fails with ErrNotClosed if any
// frame arrives first.
func (r *Raw) ExpectClosed(within time.Duration) error {
	got, err := r.ReadUntilClosed(within)
	if err != nil {
		return err
	}
	if len(got) > 0 {
		return fmt.Errorf("%w: %d frames, first header %+v", ErrNotClosed, len(got), got[0].Header)
	}
	return nil
}

// ReadAll reads raw bytes until the server closes the connection (for four-letter words).
func (r *Raw) ReadAll(within time.Duration) ([]byte, error) {
	if err := r.nc.SetReadDeadline(time.Now().Add(within)); err != nil {
		return nil, fmt.Errorf("conformance: set deadline: %w", err)
	}
	b, err := io.ReadAll(r.br)
	if err != nil {
		return b, closedOrStillOpen(err)
	}
	return b, nil
}

// closedOrStillOpen turns a read error into nil for a close by the server (EOF or reset) and into
// ErrStillOpen for a timeout.
func closedOrStillOpen(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return ErrStillOpen
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, io.ErrClosedPipe) || isReset(err) {
		return nil
	}
	return fmt.Errorf("conformance: read: %w", err)
}

// isReset reports whether err is a connection reset, which is how a close with unread input arrives.
func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
