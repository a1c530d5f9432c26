package server

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/zkd-io/zkd/internal/testkit/zktest"
	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/znode"
)

// childTree returns a view holding /dir with n children whose names vary in length (some longer
// than a stream chunk's share of them, one far longer than a chunk).
func childTree(t testing.TB, n int) *znode.View {
	t.Helper()
	tree := znode.New()
	zxid := int64(1)
	create := func(path string) {
		res := tree.Apply(zxid, &znode.Txn{Op: jute.OpCreate, Req: &jute.CreateRequest{
			Path: path, ACL: []jute.ACL{{Perms: jute.PermAll, ID: jute.Id{Scheme: "world", ID: "anyone"}}}}})
		if res.Err != nil {
			t.Fatalf("create %s: %v", path, res.Err)
		}
		zxid++
	}
	create("/dir")
	for i := range n {
		name := fmt.Sprintf("c-%0*d", 1+i%23, i)
		if i == n/2 {
			name += strings.Repeat("x", 3*streamChunk)
		}
		create("/dir/" + name)
	}
	return tree.View()
}

// wantFrame is the reply frame the eager encoding gives.
func wantFrame(t testing.TB, v *znode.View, h jute.ReplyHeader, two bool) []byte {
	t.Helper()
	var body jute.Record
	var err error
	if two {
		body, err = v.Read(0, nil, jute.OpGetChildren2, &jute.GetChildren2Request{Path: "/dir"})
	} else {
		body, err = v.Read(0, nil, jute.OpGetChildren, &jute.GetChildrenRequest{Path: "/dir"})
	}
	if err != nil {
		t.Fatal(err)
	}
	return jute.AppendFrame(nil, &h, body)
}

func childReply(t testing.TB, v *znode.View, two bool) *childrenReply {
	t.Helper()
	kids, stat, err := v.Children("/dir", nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &childrenReply{kids: kids}
	if two {
		r.stat = &stat
	}
	return r
}

// TestChildStreamMatchesEncoding drains streams in chunks of random sizes, with random partial
// writes of each chunk, and checks the bytes are the eager encoding's, for both reply kinds; and
// that the record's own Encode gives them too.
func TestChildStreamMatchesEncoding(t *testing.T) {
	v := childTree(t, 3000)
	h := jute.ReplyHeader{Xid: 7, Zxid: 3001}
	for _, two := range []bool{false, true} {
		want := wantFrame(t, v, h, two)
		r := childReply(t, v, two)
		if got := jute.AppendFrame(nil, &h, r); !bytes.Equal(got, want) {
			t.Fatalf("two=%v: Encode differs from the jute response's", two)
		}
		rng := rand.New(rand.NewPCG(1, uint64(len(want))))
		for round := range 20 {
			s := r.stream(&h)
			if s == nil || s.remaining() != len(want) {
				t.Fatalf("two=%v: stream = %v, want one of %d bytes", two, s, len(want))
			}
			var got []byte
			for s.remaining() > 0 {
				limit := 1 + rng.IntN(3*streamChunk)
				if round%4 == 0 {
					limit = streamChunk
				}
				chunk := s.next(nil, limit)
				if len(chunk) != min(limit, s.remaining()) {
					t.Fatalf("two=%v: next(%d) gave %d bytes with %d left", two, limit, len(chunk), s.remaining())
				}
				n := len(chunk)
				if round%2 == 1 {
					n = rng.IntN(len(chunk) + 1)
				}
				got = append(got, chunk[:n]...)
				s.advance(n)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("two=%v round %d: streamed %d bytes differ from the %d encoded", two, round, len(got), len(want))
			}
		}
	}
}

// TestShortChildListIsNotStreamed checks that a list under streamMinChildren is encoded at once.
func TestShortChildListIsNotStreamed(t *testing.T) {
	v := childTree(t, streamMinChildren-1)
	if s := childReply(t, v, false).stream(&jute.ReplyHeader{}); s != nil {
		t.Fatalf("a list of %d children streamed", streamMinChildren-1)
	}
}

// TestStreamedReplyHoldsNoBytes queues a long child list for a client that does not read and
// checks that the queue holds no encoded bytes for it (the server-wide budget is untouched) while
// it counts toward the slow-consumer limit; then that a reading client gets the exact frames, in
// order with the frames queued around the stream.
func TestStreamedReplyHoldsNoBytes(t *testing.T) {
	v := childTree(t, 20000)
	budget := newOutBudget(1 << 30)
	q := newOutQueue(32<<20, 4<<20, budget)
	server, client := zktest.TCPPair(t)
	q.setSink(server, 0, nil, nil)
	ended := make(chan error, 1)
	q.setWriter(func(f func()) { go f() }, func(err error) { ended <- err })

	before := jute.AppendFrame(nil, &jute.ReplyHeader{Xid: 1}, &jute.ExistsResponse{})
	h := jute.ReplyHeader{Xid: 2, Zxid: 9}
	want := wantFrame(t, v, h, true)
	after := jute.AppendFrame(nil, &jute.ReplyHeader{Xid: 3}, &jute.ExistsResponse{})
	if _, ok := q.pushReply(jute.ReplyHeader{Xid: 1}, &jute.ExistsResponse{}, nil); !ok {
		t.Fatal("push refused")
	}
	size, ok := q.pushReply(h, childReply(t, v, true), nil)
	if !ok || size != len(want) {
		t.Fatalf("pushReply = %d, %v; want %d, true", size, ok, len(want))
	}
	if _, ok := q.pushReply(jute.ReplyHeader{Xid: 3}, &jute.ExistsResponse{}, nil); !ok {
		t.Fatal("push refused")
	}
	if got, max := budget.queuedBytes(), int64(len(before)+len(after)); got > max {
		t.Fatalf("the budget holds %d bytes for a streamed reply; want at most the %d of the other frames", got, max)
	}
	if h := q.held.Load(); h < int64(len(want)) {
		t.Fatalf("held = %d; want the stream's %d counted", h, len(want))
	}
	q.writeInline()

	all := append(append(append([]byte{}, before...), want...), after...)
	got := make([]byte, len(all))
	if _, err := io.ReadFull(client, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, all) {
		t.Fatal("the client read other bytes than the frames queued")
	}
	q.close(nil, true)
	if err := <-ended; err != nil {
		t.Fatalf("queue ended with %v", err)
	}
	q.release()
	if got := budget.queuedBytes(); got != 0 {
		t.Fatalf("budget holds %d bytes after release", got)
	}
}

// TestStreamOverLimitIsASlowConsumer checks that a streamed reply larger than the queue's limit
// closes the connection as a slow consumer, as bytes would.
func TestStreamOverLimitIsASlowConsumer(t *testing.T) {
	v := childTree(t, 20000)
	q := newOutQueue(64<<10, 64<<10, nil)
	if _, ok := q.pushReply(jute.ReplyHeader{Xid: 2}, childReply(t, v, false), nil); ok {
		t.Fatal("a stream past the limit was accepted")
	}
	q.mu.Lock()
	err := q.mu.err
	q.mu.Unlock()
	if err != errSlowConsumer {
		t.Fatalf("err = %v; want errSlowConsumer", err)
	}
}

// BenchmarkLockListing streams the listing a woken lock contender reads: a directory of 10,000
// sequential nodes whose lowest was just deleted and a new one queued behind, as under a lock
// crowd, sized and encoded in stream chunks as the writer does (without the socket).
func BenchmarkLockListing(b *testing.B) {
	tree := znode.New()
	zxid := int64(1)
	apply := func(op jute.Op, req jute.Record) {
		if res := tree.Apply(zxid, &znode.Txn{Op: op, Req: req}); res.Err != nil {
			b.Fatalf("%v: %v", op, res.Err)
		}
		zxid++
	}
	open := []jute.ACL{{Perms: jute.PermAll, ID: jute.Id{Scheme: "world", ID: "anyone"}}}
	apply(jute.OpCreate, &jute.CreateRequest{Path: "/lock", ACL: open})
	const n = 10000
	name := func(i int) string { return fmt.Sprintf("/lock/lock-%010d", i) }
	// The lock's nodes are created among other nodes, as the contenders' sessions and the rest
	// of the tree are, so that they are spread through the heap.
	apply(jute.OpCreate, &jute.CreateRequest{Path: "/other", ACL: open})
	for i := range n {
		apply(jute.OpCreate, &jute.CreateRequest{Path: name(i), ACL: open})
		for j := range 20 {
			apply(jute.OpCreate, &jute.CreateRequest{Path: fmt.Sprintf("/other/%d-%d", i, j), ACL: open, Data: make([]byte, 100)})
		}
	}
	buf := make([]byte, 0, streamChunk)
	// Between listings the server serves 10,000 connections, which leave little of the list in
	// the caches: each iteration first reads 64 MB elsewhere.
	evict := make([]byte, 64<<20)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		for j := 0; j < len(evict); j += 64 {
			evict[j]++
		}
		b.StartTimer()
		apply(jute.OpDelete, &jute.DeleteRequest{Path: name(i), Version: -1})
		apply(jute.OpCreate, &jute.CreateRequest{Path: name(n + i), ACL: open})
		kids, _, err := tree.View().Children("/lock", nil)
		if err != nil {
			b.Fatal(err)
		}
		s := (&childrenReply{kids: kids}).stream(&jute.ReplyHeader{Xid: 1})
		for s.remaining() > 0 {
			chunk := s.next(buf[:0], streamChunk)
			s.advance(len(chunk))
		}
	}
}
