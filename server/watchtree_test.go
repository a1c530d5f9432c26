package server

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/znode"
)

// checkTree fails t unless w's tree, connection sets and counts are consistent: every node but
// the roots is its parent's child under its first segment and has a watcher or two children,
// every watcher's connection set holds the node and the other way round, and the counts are
// those of the watches.
func checkTree(t *testing.T, w *watchManager) {
	t.Helper()
	paths, total, recursive := 0, 0, 0
	seen := map[*wnode]bool{}
	w.walkAllLocked(func(n *wnode) {
		seen[n] = true
		if n.ext != nil && n.ext.kids.len() == 0 && n.ext.more == nil {
			t.Fatalf("node %q keeps an empty ext", w.pathOf(n))
		}
		if n.ext != nil {
			checkSet(t, &n.ext.kids, w.byName)
			for k := range n.ext.kids.all() {
				if k.parent != n {
					t.Fatalf("node %q: child %q has another parent", w.pathOf(n), k.name)
				}
				if w.kidLocked(n, firstSegment(k.name)) != k {
					t.Fatalf("node %q: child %q is not found by its first segment", w.pathOf(n), k.name)
				}
			}
		}
		if n.parent != nil && n.watchers() == 0 && n.kidCount() < 2 {
			t.Fatalf("node %q has no watcher and %d children", w.pathOf(n), n.kidCount())
		}
		if n.watchers() > 0 {
			paths++
		}
		for c, m := range n.all() {
			if m == 0 {
				t.Fatalf("node %q holds connection %d with no mode", w.pathOf(n), c.session())
			}
			total += watchCount(m)
			if m&watchRecursive != 0 {
				recursive++
			}
			pc := w.mu.byConn[c]
			if pc == nil || pc.find(w.byNode(n), func(k *wnode) bool { return k == n }) == nil {
				t.Fatalf("connection %d watches %q, which its set does not hold", c.session(), w.pathOf(n))
			}
		}
	})
	for c, pc := range w.mu.byConn {
		checkSet(t, pc, w.byNode)
		for n := range pc.all() {
			if !seen[n] || n.get(c) == 0 {
				t.Fatalf("connection %d's set holds %q, which it does not watch in the tree", c.session(), w.pathOf(n))
			}
		}
	}
	if paths != w.mu.paths || total != w.mu.total || recursive != w.mu.recursive {
		t.Fatalf("counts paths %d total %d recursive %d; the tree has %d, %d, %d",
			w.mu.paths, w.mu.total, w.mu.recursive, paths, total, recursive)
	}
}

// walkAllLocked calls visit for every node of both roots' trees, watched or not.
func (w *watchManager) walkAllLocked(visit func(*wnode)) {
	stack := []*wnode{&w.mu.root, &w.mu.rel}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		visit(n)
		if n.ext != nil {
			stack = slices.AppendSeq(stack, n.ext.kids.all())
		}
	}
}

// nodeCount is the number of nodes below the roots.
func nodeCount(w *watchManager) int {
	n := -2
	w.walkAllLocked(func(*wnode) { n++ })
	return n
}

// Paths that share a prefix share its nodes; a node holds only its own segments, in a string
// of its own, not a slice of the path the client sent.
func TestWatchTreeSharesPrefixes(t *testing.T) {
	w := newWatchManager(0)
	c := fakeConn(1, 1<<20)
	table := "/clickhouse/db/events"
	var sent []string
	for _, leaf := range []string{"/log-1", "/log-2", "/blocks/b1", "/blocks/b2"} {
		p := strings.Clone(table + leaf) // a fresh string, as a decoded request's path
		sent = append(sent, p)
		w.add(c, p, watchData)
	}
	checkTree(t, w)
	// /clickhouse/db/events, then log-1, log-2 and blocks, then b1 and b2.
	if n := nodeCount(w); n != 6 {
		t.Errorf("%d nodes for four paths under one table; want 6", n)
	}
	names := map[string]bool{}
	w.walkAllLocked(func(n *wnode) {
		names[n.name] = true
		for _, p := range sent {
			start := uintptr(unsafe.Pointer(unsafe.StringData(p)))
			if at := uintptr(unsafe.Pointer(unsafe.StringData(n.name))); len(n.name) > 0 && at >= start && at < start+uintptr(len(p)) {
				t.Errorf("node %q is a slice of the registered path %q: it keeps the path alive", n.name, p)
			}
		}
	})
	for _, name := range []string{"clickhouse/db/events", "log-1", "log-2", "blocks", "b1", "b2"} {
		if !names[name] {
			t.Errorf("no node named %q; have %v", name, slices.Sorted(maps.Keys(names)))
		}
	}
	got := w.bySession()[1]
	want := []string{table + "/blocks/b1", table + "/blocks/b2", table + "/log-1", table + "/log-2"}
	if !slices.Equal(got, want) {
		t.Errorf("bySession = %v; want %v", got, want)
	}
}

// A path that ends inside a node's name splits it, and a node left with no watcher and one child
// is merged back into it; the tree is as small again once the watches are gone.
func TestWatchTreeSplitAndMerge(t *testing.T) {
	w := newWatchManager(0)
	a, b := fakeConn(1, 1<<20), fakeConn(2, 1<<20)
	w.add(a, "/a/b/c/d", watchData)
	if n := nodeCount(w); n != 1 {
		t.Fatalf("%d nodes for one path; want 1", n)
	}
	w.add(b, "/a/b", watchPersistent) // splits a/b/c/d into a/b and c/d
	w.add(b, "/a/x/y", watchData)     // splits a/b into a and b
	checkTree(t, w)
	if n := nodeCount(w); n != 4 {
		t.Fatalf("%d nodes; want 4 (a, b, c/d, x/y)", n)
	}
	w.fire(2, []znode.Event{ev(jute.EventNodeDataChanged, "/a/b/c"), ev(jute.EventNodeDataChanged, "/a/b")})
	if got := queued(t, a); len(got) != 0 {
		t.Errorf("the watch on /a/b/c/d fired for %v", got)
	}
	if got := queued(t, b); !slices.Equal(got, []string{"NodeDataChanged /a/b@2"}) {
		t.Errorf("the watch on /a/b fired %v", got)
	}
	if !w.remove(b, "/a/x/y", watchData, false) {
		t.Fatal("removeWatches of /a/x/y found nothing")
	}
	w.removeConn(b)
	checkTree(t, w)
	if n := nodeCount(w); n != 1 {
		t.Errorf("%d nodes once only /a/b/c/d is watched; want 1", n)
	}
	w.fire(3, []znode.Event{ev(jute.EventNodeDataChanged, "/a/b/c/d")})
	if got := queued(t, a); !slices.Equal(got, []string{"NodeDataChanged /a/b/c/d@3"}) {
		t.Errorf("the watch on /a/b/c/d fired %v", got)
	}
	checkTree(t, w)
	if n := nodeCount(w); n != 0 || w.mu.root.ext != nil {
		t.Errorf("%d nodes left after the last watch fired; want none", n)
	}
}

// Recursive watches fire for the path and its descendants only, wherever the tree's nodes
// begin and end.
func TestWatchTreeRecursiveAncestors(t *testing.T) {
	w := newWatchManager(0)
	r, o := fakeConn(1, 1<<20), fakeConn(2, 1<<20)
	w.add(r, "/a/bc", watchRecursive)
	w.add(o, "/a/bc/d/e/f", watchData) // the node d/e/f under a/bc
	for _, p := range []string{"/a", "/a/b", "/a/bcd", "/a/bc/d/e/f", "/a/bc", "/a/bc/d/e", "/a/bc/x", "/a/bc/d/e/f/g"} {
		w.fire(1, []znode.Event{ev(jute.EventNodeDataChanged, p)})
	}
	w.fire(2, []znode.Event{ev(jute.EventNodeChildrenChanged, "/a/bc")})
	want := []string{"NodeDataChanged /a/bc/d/e/f@1", "NodeDataChanged /a/bc@1", "NodeDataChanged /a/bc/d/e@1",
		"NodeDataChanged /a/bc/x@1", "NodeDataChanged /a/bc/d/e/f/g@1"}
	if got := queued(t, r); !slices.Equal(got, want) {
		t.Errorf("recursive watch on /a/bc fired %v; want %v", got, want)
	}
	if got := queued(t, o); !slices.Equal(got, []string{"NodeDataChanged /a/bc/d/e/f@1"}) {
		t.Errorf("data watch on /a/bc/d/e/f fired %v", got)
	}
	w.add(r, "/", watchRecursive)
	w.fire(3, []znode.Event{ev(jute.EventNodeDeleted, "/q"), ev(jute.EventNodeCreated, "/a/bc/z")})
	if got := queued(t, r); !slices.Equal(got, []string{"NodeDeleted /q@3", "NodeCreated /a/bc/z@3"}) {
		t.Errorf("recursive watches on / and /a/bc fired %v; want one event per change", got)
	}
	checkTree(t, w)
}

// Any string is a watch path, as in ZooKeeper's tables: each is listed as sent and removed by
// itself, and none but a real path's matches an event.
func TestWatchTreeOddPaths(t *testing.T) {
	odd := []string{"", "a", "a/b", "a/", "/a/", "//", "/a//b", "//a", "/a", "/", "a//", "/a/b/"}
	w := newWatchManager(0)
	c := fakeConn(1, 1<<20)
	for _, p := range odd {
		w.add(c, p, watchData|watchRecursive)
	}
	checkTree(t, w)
	if got, want := w.bySession()[1], slices.Sorted(slices.Values(odd)); !slices.Equal(got, want) {
		t.Fatalf("bySession = %q; want %q", got, want)
	}
	if got := slices.Sorted(maps.Keys(w.byPath())); !slices.Equal(got, slices.Sorted(slices.Values(odd))) {
		t.Fatalf("byPath's paths = %q; want %q", got, odd)
	}
	// "/a/b" reaches the data watch on /a and the recursive ones on /a and /.
	w.fire(1, []znode.Event{ev(jute.EventNodeDataChanged, "/a/b")})
	if got := queued(t, c); !slices.Equal(got, []string{"NodeDataChanged /a/b@1"}) {
		t.Errorf("fired %v", got)
	}
	for _, p := range odd {
		if !w.remove(c, p, watchData|watchRecursive, false) {
			t.Errorf("removeWatches of %q found nothing", p)
		}
		checkTree(t, w)
	}
	if s := w.summary(); s != (watchSummary{}) || nodeCount(w) != 0 {
		t.Errorf("summary %+v and %d nodes after every watch was removed", s, nodeCount(w))
	}
}

// A closed connection's watches all go, and no other's; a connection closed before it registers
// registers nothing.
func TestWatchRemoveConn(t *testing.T) {
	w := newWatchManager(0)
	a, b := fakeConn(1, 1<<20), fakeConn(2, 1<<20)
	for i := range 300 {
		p := chLeaf(i)
		w.add(a, p, watchData)
		if i%2 == 0 {
			w.add(b, p, watchChild)
		}
	}
	w.removeConn(a)
	checkTree(t, w)
	if s := w.summary(); s != (watchSummary{Connections: 1, Paths: 150, Total: 150}) {
		t.Errorf("summary after a's close %+v; want b's 150 watches", s)
	}
	a.closed.Store(true)
	w.add(a, "/late", watchData)
	w.removeConn(b)
	if s := w.summary(); s != (watchSummary{}) || nodeCount(w) != 0 {
		t.Errorf("summary %+v and %d nodes after both closed", s, nodeCount(w))
	}
}

// watchModel is the watch table as it was before the tree, a map of full paths, run beside the
// tree by TestWatchTableMatchesModel.
type watchModel map[string]map[*conn]watchMode

func (m watchModel) set(c *conn, p string, mode watchMode) {
	if mode == 0 {
		delete(m[p], c)
		if len(m[p]) == 0 {
			delete(m, p)
		}
		return
	}
	if m[p] == nil {
		m[p] = map[*conn]watchMode{}
	}
	m[p][c] = mode
}

// fire returns the events each connection gets, and uses up one-shot watches.
func (m watchModel) fire(zxid int64, events []znode.Event) map[*conn][]string {
	out := map[*conn][]string{}
	for _, e := range events {
		var match, oneShot watchMode
		switch e.Type {
		case jute.EventNodeCreated, jute.EventNodeDataChanged:
			match, oneShot = watchData|watchPersistent, watchData
		case jute.EventNodeDeleted:
			match, oneShot = watchData|watchChild|watchPersistent, watchData|watchChild
		case jute.EventNodeChildrenChanged:
			match, oneShot = watchChild|watchPersistent, watchChild
		}
		hit := map[*conn]bool{}
		for c, mode := range m[e.Path] {
			if mode&match != 0 {
				hit[c] = true
				m.set(c, e.Path, mode&^oneShot)
			}
		}
		if e.Type != jute.EventNodeChildrenChanged {
			for p := e.Path; ; {
				for c, mode := range m[p] {
					if mode&watchRecursive != 0 {
						hit[c] = true
					}
				}
				if p == "/" {
					break
				}
				if i := strings.LastIndexByte(p, '/'); i > 0 {
					p = p[:i]
				} else {
					p = "/"
				}
			}
		}
		for c := range hit {
			out[c] = append(out[c], fmt.Sprintf("%s %s@%d", e.Type, e.Path, zxid))
		}
	}
	return out
}

// TestWatchTableMatchesModel runs random registrations, removals, events and closes on the watch
// table and on a map of full paths, over paths that split and merge the tree's nodes (and odd
// ones), and checks that both deliver the same events and list the same watches.
func TestWatchTableMatchesModel(t *testing.T) {
	var real []string // event paths: every path of up to four of these segments
	var grow func(prefix string, depth int)
	grow = func(prefix string, depth int) {
		for _, s := range []string{"a", "b", "ab"} {
			real = append(real, prefix+"/"+s)
			if depth < 4 {
				grow(prefix+"/"+s, depth+1)
			}
		}
	}
	grow("", 1)
	real = append(real, "/")
	paths := append(slices.Clone(real), "", "a", "a/b", "/a/", "//", "/a//b", "//a")
	modes := []watchMode{watchData, watchChild, watchPersistent, watchRecursive}
	types := []jute.EventType{jute.EventNodeCreated, jute.EventNodeDeleted, jute.EventNodeDataChanged, jute.EventNodeChildrenChanged}
	w := newWatchManager(0)
	model := watchModel{}
	conns := []*conn{fakeConn(1, 1<<30), fakeConn(2, 1<<30), fakeConn(3, 1<<30)}
	nextSid := int64(4)
	seed := uint64(42)
	rnd := func(n int) int {
		seed = seed*6364136223846793005 + 1442695040888963407
		return int((seed >> 33) % uint64(n))
	}
	for step := range 4000 {
		c := conns[rnd(len(conns))]
		switch op := rnd(100); {
		case op < 50:
			// Mostly deep paths, so that nodes split and merge.
			p := paths[rnd(len(paths))]
			mode := modes[rnd(len(modes))]
			w.add(c, p, mode)
			model.set(c, p, model[p][c]|mode)
		case op < 65:
			p := paths[rnd(len(paths))]
			typ := []jute.WatcherType{jute.WatcherChildren, jute.WatcherData, jute.WatcherAny,
				jute.WatcherPersistent, jute.WatcherPersistentRecursive}[rnd(5)]
			mode, _ := modesFor(typ)
			dry := rnd(2) == 0
			want := model[p][c]&mode != 0
			if got := w.remove(c, p, mode, dry); got != want {
				t.Fatalf("step %d: remove(%q, %b, dry %v) = %v; want %v", step, p, mode, dry, got, want)
			}
			if want && !dry {
				model.set(c, p, model[p][c]&^mode)
			}
		case op < 95:
			var events []znode.Event
			for range 1 + rnd(3) {
				events = append(events, ev(types[rnd(len(types))], real[rnd(len(real))]))
			}
			zxid := int64(step + 1)
			w.fire(zxid, events)
			want := model.fire(zxid, events)
			for _, c := range conns {
				if got := queued(t, c); !slices.Equal(got, want[c]) {
					t.Fatalf("step %d: %v fired on connection %d: %v; want %v", step, events, c.session(), got, want[c])
				}
			}
		default:
			w.removeConn(c)
			for p := range model {
				model.set(c, p, 0)
			}
			i := slices.Index(conns, c)
			conns[i] = fakeConn(nextSid, 1<<30)
			nextSid++
		}
		checkTree(t, w)
		wantSession := map[int64][]string{}
		wantPath := map[string][]int64{}
		for p, ws := range model {
			for c := range ws {
				wantSession[c.session()] = append(wantSession[c.session()], p)
				wantPath[p] = append(wantPath[p], c.session())
			}
		}
		for _, v := range wantSession {
			slices.Sort(v)
		}
		for _, v := range wantPath {
			slices.Sort(v)
		}
		if got := w.bySession(); !maps.EqualFunc(got, wantSession, slices.Equal) {
			t.Fatalf("step %d: bySession = %v; want %v", step, got, wantSession)
		}
		if got := w.byPath(); !maps.EqualFunc(got, wantPath, slices.Equal) {
			t.Fatalf("step %d: byPath = %v; want %v", step, got, wantPath)
		}
	}
}
