package raft

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

func binarySample() *AppendEntriesRequest {
	return &AppendEntriesRequest{
		RPCHeader:    RPCHeader{ProtocolVersion: ProtocolVersionMax, ID: []byte("n1"), Addr: []byte("127.0.0.1:7001")},
		Term:         9,
		PrevLogEntry: 1 << 40, PrevLogTerm: 8, LeaderCommitIndex: 300,
		Entries: []*Log{
			{Index: 1<<40 + 1, Term: 9, Type: LogCommand, Data: []byte("payload"), AppendedAt: time.Unix(1700000000, 123456789)},
			{Index: 1<<40 + 2, Term: 9, Type: LogNoop, Data: []byte{}, Extensions: []byte{1, 2}},
			{Index: 1<<40 + 3, Term: 9, Type: LogConfiguration, Data: bytes.Repeat([]byte{7}, 3<<20)},
		},
	}
}

// The binary encoding gives back every field as sent: nil and empty bytes apart, a zero
// AppendedAt zero, large values whole.
func TestZkdBinaryRoundTrip(t *testing.T) {
	for _, req := range []*AppendEntriesRequest{binarySample(), {Term: 1, RPCHeader: RPCHeader{Addr: []byte("a")}}} {
		var buf bytes.Buffer
		w := bufio.NewWriter(&buf)
		writeAppendEntriesBin(w, req)
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		var got AppendEntriesRequest
		if err := readAppendEntriesBin(bufio.NewReader(&buf), &got); err != nil {
			t.Fatal(err)
		}
		for _, l := range got.Entries {
			if !l.AppendedAt.IsZero() {
				l.AppendedAt = l.AppendedAt.In(time.Local)
			}
		}
		for _, l := range req.Entries {
			if !l.AppendedAt.IsZero() {
				l.AppendedAt = l.AppendedAt.In(time.Local)
			}
		}
		if !reflect.DeepEqual(&got, req) {
			t.Fatalf("read back %+v; want %+v", got, *req)
		}
	}
	for _, c := range []struct {
		err  string
		resp AppendEntriesResponse
	}{
		{"", AppendEntriesResponse{RPCHeader: RPCHeader{ID: []byte("n2")}, Term: 9, LastLog: 1 << 50, Success: true}},
		{"rpc failed", AppendEntriesResponse{Term: 10, NoRetryBackoff: true}},
	} {
		var buf bytes.Buffer
		w := bufio.NewWriter(&buf)
		if err := writeAppendEntriesRespBin(w, c.err, &c.resp); err != nil {
			t.Fatal(err)
		}
		w.Flush()
		var got AppendEntriesResponse
		e, err := readAppendEntriesRespBin(bufio.NewReader(&buf), &got)
		if err != nil || e != c.err || !reflect.DeepEqual(got, c.resp) {
			t.Fatalf("answer read back %+v, %q, %v; want %+v, %q", got, e, err, c.resp, c.err)
		}
	}
}

// A damaged stream is an error, never a panic or an allocation of what it merely declares:
// every truncation of a request fails, and so do absurd counts and lengths.
func TestZkdBinaryDamaged(t *testing.T) {
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	req := binarySample()
	req.Entries[2].Data = []byte("short")
	writeAppendEntriesBin(w, req)
	w.Flush()
	whole := buf.Bytes()
	for n := 0; n < len(whole); n++ {
		var got AppendEntriesRequest
		if err := readAppendEntriesBin(bufio.NewReader(bytes.NewReader(whole[:n])), &got); err == nil {
			t.Fatalf("a request cut to %d of %d bytes was read without error", n, len(whole))
		}
	}
	huge := func(fields ...uint64) []byte {
		var b []byte
		for _, f := range fields {
			b = binary.AppendUvarint(b, f)
		}
		return b
	}
	for name, stream := range map[string][]byte{
		// header: version, id declaring 2^40 bytes
		"field length": huge(3, 1<<40),
		// a field declaring 512 MiB with nothing behind it: read in pieces, fails at the end
		"unbacked length": huge(3, 512<<20),
		// header (version, nil id, nil addr), term, nil leader, prev, prevTerm, commit, count
		"entry count": huge(3, 0, 0, 1, 0, 1, 1, 1, 1<<40),
	} {
		var got AppendEntriesRequest
		if err := readAppendEntriesBin(bufio.NewReader(bytes.NewReader(stream)), &got); err == nil {
			t.Fatalf("%s: a damaged request was read without error", name)
		}
	}
}

// An older transport skips the field that offers the binary encoding: a msgpack answer that
// carries it decodes into the answer type without it.
func TestZkdBinaryOfferSkippedByOldDecoder(t *testing.T) {
	type oldResponse struct {
		RPCHeader
		Term           uint64
		LastLog        uint64
		Success        bool
		NoRetryBackoff bool
	}
	var buf bytes.Buffer
	resp := AppendEntriesResponse{Term: 4, LastLog: 12, Success: true, BinaryAppendEntries: true}
	if err := codec.NewEncoder(&buf, &codec.MsgpackHandle{}).Encode(&resp); err != nil {
		t.Fatal(err)
	}
	var old oldResponse
	if err := codec.NewDecoder(&buf, &codec.MsgpackHandle{}).Decode(&old); err != nil {
		t.Fatalf("an answer offering the binary encoding does not decode as before: %v", err)
	}
	if old.Term != 4 || old.LastLog != 12 || !old.Success {
		t.Fatalf("decoded %+v", old)
	}
}

// serveAppendEntries answers every AppendEntries the transport receives, echoing what it got.
func serveAppendEntries(t *testing.T, trans *NetworkTransport, got chan<- *AppendEntriesRequest) {
	t.Helper()
	go func() {
		for rpc := range trans.Consumer() {
			req, ok := rpc.Command.(*AppendEntriesRequest)
			if !ok {
				rpc.Respond(nil, ErrUnsupportedProtocol)
				continue
			}
			got <- req
			rpc.Respond(&AppendEntriesResponse{Term: req.Term, LastLog: req.PrevLogEntry + uint64(len(req.Entries)), Success: true}, nil)
		}
	}()
}

// Between two transports of this fork the first AppendEntries goes in msgpack, its answer offers
// the binary encoding, and the next ones go binary; what the follower reads is the same either way.
func TestZkdBinaryNegotiated(t *testing.T) {
	leader, err := NewTCPTransportWithLogger("127.0.0.1:0", nil, 2, time.Second, newTestLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer leader.Close()
	follower, err := NewTCPTransportWithLogger("127.0.0.1:0", nil, 2, time.Second, newTestLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer follower.Close()
	got := make(chan *AppendEntriesRequest, 4)
	serveAppendEntries(t, follower, got)
	target := follower.LocalAddr()
	for i, wantBinary := range []bool{false, true, true} {
		if _, binary := leader.binaryPeers.Load(target); binary != wantBinary {
			t.Fatalf("AppendEntries %d: binary %v; want %v", i, binary, wantBinary)
		}
		req := binarySample()
		req.Entries[2].Data = []byte("small")
		var resp AppendEntriesResponse
		if err := leader.AppendEntries("f", target, req, &resp); err != nil {
			t.Fatal(err)
		}
		if !resp.Success || resp.LastLog != req.PrevLogEntry+3 {
			t.Fatalf("AppendEntries %d: answer %+v", i, resp)
		}
		r := <-got
		if len(r.Entries) != 3 || string(r.Entries[0].Data) != "payload" || r.Entries[1].Data == nil ||
			r.Entries[2].Type != LogConfiguration || !r.Entries[0].AppendedAt.Equal(req.Entries[0].AppendedAt) {
			t.Fatalf("AppendEntries %d: the follower read %+v", i, r)
		}
	}
}

// oldPeer is a peer port that speaks msgpack only, as a transport before this fork's binary
// encoding does: it answers AppendEntries without offering anything, and closes a connection on
// an RPC type it does not know. It counts the binary requests it refused.
type oldPeer struct {
	ln      net.Listener
	refused atomic.Int32
}

func startOldPeer(t *testing.T, addr string) *oldPeer {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	p := &oldPeer{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return p
}

func (p *oldPeer) serve(c net.Conn) {
	defer c.Close()
	r, w := bufio.NewReader(c), bufio.NewWriter(c)
	dec, enc := codec.NewDecoder(r, &codec.MsgpackHandle{}), codec.NewEncoder(w, &codec.MsgpackHandle{})
	for {
		typ, err := r.ReadByte()
		if err != nil {
			return
		}
		if typ != rpcAppendEntries {
			p.refused.Add(1)
			return // "unknown rpc type"
		}
		var req AppendEntriesRequest
		if err := dec.Decode(&req); err != nil {
			return
		}
		// An older AppendEntriesResponse: without the offer.
		resp := struct {
			RPCHeader
			Term    uint64
			LastLog uint64
			Success bool
		}{Term: req.Term, LastLog: req.PrevLogEntry + uint64(len(req.Entries)), Success: true}
		if enc.Encode("") != nil || enc.Encode(&resp) != nil || w.Flush() != nil {
			return
		}
	}
}

// A peer that never offered the binary encoding only ever gets msgpack; a peer that offered it
// and was then replaced by an older version at the same address fails one binary request and
// gets msgpack from the next on.
func TestZkdBinaryOldPeers(t *testing.T) {
	leader, err := NewTCPTransportWithLogger("127.0.0.1:0", nil, 2, time.Second, newTestLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer leader.Close()
	send := func(target ServerAddress) error {
		var resp AppendEntriesResponse
		err := leader.AppendEntries("f", target, &AppendEntriesRequest{Term: 2, PrevLogEntry: 5, Entries: []*Log{{Index: 6, Term: 2, Data: []byte("x")}}}, &resp)
		if err == nil && (!resp.Success || resp.LastLog != 6) {
			return errors.New("bad answer")
		}
		return err
	}

	old := startOldPeer(t, "127.0.0.1:0")
	target := ServerAddress(old.ln.Addr().String())
	for i := 0; i < 3; i++ {
		if err := send(target); err != nil {
			t.Fatalf("AppendEntries %d to an old peer: %v", i, err)
		}
	}
	if n := old.refused.Load(); n != 0 {
		t.Fatalf("an old peer was sent %d binary requests", n)
	}

	// A new peer, which offers the binary encoding, then an old one in its place.
	follower, err := NewTCPTransportWithLogger("127.0.0.1:0", nil, 2, time.Second, newTestLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *AppendEntriesRequest, 4)
	serveAppendEntries(t, follower, got)
	target = follower.LocalAddr()
	for i := 0; i < 2; i++ {
		if err := send(target); err != nil {
			t.Fatal(err)
		}
		<-got
	}
	if _, binary := leader.binaryPeers.Load(target); !binary {
		t.Fatal("the new peer's offer was not taken")
	}
	// The new peer goes, with its connections (as its process would), and an old one takes its
	// address.
	follower.Close()
	leader.connPoolLock.Lock()
	for _, c := range leader.connPool[target] {
		c.Release()
	}
	delete(leader.connPool, target)
	leader.connPoolLock.Unlock()
	old = startOldPeer(t, string(target))
	err = send(target)
	if err == nil {
		t.Fatal("a binary request to an old peer succeeded")
	}
	if err := send(target); err != nil {
		t.Fatalf("after the failed binary request, msgpack to the old peer: %v", err)
	}
	if n := old.refused.Load(); n != 1 {
		t.Fatalf("the old peer refused %d binary requests; want exactly the first", n)
	}
}

// Whatever a peer sends, reading it as a binary AppendEntries (or an answer to one) is an error
// or a value that, written again, reads back the same.
func FuzzAppendEntriesBinary(f *testing.F) {
	for _, req := range []*AppendEntriesRequest{
		{Term: 1},
		{RPCHeader: RPCHeader{ID: []byte("n1"), Addr: []byte("a:1")}, Term: 3, PrevLogEntry: 9, PrevLogTerm: 2, LeaderCommitIndex: 9,
			Entries: []*Log{{Index: 10, Term: 3, Data: []byte("x"), AppendedAt: time.Unix(5, 6)}, {Index: 11, Term: 3, Data: []byte{}, Extensions: []byte{1}}}},
	} {
		var buf bytes.Buffer
		w := bufio.NewWriter(&buf)
		writeAppendEntriesBin(w, req)
		w.Flush()
		f.Add(buf.Bytes(), false)
		buf.Reset()
		writeAppendEntriesRespBin(w, "no", &AppendEntriesResponse{Term: req.Term, LastLog: 4, Success: true})
		w.Flush()
		f.Add(buf.Bytes(), true)
	}
	f.Fuzz(func(t *testing.T, b []byte, answer bool) {
		var buf bytes.Buffer
		w := bufio.NewWriter(&buf)
		if answer {
			var resp, again AppendEntriesResponse
			e, err := readAppendEntriesRespBin(bufio.NewReader(bytes.NewReader(b)), &resp)
			if err != nil {
				return
			}
			writeAppendEntriesRespBin(w, e, &resp)
			w.Flush()
			e2, err := readAppendEntriesRespBin(bufio.NewReader(&buf), &again)
			if err != nil || e2 != e || !reflect.DeepEqual(resp, again) {
				t.Fatalf("answer %+v %q read back as %+v %q, %v", resp, e, again, e2, err)
			}
			return
		}
		var req, again AppendEntriesRequest
		if err := readAppendEntriesBin(bufio.NewReader(bytes.NewReader(b)), &req); err != nil {
			return
		}
		writeAppendEntriesBin(w, &req)
		w.Flush()
		if err := readAppendEntriesBin(bufio.NewReader(&buf), &again); err != nil {
			t.Fatalf("request %+v did not read back: %v", req, err)
		}
		if !reflect.DeepEqual(req, again) {
			t.Fatalf("request %+v read back as %+v", req, again)
		}
	})
}
