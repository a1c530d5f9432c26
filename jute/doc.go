// Package jute is ZooKeeper's client wire format: framing, headers, every request and response
// record of ZooKeeper 3.9's client protocol, and the op, error, event and state codes as typed
// constants. It does no I/O of its own beyond reading frames from an io.Reader it is given, keeps
// no global mutable state, starts no goroutines, and does not panic on any input.
//
// # Framing
//
// Both directions send frames: a 4-byte big-endian signed length that does not count itself,
// then that many bytes. ReadFrame and FrameReader refuse a negative length (ErrNegativeLen) or one
// above the maximum (ErrTooLarge) before allocating; ZooKeeper closes the connection then.
// Writers use AppendRequest, AppendReply or AppendFrame, or Encoder.BeginFrame and EndFrame,
// which reserve the length and patch it afterwards. The first frames are a ConnectRequest and a
// ConnectResponse, without headers; their trailing readOnly byte is optional (HasReadOnly records
// whether it was there, and a server mirrors it).
//
// # Headers and special xids
//
// Later request frames are a RequestHeader{xid, type} and the type's record (none for ping,
// closeSession, whoAmI): DecodeRequest. Replies are a ReplyHeader{xid, zxid, err} and, when err is
// 0 and the op has one, the response record: DecodeReply, for a known request type. Special xids:
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
// int and long are 4 and 8 bytes big-endian, a boolean one byte (non-zero reads as true);
// buffers, strings and vectors carry an int length or count, -1 meaning null.
// Buffers and vectors keep null apart from empty: null decodes to a nil slice, empty to a non-nil
// slice of length zero, and each encodes back the way it came. Strings do not: a null string
// decodes to "" and "" encodes as length 0, because no message of the protocol gives a null string
// a meaning a server must preserve. Any other negative length is ErrNegativeLen.
//
// # Limits
//
// A Decoder checks every length prefix against the bytes left (each vector element counting at
// least its smallest encoding) and its maximum before allocating, so a short frame claiming a huge
// field fails with ErrShortBuffer or ErrTooLarge. DefaultMaxBuffer (0xfffff) is ZooKeeper's
// jute.maxbuffer; servers apply the same limit to whole frames.
//
// # Errors
//
// A Decoder's error is sticky: the first failure is kept and later reads return zero values, so
// decoders read straight through and the caller checks once with Err or Finish. Errors wrap
// ErrShortBuffer, ErrTooLarge, ErrNegativeLen, ErrTrailingData and ErrUnknownOp (errors.Is).
// Code implements error, so ZooKeeper's error codes are returned and matched the same way.
//
// # Concurrency
//
// Encoders, Decoders and FrameReaders belong to one goroutine each. Records are plain values. A
// record decoded by NewDecoder owns its memory (copied out of the input), so it outlives the frame
// buffer and may go to other goroutines; one decoded by NewAliasDecoder shares its byte buffers
// with the input, which must stay unmodified for as long as the record is used.
package jute
