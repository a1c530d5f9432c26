package jute

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// Decoding errors. A Decoder keeps the first one it meets (the sticky error) and reads nothing after it.
var (
	ErrShortBuffer  = errors.New("jute: short buffer")
	ErrTooLarge     = errors.New("jute: length exceeds the maximum")
	ErrNegativeLen  = errors.New("jute: negative length")
	ErrTrailingData = errors.New("jute: trailing bytes after record")
	ErrUnknownOp    = errors.New("jute: unknown op")
)

// Record is a jute record: a fixed sequence of fields with no tags or lengths of its own.
// Encode appends the record to e; Decode reads it from d and leaves any failure in d.Err().
type Record interface {
	Encode(e *Encoder)
	Decode(d *Decoder)
}

// Encoder appends jute-encoded fields to a byte slice. The zero value is ready to use.
type Encoder struct {
	buf []byte
}

// NewEncoder returns an Encoder that appends to buf (which may be nil).
func NewEncoder(buf []byte) *Encoder { return &Encoder{buf: buf} }

// Bytes returns the encoded bytes.
func (e *Encoder) Bytes() []byte { return e.buf }

// Len returns the number of bytes encoded so far.
func (e *Encoder) Len() int { return len(e.buf) }

// Reset empties the encoder, keeping its storage.
func (e *Encoder) Reset() { e.buf = e.buf[:0] }

// Int32 appends a big-endian int.
func (e *Encoder) Int32(v int32) { e.buf = binary.BigEndian.AppendUint32(e.buf, uint32(v)) }

// Int64 appends a big-endian long.
func (e *Encoder) Int64(v int64) { e.buf = binary.BigEndian.AppendUint64(e.buf, uint64(v)) }

// Bool appends a boolean as one byte, 0 or 1.
func (e *Encoder) Bool(v bool) {
	if v {
		e.buf = append(e.buf, 1)
	} else {
		e.buf = append(e.buf, 0)
	}
}

// Buffer appends a length-prefixed byte buffer; a nil slice is written as null (length -1),
// an empty non-nil slice as length 0.
func (e *Encoder) Buffer(b []byte) {
	if b == nil {
		e.Int32(-1)
		return
	}
	e.Int32(int32(len(b)))
	e.buf = append(e.buf, b...)
}

// String appends a length-prefixed UTF-8 string.
func (e *Encoder) String(s string) { e.buf = AppendString(e.buf, s) }

// AppendString appends s to b as a record field: its length, big-endian, then its bytes.
func AppendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// Strings appends a vector of strings; nil is written as a null vector (count -1).
func (e *Encoder) Strings(v []string) {
	if v == nil {
		e.Int32(-1)
		return
	}
	// Room for the whole vector at once: a large one (the children of a busy lock directory)
	// grown append by append is copied over and over (docs/performance.md).
	n := 4
	for _, s := range v {
		n += 4 + len(s)
	}
	e.buf = slices.Grow(e.buf, n)
	e.Int32(int32(len(v)))
	for _, s := range v {
		e.String(s)
	}
}

// Record appends r.
func (e *Encoder) Record(r Record) { r.Encode(e) }

// Decoder reads jute-encoded fields from a byte slice with a sticky error: after the first failure
// every read returns the zero value, so a record decoder reads straight through and checks Err once.
// Every length prefix is checked against the bytes left and against the maximum before anything is
// allocated. The zero value decodes nothing until Reset and uses DefaultMaxBuffer as its maximum.
type Decoder struct {
	b     []byte
	max   int
	err   error
	alias bool // Buffer returns subslices of b instead of copies
}

// NewDecoder returns a Decoder over b that refuses any length prefix above maxLen
// (zero or negative means DefaultMaxBuffer).
func NewDecoder(b []byte, maxLen int) *Decoder {
	if maxLen <= 0 {
		maxLen = DefaultMaxBuffer
	}
	return &Decoder{b: b, max: maxLen}
}

// NewAliasDecoder is NewDecoder for input that stays unmodified and alive as long as what is
// decoded from it: Buffer returns subslices of b (capacity cut to their length) instead of copies.
func NewAliasDecoder(b []byte, maxLen int) *Decoder {
	d := NewDecoder(b, maxLen)
	d.alias = true
	return d
}

// Reset points the decoder at b and clears its error, keeping its maximum.
func (d *Decoder) Reset(b []byte) {
	d.b, d.err = b, nil
	if d.max <= 0 {
		d.max = DefaultMaxBuffer
	}
}

// Err returns the first error met, or nil.
func (d *Decoder) Err() error { return d.err }

// Fail records err as the decoder's error unless one is already recorded.
func (d *Decoder) Fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

// Len returns the number of bytes not yet read.
func (d *Decoder) Len() int { return len(d.b) }

// Rest returns the bytes not yet read, without consuming them.
func (d *Decoder) Rest() []byte { return d.b }

// Int32 reads a big-endian int.
func (d *Decoder) Int32() int32 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 4 {
		d.err = ErrShortBuffer
		return 0
	}
	v := int32(binary.BigEndian.Uint32(d.b))
	d.b = d.b[4:]
	return v
}

// Int64 reads a big-endian long.
func (d *Decoder) Int64() int64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 8 {
		d.err = ErrShortBuffer
		return 0
	}
	v := int64(binary.BigEndian.Uint64(d.b))
	d.b = d.b[8:]
	return v
}

// Bool reads a one-byte boolean; any non-zero byte is true, as in ZooKeeper.
func (d *Decoder) Bool() bool {
	if d.err != nil {
		return false
	}
	if len(d.b) < 1 {
		d.err = ErrShortBuffer
		return false
	}
	v := d.b[0] != 0
	d.b = d.b[1:]
	return v
}

// length reads a length prefix and checks it against the bytes left (each element being at least
// minElem bytes) and the maximum. It returns -1 for null.
func (d *Decoder) length(minElem int) int {
	n := d.Int32()
	if d.err != nil {
		return 0
	}
	if n < 0 {
		if n == -1 {
			return -1
		}
		d.err = ErrNegativeLen
		return 0
	}
	limit := d.max
	if limit <= 0 {
		limit = DefaultMaxBuffer
	}
	if int(n) > limit {
		d.err = fmt.Errorf("jute: length %d > %d: %w", n, limit, ErrTooLarge)
		return 0
	}
	if int64(n)*int64(minElem) > int64(len(d.b)) {
		d.err = ErrShortBuffer
		return 0
	}
	return int(n)
}

// Buffer reads a length-prefixed buffer. Null (-1) gives nil, length 0 an empty non-nil slice.
// The result is a copy, except from a NewAliasDecoder, where it is a subslice of the input.
func (d *Decoder) Buffer() []byte {
	n := d.length(1)
	if d.err != nil || n < 0 {
		return nil
	}
	var b []byte
	if d.alias && n > 0 {
		b = d.b[:n:n]
	} else {
		b = make([]byte, n)
		copy(b, d.b)
	}
	d.b = d.b[n:]
	return b
}

// String reads a length-prefixed string. A null string (-1) reads as "": no request or response of
// the protocol gives null a meaning different from empty that a server must preserve.
func (d *Decoder) String() string {
	n := d.length(1)
	if d.err != nil || n <= 0 {
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// commonString reads a length-prefixed string like String, but returns the well-known ACL schemes
// and ids without allocating.
func (d *Decoder) commonString() string {
	n := d.length(1)
	if d.err != nil || n <= 0 {
		return ""
	}
	b := d.b[:n]
	d.b = d.b[n:]
	switch string(b) {
	case "world":
		return "world"
	case "anyone":
		return "anyone"
	case "digest":
		return "digest"
	case "ip":
		return "ip"
	case "auth":
		return "auth"
	case "sasl":
		return "sasl"
	case "x509":
		return "x509"
	}
	return string(b)
}

// Strings reads a vector of strings. A null vector gives nil, an empty one a non-nil empty slice.
func (d *Decoder) Strings() []string {
	n := d.length(4)
	if d.err != nil || n < 0 {
		return nil
	}
	v := make([]string, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		v = append(v, d.String())
	}
	if d.err != nil {
		return nil
	}
	return v
}

// VectorLen reads a vector count for elements of at least minElem bytes each and returns it
// (-1 for null). Record decoders use it for vectors of records.
func (d *Decoder) VectorLen(minElem int) int {
	if minElem < 1 {
		minElem = 1
	}
	return d.length(minElem)
}

// Record decodes r from d.
func (d *Decoder) Record(r Record) { r.Decode(d) }

// Finish reports the sticky error, or ErrTrailingData if bytes are left over.
func (d *Decoder) Finish() error {
	if d.err != nil {
		return d.err
	}
	if len(d.b) != 0 {
		return ErrTrailingData
	}
	return nil
}

// Unmarshal decodes exactly one record from b with the given maximum field length.
func Unmarshal(b []byte, maxLen int, r Record) error {
	d := NewDecoder(b, maxLen)
	r.Decode(d)
	return d.Finish()
}

// Marshal appends r's encoding to buf.
func Marshal(buf []byte, r Record) []byte {
	e := Encoder{buf: buf}
	r.Encode(&e)
	return e.buf
}
