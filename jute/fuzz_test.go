package jute

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"reflect"
	"testing"
)

// Fuzz targets, one per top-level decoder. Each is seeded with the frames captured from Apache
// ZooKeeper under testdata/ and with the round-trip cases. Decoding must never panic; when it
// succeeds, encoding the result and decoding that again must give the same value and the same
// bytes. Run one for a while with, for example:
//
//	go test ./jute -run='^$' -fuzz='^FuzzDecodeRequest$' -fuzztime=20s

// goldenSeeds returns the payloads (length prefix removed) of every captured frame.
func goldenSeeds(f *testing.F) []goldenFrame {
	f.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*.hex"))
	if err != nil {
		f.Fatal(err)
	}
	var out []goldenFrame
	for _, path := range files {
		frames, err := readGolden(path)
		if err != nil {
			f.Fatal(err)
		}
		for _, g := range frames {
			g.frame = g.frame[FrameHeaderLen:]
			out = append(out, g)
		}
	}
	if len(out) == 0 {
		f.Fatal("no golden frames under testdata/")
	}
	return out
}

func FuzzDecodeRequest(f *testing.F) {
	for _, g := range goldenSeeds(f) {
		if g.dir == '>' && g.kind != "connect" {
			f.Add(g.frame)
		}
	}
	for _, tc := range roundTripCases() {
		if tc.reqOp != 0 {
			f.Add(AppendRequest(nil, RequestHeader{Xid: 1, Type: tc.reqOp}, tc.rec)[FrameHeaderLen:])
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		h, body, err := DecodeRequest(in, 0)
		if err != nil {
			return
		}
		enc := AppendRequest(nil, h, body)[FrameHeaderLen:]
		h2, body2, err := DecodeRequest(enc, 0)
		if err != nil {
			t.Fatalf("re-encoded request %x does not decode: %v", enc, err)
		}
		if h2 != h || !reflect.DeepEqual(body2, body) {
			t.Fatalf("request changed on a round trip: %+v %+v, then %+v %+v", h, body, h2, body2)
		}
		if enc2 := AppendRequest(nil, h2, body2)[FrameHeaderLen:]; !bytes.Equal(enc2, enc) {
			t.Fatalf("encoding is not stable: %x, then %x", enc, enc2)
		}
	})
}

func FuzzDecodeReply(f *testing.F) {
	for _, g := range goldenSeeds(f) {
		if g.dir == '<' && g.kind != "connect" {
			op, _ := opByName(g.kind)
			f.Add(g.frame, int32(op))
		}
	}
	for _, tc := range roundTripCases() {
		if tc.repOp != 0 {
			f.Add(AppendReply(nil, ReplyHeader{Xid: 1, Zxid: 2}, tc.rec)[FrameHeaderLen:], int32(tc.repOp))
		}
	}
	f.Fuzz(func(t *testing.T, in []byte, op32 int32) {
		op := Op(op32)
		h, body, err := DecodeReply(in, op, 0)
		if err != nil {
			return
		}
		enc := AppendReply(nil, h, body)[FrameHeaderLen:]
		h2, body2, err := DecodeReply(enc, op, 0)
		if err != nil {
			t.Fatalf("re-encoded %v reply %x does not decode: %v", op, enc, err)
		}
		if h2 != h || !reflect.DeepEqual(body2, body) {
			t.Fatalf("%v reply changed on a round trip: %+v %+v, then %+v %+v", op, h, body, h2, body2)
		}
		if enc2 := AppendReply(nil, h2, body2)[FrameHeaderLen:]; !bytes.Equal(enc2, enc) {
			t.Fatalf("encoding is not stable: %x, then %x", enc, enc2)
		}
	})
}

// fuzzRecord checks the round-trip property for one record type decoded with Unmarshal.
func fuzzRecord(t *testing.T, in []byte, newRec func() Record) {
	r := newRec()
	if err := Unmarshal(in, 0, r); err != nil {
		return
	}
	enc := Marshal(nil, r)
	r2 := newRec()
	if err := Unmarshal(enc, 0, r2); err != nil {
		t.Fatalf("re-encoded %T %x does not decode: %v", r, enc, err)
	}
	if !reflect.DeepEqual(r2, r) {
		t.Fatalf("%T changed on a round trip: %+v, then %+v", r, r, r2)
	}
	if enc2 := Marshal(nil, r2); !bytes.Equal(enc2, enc) {
		t.Fatalf("encoding is not stable: %x, then %x", enc, enc2)
	}
}

func FuzzConnectRequest(f *testing.F) {
	for _, g := range goldenSeeds(f) {
		if g.dir == '>' && g.kind == "connect" {
			f.Add(g.frame)
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		fuzzRecord(t, in, func() Record { return &ConnectRequest{} })
	})
}

func FuzzConnectResponse(f *testing.F) {
	for _, g := range goldenSeeds(f) {
		if g.dir == '<' && g.kind == "connect" {
			f.Add(g.frame)
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		fuzzRecord(t, in, func() Record { return &ConnectResponse{} })
	})
}

func FuzzMultiRequest(f *testing.F) {
	for _, g := range goldenSeeds(f) {
		if g.dir == '>' && (g.kind == "multi" || g.kind == "multiRead") {
			f.Add(g.frame[8:]) // after the RequestHeader
		}
	}
	f.Add(Marshal(nil, allOpsMulti))
	f.Fuzz(func(t *testing.T, in []byte) {
		fuzzRecord(t, in, func() Record { return &MultiRequest{} })
	})
}

func FuzzMultiResponse(f *testing.F) {
	for _, g := range goldenSeeds(f) {
		if g.dir == '<' && (g.kind == "multi" || g.kind == "multiRead") && len(g.frame) > 16 {
			f.Add(g.frame[16:]) // after the ReplyHeader
		}
	}
	f.Add(Marshal(nil, allResultsMulti))
	f.Fuzz(func(t *testing.T, in []byte) {
		fuzzRecord(t, in, func() Record { return &MultiResponse{} })
	})
}

// FuzzFrameReader feeds arbitrary bytes to a FrameReader with a small maximum: it must never
// return a frame over the maximum, and the frames it returns, framed again, must be exactly the
// bytes it consumed.
func FuzzFrameReader(f *testing.F) {
	var stream []byte
	for _, g := range goldenSeeds(f) {
		framed := append(be(len(g.frame)), g.frame...)
		f.Add(framed)
		stream = append(stream, framed...)
	}
	f.Add(stream)
	f.Add([]byte("ruok"))
	f.Add(be(-1))
	f.Fuzz(func(t *testing.T, in []byte) {
		const maxLen = 4096
		fr := NewFrameReader(bytes.NewReader(in), maxLen)
		var again []byte
		for {
			p, err := fr.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) &&
					!errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrNegativeLen) {
					t.Fatalf("unexpected error %v", err)
				}
				break
			}
			if len(p) > maxLen {
				t.Fatalf("frame of %d bytes over the maximum %d", len(p), maxLen)
			}
			again = append(again, be(len(p))...)
			again = append(again, p...)
		}
		if !bytes.HasPrefix(in, again) {
			t.Fatalf("frames read do not match the input")
		}
	})
}
