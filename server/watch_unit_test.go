package server

import (
	"net"
	"slices"
	"strconv"
	"testing"

	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/znode"
)

var anyoneRead = []jute.ACL{{Perms: jute.PermAll, ID: jute.Id{Scheme: "world", ID: "anyone"}}}

// fakeConn is a connection with an output queue and identities, and nothing behind it.
func fakeConn(sid int64, limit int, ids ...jute.Id) *conn {
	nc, _ := net.Pipe()
	c := &conn{out: newOutQueue(limit, limit, nil), stopped: make(chan struct{}), nc: nc, raw: nc}
	c.sid.Store(sid)
	if ids == nil {
		ids = []jute.Id{{Scheme: "ip", ID: "127.0.0.1"}}
	}
	c.auth.Store(&ids)
	return c
}

// queued decodes the notifications queued on c as "Type path@zxid" strings and empties the queue.
func queued(t *testing.T, c *conn) []string {
	t.Helper()
	c.out.mu.Lock()
	buf := c.out.mu.buf
	c.out.mu.buf = nil
	c.out.mu.Unlock()
	var out []string
	for len(buf) > 0 {
		d := jute.NewDecoder(buf[4:], len(buf))
		var h jute.ReplyHeader
		var ev jute.WatcherEvent
		h.Decode(d)
		ev.Decode(d)
		if d.Err() != nil || h.Xid != jute.XidNotification {
			t.Fatalf("queued frame %+v: %v", h, d.Err())
		}
		out = append(out, ev.Type.String()+" "+ev.Path+"@"+strconv.FormatInt(h.Zxid, 10))
		buf = buf[len(buf)-d.Len():]
	}
	return out
}

func ev(typ jute.EventType, path string) znode.Event {
	return znode.Event{Type: typ, Path: path, ACL: anyoneRead}
}

// One-shot watches fire once, for the kinds of change they watch, and are gone afterwards; a
// delete fires data and child watches alike.
func TestWatchOneShot(t *testing.T) {
	w := newWatchManager(0)
	a, b := fakeConn(1, 1<<20), fakeConn(2, 1<<20)
	w.add(a, "/n", watchData)
	w.add(b, "/n", watchChild)
	w.fire(5, []znode.Event{ev(jute.EventNodeDataChanged, "/n")})
	if got := queued(t, a); !slices.Equal(got, []string{"NodeDataChanged /n@5"}) {
		t.Fatalf("data watch got %v", got)
	}
	if got := queued(t, b); len(got) != 0 {
		t.Fatalf("child watch fired on a data change: %v", got)
	}
	w.fire(6, []znode.Event{ev(jute.EventNodeDataChanged, "/n"), ev(jute.EventNodeChildrenChanged, "/n")})
	if got := queued(t, a); len(got) != 0 {
		t.Fatalf("a fired one-shot watch fired again: %v", got)
	}
	if got := queued(t, b); !slices.Equal(got, []string{"NodeChildrenChanged /n@6"}) {
		t.Fatalf("child watch got %v", got)
	}
	w.add(a, "/n", watchData)
	w.add(b, "/n", watchChild)
	w.fire(7, []znode.Event{ev(jute.EventNodeDeleted, "/n")})
	if got := append(queued(t, a), queued(t, b)...); !slices.Equal(got, []string{"NodeDeleted /n@7", "NodeDeleted /n@7"}) {
		t.Fatalf("delete fired %v", got)
	}
	if s := w.summary(); s.Total != 0 || s.Paths != 0 || s.Connections != 0 {
		t.Fatalf("watches left after they fired: %+v", s)
	}
}

// Persistent watches stay; recursive ones fire for the whole subtree but not for child-list
// changes; a connection gets one event per change however many of its watches match.
func TestWatchPersistentAndRecursive(t *testing.T) {
	w := newWatchManager(0)
	p, r := fakeConn(1, 1<<20), fakeConn(2, 1<<20)
	w.add(p, "/a", watchPersistent)
	w.add(r, "/a", watchRecursive|watchData)
	for i := range 3 {
		w.fire(int64(10+i), []znode.Event{ev(jute.EventNodeDataChanged, "/a")})
	}
	if got := queued(t, p); len(got) != 3 {
		t.Fatalf("persistent watch fired %v; want 3 events", got)
	}
	if got := queued(t, r); !slices.Equal(got, []string{"NodeDataChanged /a@10", "NodeDataChanged /a@11", "NodeDataChanged /a@12"}) {
		t.Fatalf("recursive + data watch fired %v; want one event per change", got)
	}
	w.fire(20, []znode.Event{ev(jute.EventNodeCreated, "/a/b/c"), ev(jute.EventNodeChildrenChanged, "/a/b")})
	if got := queued(t, r); !slices.Equal(got, []string{"NodeCreated /a/b/c@20"}) {
		t.Fatalf("recursive watch got %v", got)
	}
	if got := queued(t, p); len(got) != 0 {
		t.Fatalf("persistent watch on /a fired for a descendant: %v", got)
	}
	if !w.remove(r, "/a", watchRecursive, true) || !w.remove(r, "/a", watchRecursive, false) || w.remove(r, "/a", watchRecursive, true) {
		t.Fatal("checkWatches/removeWatches of the recursive watch misreported")
	}
	w.fire(21, []znode.Event{ev(jute.EventNodeCreated, "/a/x")})
	if got := queued(t, r); len(got) != 0 {
		t.Fatalf("removed recursive watch fired %v", got)
	}
	// Recursive watches on two ancestors: still one event, for each of two changes in a row.
	q := fakeConn(3, 1<<20)
	w.add(q, "/", watchRecursive)
	w.add(q, "/a", watchRecursive)
	w.fire(22, []znode.Event{ev(jute.EventNodeDataChanged, "/a/x"), ev(jute.EventNodeDeleted, "/a/x")})
	if got := queued(t, q); !slices.Equal(got, []string{"NodeDataChanged /a/x@22", "NodeDeleted /a/x@22"}) {
		t.Fatalf("recursive watches on / and /a fired %v; want one event per change", got)
	}
}

// A connection without READ on the node does not get its event; the watch is used up anyway,
// as in ZooKeeper.
func TestWatchEventNeedsRead(t *testing.T) {
	w := newWatchManager(0)
	digest := jute.Id{Scheme: "digest", ID: "u:x"}
	owner, other := fakeConn(1, 1<<20, digest), fakeConn(2, 1<<20)
	w.add(owner, "/s", watchData)
	w.add(other, "/s", watchData)
	secret := []jute.ACL{{Perms: jute.PermRead, ID: digest}}
	w.fire(3, []znode.Event{{Type: jute.EventNodeDataChanged, Path: "/s", ACL: secret}})
	if got := queued(t, owner); len(got) != 1 {
		t.Fatalf("reader got %v", got)
	}
	if got := queued(t, other); len(got) != 0 {
		t.Fatalf("a connection without READ got %v", got)
	}
}

// A registration made from a view older than the newest applied transaction is refused, so the
// read is done again and its watch cannot miss that transaction's change.
func TestWatchRegistrationNeedsNewestView(t *testing.T) {
	w := newWatchManager(0)
	c := fakeConn(1, 1<<20)
	w.advance(9)
	ran := false
	if w.registerAll(c, 8, func(add func(string, watchMode)) { ran = true }) || ran {
		t.Fatal("registration from a stale view went ahead")
	}
	if !w.registerAll(c, 9, func(add func(string, watchMode)) { add("/n", watchData) }) {
		t.Fatal("registration from the newest view refused")
	}
	if s := w.summary(); s.Total != 1 {
		t.Fatalf("summary %+v; want one watch", s)
	}
	w.removeConn(c)
	if s := w.summary(); s.Total != 0 || s.Connections != 0 {
		t.Fatalf("watches left after the connection closed: %+v", s)
	}
}

// Delivery never blocks on a client that does not read: its queue overflows and the connection is
// closed, while the other watchers still get their events.
func TestWatchSlowConsumerClosed(t *testing.T) {
	w := newWatchManager(0)
	slow, ok := fakeConn(1, 100), fakeConn(2, 1<<20)
	w.add(slow, "/n", watchPersistent)
	w.add(ok, "/n", watchPersistent)
	for i := range 20 {
		w.fire(int64(i+1), []znode.Event{ev(jute.EventNodeDataChanged, "/n")})
	}
	if !slow.isClosed() {
		t.Fatal("a connection past its output limit is still open")
	}
	if got := queued(t, ok); len(got) != 20 {
		t.Fatalf("the reading watcher got %d events; want 20", len(got))
	}
}

// benchFire measures fire of events at n fake connections; setup registers a connection's
// watches once, rearm before every fire (one-shot watches are used up).
func benchFire(b *testing.B, events []znode.Event, setup, rearm func(w *watchManager, c *conn)) {
	for _, n := range []int{64, 4096} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			w := newWatchManager(0)
			conns := make([]*conn, n)
			for i := range conns {
				conns[i] = fakeConn(int64(i+1), 1<<30)
				setup(w, conns[i])
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				for _, c := range conns {
					rearm(w, c)
					c.out.mu.Lock()
					c.out.mu.buf = c.out.mu.buf[:0]
					c.out.mu.Unlock()
				}
				b.StartTimer()
				w.fire(int64(i+1), events)
			}
		})
	}
}

// BenchmarkWatchFanOut fires one data change at n connections that each watch the node, as a
// configuration node read by every client of a large deployment is.
func BenchmarkWatchFanOut(b *testing.B) {
	benchFire(b, []znode.Event{ev(jute.EventNodeDataChanged, "/cfg")},
		func(*watchManager, *conn) {},
		func(w *watchManager, c *conn) { w.add(c, "/cfg", watchData) })
}

// BenchmarkWatchFanOutRecursive fires one change under a tree that n connections watch with
// persistent recursive watches on its root and on the changed node's parent, as caches of the
// same tree (Curator's CuratorCache) do.
func BenchmarkWatchFanOutRecursive(b *testing.B) {
	benchFire(b, []znode.Event{ev(jute.EventNodeDataChanged, "/app/cfg")},
		func(w *watchManager, c *conn) {
			w.add(c, "/", watchRecursive)
			w.add(c, "/app", watchRecursive)
		},
		func(*watchManager, *conn) {})
}

// TestWatchersMatchAMap runs a random sequence of watch changes on one node's watchers (one
// watcher inline, a map from the second on) and on a plain map, and checks that they agree.
func TestWatchersMatchAMap(t *testing.T) {
	conns := []*conn{fakeConn(1, 1<<20), fakeConn(2, 1<<20), fakeConn(3, 1<<20)}
	var n wnode
	want := map[*conn]watchMode{}
	seed := uint64(1)
	for step := range 2000 {
		seed = seed*6364136223846793005 + 1442695040888963407
		c := conns[(seed>>33)%uint64(len(conns))]
		mode := watchMode((seed >> 40) % 16) // zero removes
		n.set(c, mode)
		if mode == 0 {
			delete(want, c)
		} else {
			want[c] = mode
		}
		if n.watchers() != len(want) {
			t.Fatalf("step %d: %d watchers, want %d", step, n.watchers(), len(want))
		}
		got := map[*conn]watchMode{}
		for c, m := range n.all() {
			got[c] = m
		}
		for _, c := range conns {
			if n.get(c) != want[c] || got[c] != want[c] {
				t.Fatalf("step %d: conn %d has %b (iterated %b), want %b", step, c.session(), n.get(c), got[c], want[c])
			}
		}
	}
}
