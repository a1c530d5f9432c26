// Package jute is ZooKeeper's client wire format: framing, headers, every request and response
// record of ZooKeeper 3.9's client protocol, and the op, error, event and state codes as typed
// constants. It does no I/O of its own beyond reading frames from an io.Reader it is given, keeps
// no global mutable state, starts no goroutines, and does not panic on any input.
//
// # Framing
//
// Both directions send frames: a 4-byte big-endian signed length that does not count itself,
// then that many bytes. ReadFrame and FrameReader refuse a negative length (ErrNegativeLen) or one
// above the maximum (ErrTooLarge) before allocating anything; ZooKeeper closes the connection in
// that case. Writers build frames with AppendRequest, AppendReply or AppendFrame, or with
// Encoder.BeginFrame and Encoder.EndFrame, which reserve the length and patch it afterwards.
//
// The first frame a client sends is a ConnectRequest and the first the server sends back is a
// ConnectResponse, neither with a header. Their trailing readOnly byte is optional: HasReadOnly
// records whether it was there, and a server mirrors it in its reply.
//
// # Headers and special xids
//
// Every later request frame is a RequestHeader{xid, type} followed by the record for that type
// (none for ping, closeSession and whoAmI); DecodeRequest reads both. Every reply frame is a
// ReplyHeader{xid, zxid, err} followed by the response record only when err is 0 and the op has a
// response body; DecodeReply reads both for a known request type. Special xids:
//
//	-1 (XidNotification)  a watch notification from the server: ReplyHeader then WatcherEvent
//	-2 (XidPing)          a ping; its reply always carries -2
//	-4 (XidAuth)          an auth packet as the Java client sends it; the reply echoes the xid
//	-8 (XidSetWatches)    setWatches or setWatches2 as the Java client sends them after a reconnect
//
// multi and multiRead carry each op behind a MultiHeader{type, done, err} and end with a header
// whose done flag is set (MultiRequest, MultiResponse). A failed op inside a multi has result type
// OpError and its code both in the header and in an ErrorResponse body.
//
// # Encoding and null values
//
// int and long are 4 and 8 bytes big-endian, a boolean is one byte (any non-zero byte reads as
// true), buffers, strings and vectors carry an int length or count. A length of -1 means null.
// Buffers and vectors keep null apart from empty: null decodes to a nil slice, empty to a non-nil
// slice of length zero, and each encodes back the way it came. Strings do not: a null string
// decodes to "" and "" encodes as length 0, because no message of the protocol gives a null string
// a meaning a server must preserve. Any other negative length is ErrNegativeLen.
//
// # Limits
//
// A Decoder checks every length prefix against the bytes left in its input (each vector element
// counting at least its smallest encoding) and against its maximum before it allocates, so a
// short frame claiming a huge field or vector fails with ErrShortBuffer or ErrTooLarge instead of
// allocating. The default maximum, DefaultMaxBuffer (0xfffff), is ZooKeeper's jute.maxbuffer;
// servers apply the same limit to whole frames.
//
// # Errors
//
// A Decoder has a sticky error: the first failure is kept and every later read returns a zero
// value, so record decoders read straight through and the caller checks once with Err or Finish.
// Errors wrap the sentinels ErrShortBuffer, ErrTooLarge, ErrNegativeLen, ErrTrailingData and
// ErrUnknownOp; compare with errors.Is. Code implements error, so ZooKeeper's error codes can be
// returned and matched the same way.
//
// # Concurrency
//
// An Encoder, a Decoder or a FrameReader is not safe for concurrent use; each belongs to one
// goroutine (a connection's reader or writer). Records are plain values with no hidden state. A
// record decoded by NewDecoder owns its memory (buffers and strings are copied out of the
// input), so it stays valid after the frame buffer is reused and may be handed to other
// goroutines; one decoded by NewAliasDecoder shares its byte buffers with the input, which must
// then stay unmodified for as long as the record is used.
package jute
