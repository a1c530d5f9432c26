package jute

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"
)

// be builds big-endian input from int32 values and raw byte strings.
func be(parts ...any) []byte {
	var b []byte
	for _, p := range parts {
		switch v := p.(type) {
		case int:
			b = binary.BigEndian.AppendUint32(b, uint32(int32(v)))
		case string:
			b = append(b, v...)
		default:
			panic("be: unsupported part")
		}
	}
	return b
}

func TestDecoderLengthChecks(t *testing.T) {
	tests := []struct {
		name   string
		in     []byte
		max    int
		decode func(d *Decoder) any
		want   any
		err    error
	}{
		{"string at max", be(3, "abc"), 3, func(d *Decoder) any { return d.String() }, "abc", nil},
		{"string over max", be(4, "abcd"), 3, func(d *Decoder) any { return d.String() }, "", ErrTooLarge},
		{"string null", be(-1), 0, func(d *Decoder) any { return d.String() }, "", nil},
		{"string negative", be(-2), 0, func(d *Decoder) any { return d.String() }, "", ErrNegativeLen},
		{"string short", be(5, "abc"), 0, func(d *Decoder) any { return d.String() }, "", ErrShortBuffer},
		{"buffer over max", be(DefaultMaxBuffer + 1), 0, func(d *Decoder) any { return d.Buffer() }, []byte(nil), ErrTooLarge},
		{"buffer null", be(-1), 0, func(d *Decoder) any { return d.Buffer() }, []byte(nil), nil},
		{"buffer empty", be(0), 0, func(d *Decoder) any { return d.Buffer() }, []byte{}, nil},
		{"buffer negative", be(math.MinInt32), 0, func(d *Decoder) any { return d.Buffer() }, []byte(nil), ErrNegativeLen},
		{"buffer short", be(100, "0123456789"), 0, func(d *Decoder) any { return d.Buffer() }, []byte(nil), ErrShortBuffer},
		{"vector null", be(-1), 0, func(d *Decoder) any { return d.Strings() }, []string(nil), nil},
		{"vector empty", be(0), 0, func(d *Decoder) any { return d.Strings() }, []string{}, nil},
		{"vector negative", be(-3), 0, func(d *Decoder) any { return d.Strings() }, []string(nil), ErrNegativeLen},
		{"vector count over max", be(11), 10, func(d *Decoder) any { return d.Strings() }, []string(nil), ErrTooLarge},
		{"vector count beyond input", be(3, 0, 0), 0, func(d *Decoder) any { return d.Strings() }, []string(nil), ErrShortBuffer},
		{"vector element short", be(2, 1, "a", 5, "b"), 0, func(d *Decoder) any { return d.Strings() }, []string(nil), ErrShortBuffer},
		{"int short", []byte{1, 2, 3}, 0, func(d *Decoder) any { return d.Int32() }, int32(0), ErrShortBuffer},
		{"long short", []byte{1, 2, 3, 4, 5, 6, 7}, 0, func(d *Decoder) any { return d.Int64() }, int64(0), ErrShortBuffer},
		{"bool short", nil, 0, func(d *Decoder) any { return d.Bool() }, false, ErrShortBuffer},
		{"bool non-zero is true", []byte{7}, 0, func(d *Decoder) any { return d.Bool() }, true, nil},
		{"ACL count beyond input", be(2, 1, 0, 0, 1, 0), 0, func(d *Decoder) any { return decodeACLs(d) }, []ACL(nil), ErrShortBuffer},
		{"zero-value decoder uses the default maximum", be(3, "abc"), -1, func(d *Decoder) any { return d.String() }, "abc", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDecoder(tc.in, tc.max)
			if tc.max < 0 {
				d = &Decoder{}
				d.Reset(tc.in)
			}
			got := tc.decode(d)
			if !equalValue(got, tc.want) {
				t.Errorf("decode(%x) = %#v; want %#v", tc.in, got, tc.want)
			}
			if !errors.Is(d.Err(), tc.err) || (tc.err == nil) != (d.Err() == nil) {
				t.Errorf("decode(%x) error = %v; want %v", tc.in, d.Err(), tc.err)
			}
		})
	}
}

// equalValue compares decoded values, keeping nil and empty slices apart.
func equalValue(a, b any) bool {
	switch x := a.(type) {
	case []byte:
		y := b.([]byte)
		return (x == nil) == (y == nil) && string(x) == string(y)
	case []string:
		y := b.([]string)
		if (x == nil) != (y == nil) || len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	case []ACL:
		y := b.([]ACL)
		return (x == nil) == (y == nil) && len(x) == len(y)
	}
	return a == b
}

func TestDecoderErrorIsSticky(t *testing.T) {
	d := NewDecoder(be(-7, 1, 2), 0)
	if s := d.String(); s != "" || !errors.Is(d.Err(), ErrNegativeLen) {
		t.Fatalf("String() = %q, %v", s, d.Err())
	}
	first := d.Err()
	if v := d.Int32(); v != 0 {
		t.Errorf("Int32 after an error = %d; want 0", v)
	}
	if v := d.Int64(); v != 0 || d.Bool() || d.Buffer() != nil || d.Strings() != nil {
		t.Error("reads after an error returned values")
	}
	if d.Len() != 8 {
		t.Errorf("reads after an error consumed input: %d bytes left; want 8", d.Len())
	}
	d.Fail(ErrUnknownOp)
	if d.Err() != first || d.Finish() != first {
		t.Errorf("error = %v; want the first one, %v", d.Err(), first)
	}
	d.Reset(be(1))
	if d.Err() != nil || d.Int32() != 1 || d.Finish() != nil {
		t.Errorf("Reset did not clear the error: %v", d.Err())
	}
}

// TestHugeCountsDoNotAllocate checks that a tiny input claiming a huge field or vector fails
// without allocating, even with no practical maximum.
func TestHugeCountsDoNotAllocate(t *testing.T) {
	huge := be(math.MaxInt32, 0, 0)
	cases := map[string]func(d *Decoder){
		"buffer":  func(d *Decoder) { d.Buffer() },
		"string":  func(d *Decoder) { _ = d.String() },
		"strings": func(d *Decoder) { d.Strings() },
		"acls":    func(d *Decoder) { decodeACLs(d) },
		"whoAmI":  func(d *Decoder) { decodeClientInfos(d) },
		"getChildren2": func(d *Decoder) {
			var r GetChildren2Response
			r.Decode(d)
		},
	}
	for name, decode := range cases {
		t.Run(name, func(t *testing.T) {
			d := NewDecoder(nil, math.MaxInt32)
			allocs := testing.AllocsPerRun(100, func() {
				d.Reset(huge)
				decode(d)
				if !errors.Is(d.Err(), ErrShortBuffer) {
					t.Fatalf("error = %v; want ErrShortBuffer", d.Err())
				}
			})
			if allocs != 0 {
				t.Errorf("%v allocations per decode; want 0", allocs)
			}
		})
	}
}

func TestDecodeRequestErrors(t *testing.T) {
	t.Run("short header", func(t *testing.T) {
		if _, _, err := DecodeRequest([]byte{0, 0, 0, 1, 0}, 0); !errors.Is(err, ErrShortBuffer) {
			t.Errorf("err = %v; want ErrShortBuffer", err)
		}
	})
	for _, op := range []Op{99, 10, OpNotification, OpCreateSession, OpError, -1000} {
		h, body, err := DecodeRequest(be(5, int(op)), 0)
		if !errors.Is(err, ErrUnknownOp) || h.Xid != 5 || h.Type != op || body != nil {
			t.Errorf("DecodeRequest(op %d) = %+v, %v, %v; want header and ErrUnknownOp", op, h, body, err)
		}
	}
	t.Run("short body keeps the header", func(t *testing.T) {
		h, body, err := DecodeRequest(be(6, int(OpGetData), 10, "/x"), 0)
		if !errors.Is(err, ErrShortBuffer) || h.Xid != 6 || body != nil {
			t.Errorf("= %+v, %v, %v", h, body, err)
		}
	})
	t.Run("trailing bytes keep the body", func(t *testing.T) {
		h, body, err := DecodeRequest(be(7, int(OpSync), 2, "/x", "junk"), 0)
		if !errors.Is(err, ErrTrailingData) || h.Xid != 7 || body.(*SyncRequest).Path != "/x" {
			t.Errorf("= %+v, %v, %v", h, body, err)
		}
	})
	t.Run("header-only op with a body", func(t *testing.T) {
		if _, _, err := DecodeRequest(be(-2, int(OpPing), 0), 0); !errors.Is(err, ErrTrailingData) {
			t.Errorf("err = %v; want ErrTrailingData", err)
		}
	})
	t.Run("nested multi is refused", func(t *testing.T) {
		in := Marshal(be(8, int(OpMulti)), &MultiHeader{Type: OpMulti, Err: -1})
		if _, _, err := DecodeRequest(in, 0); !errors.Is(err, ErrUnknownOp) {
			t.Errorf("err = %v; want ErrUnknownOp", err)
		}
	})
	t.Run("multi without its end", func(t *testing.T) {
		in := Marshal(be(8, int(OpMulti)), &MultiHeader{Type: OpDelete, Err: -1})
		in = Marshal(in, &DeleteRequest{Path: "/x", Version: -1})
		if _, _, err := DecodeRequest(in, 0); !errors.Is(err, ErrShortBuffer) {
			t.Errorf("err = %v; want ErrShortBuffer", err)
		}
	})
	t.Run("field limit applies", func(t *testing.T) {
		in := Marshal(be(9, int(OpSync)), &SyncRequest{Path: "/0123456789"})
		if _, _, err := DecodeRequest(in, 5); !errors.Is(err, ErrTooLarge) {
			t.Errorf("err = %v; want ErrTooLarge", err)
		}
	})
}

func TestDecodeReplySpecialCases(t *testing.T) {
	ev := WatcherEvent{Type: EventNodeDeleted, State: StateSyncConnected, Path: "/n"}
	t.Run("notification whatever the op", func(t *testing.T) {
		frame := AppendReply(nil, ReplyHeader{Xid: XidNotification, Zxid: -1}, &ev)
		_, body, err := DecodeReply(frame[4:], OpGetData, 0)
		if err != nil || *body.(*WatcherEvent) != ev {
			t.Errorf("= %+v, %v", body, err)
		}
	})
	t.Run("ping", func(t *testing.T) {
		frame := AppendReply(nil, ReplyHeader{Xid: XidPing, Zxid: 4}, nil)
		h, body, err := DecodeReply(frame[4:], OpPing, 0)
		if err != nil || body != nil || h.Zxid != 4 {
			t.Errorf("= %+v, %v, %v", h, body, err)
		}
	})
	t.Run("error replies are header-only", func(t *testing.T) {
		frame := AppendReply(nil, ReplyHeader{Xid: 1, Zxid: 4, Err: CodeNoNode}, nil)
		h, body, err := DecodeReply(frame[4:], OpGetData, 0)
		if err != nil || body != nil || h.Err != CodeNoNode {
			t.Errorf("= %+v, %v, %v", h, body, err)
		}
		frame = AppendReply(nil, ReplyHeader{Xid: 1, Err: CodeNoNode}, &ErrorResponse{})
		if _, _, err := DecodeReply(frame[4:], OpGetData, 0); !errors.Is(err, ErrTrailingData) {
			t.Errorf("error reply with a body: err = %v; want ErrTrailingData", err)
		}
	})
	t.Run("multiRead error with an empty result list", func(t *testing.T) {
		frame := AppendReply(nil, ReplyHeader{Xid: 1, Err: CodeMarshallingError}, &MultiResponse{})
		_, body, err := DecodeReply(frame[4:], OpMultiRead, 0)
		if err != nil || body == nil || len(body.(*MultiResponse).Results) != 0 {
			t.Errorf("= %+v, %v", body, err)
		}
	})
	t.Run("unknown multi result type", func(t *testing.T) {
		in := Marshal(be(1, 0, 0, 0, 0), &MultiHeader{Type: OpSync})
		if _, _, err := DecodeReply(in, OpMulti, 0); !errors.Is(err, ErrUnknownOp) {
			t.Errorf("err = %v; want ErrUnknownOp", err)
		}
	})
	t.Run("short header", func(t *testing.T) {
		if _, err := PeekReplyHeader(make([]byte, 15)); !errors.Is(err, ErrShortBuffer) {
			t.Errorf("err = %v", err)
		}
		h, err := PeekReplyHeader(AppendReply(nil, ReplyHeader{Xid: 9, Zxid: 8, Err: CodeNoAuth}, &ev)[4:])
		if err != nil || h != (ReplyHeader{Xid: 9, Zxid: 8, Err: CodeNoAuth}) {
			t.Errorf("PeekReplyHeader = %+v, %v", h, err)
		}
	})
}

func TestWellKnownACLStringsDoNotAllocate(t *testing.T) {
	in := Marshal(nil, &ACL{Perms: PermAll, ID: Id{Scheme: "world", ID: "anyone"}})
	d := NewDecoder(nil, 0)
	var a ACL
	allocs := testing.AllocsPerRun(100, func() {
		d.Reset(in)
		a.Decode(d)
	})
	if allocs != 0 || a.ID != (Id{Scheme: "world", ID: "anyone"}) || d.Finish() != nil {
		t.Errorf("decoding world:anyone: %v allocations, %+v, %v", allocs, a, d.Err())
	}
	// Other strings still decode as themselves.
	in = Marshal(nil, &Id{Scheme: "worlds", ID: "any"})
	var id Id
	if err := Unmarshal(in, 0, &id); err != nil || id != (Id{Scheme: "worlds", ID: "any"}) {
		t.Errorf("Id = %+v, %v", id, err)
	}
}

// TestAliasDecoderBuffers checks that an alias decoder returns buffers that share the input
// (capacity cut, so appending cannot overwrite what follows), keeps null apart from empty, and
// decodes the same values as a copying decoder.
func TestAliasDecoderBuffers(t *testing.T) {
	e := NewEncoder(nil)
	e.Buffer([]byte("abc"))
	e.Buffer(nil)
	e.Buffer([]byte{})
	e.Buffer([]byte("de"))
	in := e.Bytes()

	d := NewAliasDecoder(in, 0)
	a, null, empty, de := d.Buffer(), d.Buffer(), d.Buffer(), d.Buffer()
	if err := d.Finish(); err != nil {
		t.Fatal(err)
	}
	if string(a) != "abc" || null != nil || empty == nil || len(empty) != 0 || string(de) != "de" {
		t.Fatalf("decoded %q %v %v %q", a, null, empty, de)
	}
	if cap(a) != len(a) {
		t.Fatalf("cap %d; want %d", cap(a), len(a))
	}
	in[4] = 'X' // the first byte of "abc", after its length prefix
	if a[0] != 'X' {
		t.Fatal("alias decoder copied the buffer")
	}
	c := NewDecoder(in, 0).Buffer()
	in[4] = 'Y'
	if c[0] != 'X' {
		t.Fatal("copying decoder aliased the buffer")
	}
}

// PeekRequestHeader reads the same header DecodeRequest does, hands back the body's bytes
// untouched, and refuses a frame too short for a header, without panicking.
func TestPeekRequestHeader(t *testing.T) {
	e := NewEncoder(nil)
	(&RequestHeader{Xid: -7, Type: OpSetData}).Encode(e)
	(&SetDataRequest{Path: "/a", Data: []byte("x"), Version: 3}).Encode(e)
	frame := e.Bytes()
	h, body, err := PeekRequestHeader(frame)
	want, _, _ := DecodeRequest(frame, 0)
	if err != nil || h != want || &body[0] != &frame[8] || len(body) != len(frame)-8 {
		t.Fatalf("PeekRequestHeader = %+v, %d bytes, %v; want %+v and the frame's body", h, len(body), err, want)
	}
	for n := range 8 {
		if _, _, err := PeekRequestHeader(frame[:n]); err == nil {
			t.Fatalf("a %d-byte frame gave a header", n)
		}
	}
}
