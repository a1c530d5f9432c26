package jute

import (
	"bytes"
	"fmt"
	"testing"
)

// Benchmarks for the hot paths of a server connection. Run with:
//
//	go test ./jute -run='^$' -bench=. -benchmem

var (
	benchGetDataReq  = &GetDataRequest{Path: "/app/config/service-00042", Watch: true}
	benchGetDataResp = &GetDataResponse{Data: bytes.Repeat([]byte("d"), 128), Stat: sampleStat}
	benchCreateReq   = &CreateRequest{Path: "/app/locks/lock-", Data: bytes.Repeat([]byte("c"), 64), ACL: worldAll, Flags: ModeEphemeralSequential}
	benchExistsResp  = &ExistsResponse{Stat: sampleStat}
	benchMulti10     = func() *MultiRequest {
		m := &MultiRequest{}
		for i := range 10 {
			p := fmt.Sprintf("/app/batch/item-%02d", i)
			switch i % 3 {
			case 0:
				m.Ops = append(m.Ops, MultiOp{Type: OpCreate, Req: &CreateRequest{Path: p, Data: []byte("v"), ACL: worldAll}})
			case 1:
				m.Ops = append(m.Ops, MultiOp{Type: OpSetData, Req: &SetDataRequest{Path: p, Data: []byte("w"), Version: -1}})
			default:
				m.Ops = append(m.Ops, MultiOp{Type: OpCheck, Req: &CheckVersionRequest{Path: p, Version: 3}})
			}
		}
		return m
	}()
)

func benchDecodeRequest(b *testing.B, op Op, body Record) {
	frame := AppendRequest(nil, RequestHeader{Xid: 7, Type: op}, body)[FrameHeaderLen:]
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := DecodeRequest(frame, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func benchEncodeRequest(b *testing.B, op Op, body Record) {
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendRequest(buf[:0], RequestHeader{Xid: 7, Type: op}, body)
	}
	b.SetBytes(int64(len(buf)))
}

func benchDecodeReply(b *testing.B, op Op, body Record) {
	frame := AppendReply(nil, ReplyHeader{Xid: 7, Zxid: 1 << 33}, body)[FrameHeaderLen:]
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := DecodeReply(frame, op, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func benchEncodeReply(b *testing.B, body Record) {
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendReply(buf[:0], ReplyHeader{Xid: 7, Zxid: 1 << 33}, body)
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkDecodeGetDataRequest(b *testing.B)  { benchDecodeRequest(b, OpGetData, benchGetDataReq) }
func BenchmarkEncodeGetDataRequest(b *testing.B)  { benchEncodeRequest(b, OpGetData, benchGetDataReq) }
func BenchmarkDecodeGetDataResponse(b *testing.B) { benchDecodeReply(b, OpGetData, benchGetDataResp) }
func BenchmarkEncodeGetDataResponse(b *testing.B) { benchEncodeReply(b, benchGetDataResp) }
func BenchmarkDecodeCreateRequest(b *testing.B)   { benchDecodeRequest(b, OpCreate, benchCreateReq) }
func BenchmarkEncodeCreateRequest(b *testing.B)   { benchEncodeRequest(b, OpCreate, benchCreateReq) }
func BenchmarkDecodeExistsResponse(b *testing.B)  { benchDecodeReply(b, OpExists, benchExistsResp) }
func BenchmarkEncodeExistsResponse(b *testing.B)  { benchEncodeReply(b, benchExistsResp) }
func BenchmarkDecodeMulti10(b *testing.B)         { benchDecodeRequest(b, OpMulti, benchMulti10) }
func BenchmarkEncodeMulti10(b *testing.B)         { benchEncodeRequest(b, OpMulti, benchMulti10) }

// BenchmarkDecodeGetDataRequestReused decodes with a Decoder and record the caller keeps, the
// cheapest way to read a request.
func BenchmarkDecodeGetDataRequestReused(b *testing.B) {
	frame := AppendRequest(nil, RequestHeader{Xid: 7, Type: OpGetData}, benchGetDataReq)[FrameHeaderLen:]
	d := NewDecoder(nil, 0)
	var h RequestHeader
	var r GetDataRequest
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		d.Reset(frame)
		h.Decode(d)
		r.Decode(d)
		if err := d.Finish(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeGetDataResponseReused encodes a reply frame with an Encoder the caller keeps.
func BenchmarkEncodeGetDataResponseReused(b *testing.B) {
	e := NewEncoder(make([]byte, 0, 4096))
	h := ReplyHeader{Xid: 7, Zxid: 1 << 33}
	b.ReportAllocs()
	for b.Loop() {
		e.Reset()
		start := e.BeginFrame()
		h.Encode(e)
		benchGetDataResp.Encode(e)
		e.EndFrame(start)
	}
	b.SetBytes(int64(e.Len()))
}

// loopReader serves the same bytes forever.
type loopReader struct {
	data []byte
	off  int
}

func (l *loopReader) Read(p []byte) (int, error) {
	n := copy(p, l.data[l.off:])
	l.off = (l.off + n) % len(l.data)
	return n, nil
}

// BenchmarkFrameRead reads getData request frames through a FrameReader (with its bufio layer).
func BenchmarkFrameRead(b *testing.B) {
	var stream []byte
	for range 64 {
		stream = AppendRequest(stream, RequestHeader{Xid: 7, Type: OpGetData}, benchGetDataReq)
	}
	fr := NewFrameReader(&loopReader{data: stream}, 0)
	b.SetBytes(int64(len(stream) / 64))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := fr.Next(); err != nil {
			b.Fatal(err)
		}
	}
}
