package jute

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// RequestHasBody reports whether a request of type op carries a record after its header.
// Ping, closeSession and whoAmI are header-only; every other valid request has a body.
func RequestHasBody(op Op) bool {
	switch op {
	case OpPing, OpCloseSession, OpWhoAmI:
		return false
	}
	return true
}

// ValidRequest reports whether a client may send op as a request type: every op code except
// notification, createSession and error (which only the server makes). Check is listed because it
// decodes like any request, although ZooKeeper accepts it only inside a multi.
func ValidRequest(op Op) bool {
	return !RequestHasBody(op) || NewRequest(op) != nil
}

// DecodeRequest decodes a request frame's payload (the bytes after the length prefix): the
// RequestHeader, then the body for its type, or nil for a header-only request. maxLen bounds each
// length-prefixed field (zero or negative means DefaultMaxBuffer).
//
// The header is returned whenever it could be read, so the caller can answer with the right xid:
//   - an op that is no request type gives an error wrapping ErrUnknownOp (ZooKeeper answers
//     Unimplemented and closes the connection);
//   - a body that does not decode gives a nil body and the decoding error (ZooKeeper answers
//     MarshallingError);
//   - bytes left after a complete body give the body and an error wrapping ErrTrailingData, which
//     a lenient caller may ignore (ZooKeeper itself does not look at them).
func DecodeRequest(frame []byte, maxLen int) (RequestHeader, Record, error) {
	d := NewDecoder(frame, maxLen)
	var h RequestHeader
	h.Decode(d)
	if err := d.Err(); err != nil {
		return h, nil, fmt.Errorf("jute: request header: %w", err)
	}
	var body Record
	if RequestHasBody(h.Type) {
		body = NewRequest(h.Type)
		if body == nil {
			return h, nil, fmt.Errorf("jute: request type %d: %w", int32(h.Type), ErrUnknownOp)
		}
		body.Decode(d)
	}
	if err := d.Finish(); err != nil {
		if errors.Is(err, ErrTrailingData) {
			return h, body, fmt.Errorf("jute: %v request: %d bytes left: %w", h.Type, d.Len(), err)
		}
		return h, nil, fmt.Errorf("jute: %v request: %w", h.Type, err)
	}
	return h, body, nil
}

// PeekRequestHeader decodes only the RequestHeader at the start of a request frame's payload and
// returns the bytes after it: the body as the client sent it, for a server that passes write
// bodies on undecoded (they are decoded once, where they are applied).
func PeekRequestHeader(frame []byte) (RequestHeader, []byte, error) {
	if len(frame) < 8 {
		return RequestHeader{}, nil, fmt.Errorf("jute: request header: %d bytes: %w", len(frame), io.ErrUnexpectedEOF)
	}
	h := RequestHeader{Xid: int32(binary.BigEndian.Uint32(frame)), Type: Op(int32(binary.BigEndian.Uint32(frame[4:])))}
	return h, frame[8:], nil
}

// PeekReplyHeader decodes only the ReplyHeader at the start of a reply frame's payload, so that a
// client can find the request a reply answers (by xid) before decoding the body with DecodeReply.
func PeekReplyHeader(frame []byte) (ReplyHeader, error) {
	d := NewDecoder(frame, 0)
	var h ReplyHeader
	h.Decode(d)
	if err := d.Err(); err != nil {
		return h, fmt.Errorf("jute: reply header: %w", err)
	}
	return h, nil
}

// DecodeReply decodes a reply frame's payload (the bytes after the length prefix) sent in answer to
// a request of type op. It returns the ReplyHeader and the body, which is:
//   - a *WatcherEvent when the xid is XidNotification, whatever op is;
//   - nil for a ping reply (XidPing) and for an error reply (Err != 0), which are header-only,
//     except that an error reply to multi or multiRead that carries bytes is decoded as a
//     *MultiResponse (some ZooKeeper versions send an empty result list with the
//     MarshallingError for a multiRead holding a write op; 3.8.0 sends the header only);
//   - nil for a successful reply to an op without a response body, and otherwise the record
//     NewResponse(op) returns.
//
// The header is returned whenever it could be read. Bytes left after the body give an error
// wrapping ErrTrailingData, with the header and body still returned.
func DecodeReply(frame []byte, op Op, maxLen int) (ReplyHeader, Record, error) {
	d := NewDecoder(frame, maxLen)
	var h ReplyHeader
	h.Decode(d)
	if err := d.Err(); err != nil {
		return h, nil, fmt.Errorf("jute: reply header: %w", err)
	}
	var body Record
	switch {
	case h.Xid == XidNotification:
		body = &WatcherEvent{}
	case h.Xid == XidPing:
	case h.Err != CodeOK:
		if d.Len() > 0 && (op == OpMulti || op == OpMultiRead) {
			body = &MultiResponse{}
		}
	default:
		body = NewResponse(op)
	}
	if body != nil {
		body.Decode(d)
	}
	if err := d.Finish(); err != nil {
		if errors.Is(err, ErrTrailingData) {
			return h, body, fmt.Errorf("jute: %v reply: %d bytes left: %w", op, d.Len(), err)
		}
		return h, nil, fmt.Errorf("jute: %v reply: %w", op, err)
	}
	return h, body, nil
}
