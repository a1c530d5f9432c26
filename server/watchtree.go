package server

import (
	"hash/maphash"
	"iter"
	"strings"
)

// wnode is a node of the watch table: a radix tree of the watched paths over their segments, so
// that paths that share a prefix hold it once. A node stands for the path of its ancestors' names
// and its own, joined by "/", and holds who watches that path. Its name is one segment or a run
// of them ("blocks/202301_x"): a node that would have no watcher and a single child is merged
// into that child. So every node but the two roots has a watcher or at least two children, there
// are at most twice as many nodes as watched paths, and the names hold at most the bytes of the
// watched paths themselves, whatever the paths (a watch on a path of a hundred thousand segments
// is one node). A million watches on ClickHouse-shaped leaves (about 100-byte paths, a last
// segment of about 30) held 240 B of heap each in a map of full paths, and 108 B in this tree:
// the leaf's node, its name and a slot in each of two nodeSets (BenchmarkWatchTableMemory;
// docs/performance.md). All of it is guarded by watchManager.mu.
type wnode struct {
	parent *wnode
	// name is a string of its own: never a slice of the path it was registered with, which
	// would keep the whole request's path alive. Its first segment is its key among the
	// parent's children.
	name string
	// one and mode are the watcher while the node has one; from the second on, ext.more holds
	// every watcher and one is unused (most watched paths have one watcher: a lock waiter's
	// predecessor, a client's own configuration node).
	one  *conn
	mode watchMode
	// ext is nil while the node has neither children nor a second watcher, as most watched
	// leaves do, so that a leaf's node fits a 48-byte allocation.
	ext *wnodeExt
}

// wnodeExt is what a node with children or more than one watcher has besides.
type wnodeExt struct {
	kids nodeSet // by the first segment of their names
	more map[*conn]watchMode
}

// watchers is the number of connections watching the node's path.
func (n *wnode) watchers() int {
	if n.ext != nil && n.ext.more != nil {
		return len(n.ext.more)
	}
	if n.one != nil {
		return 1
	}
	return 0
}

// get returns c's modes on the node's path (zero: none).
func (n *wnode) get(c *conn) watchMode {
	if n.ext != nil && n.ext.more != nil {
		return n.ext.more[c]
	}
	if n.one == c {
		return n.mode
	}
	return 0
}

// set sets c's modes to mode (zero removes c).
func (n *wnode) set(c *conn, mode watchMode) {
	switch {
	case n.ext != nil && n.ext.more != nil:
		if mode != 0 {
			n.ext.more[c] = mode
			return
		}
		delete(n.ext.more, c)
		if len(n.ext.more) == 0 {
			n.ext.more = nil
			n.trimExt()
		}
	case n.one == nil || n.one == c:
		n.one, n.mode = c, mode
		if mode == 0 {
			n.one = nil
		}
	case mode != 0:
		if n.ext == nil {
			n.ext = &wnodeExt{}
		}
		n.ext.more = map[*conn]watchMode{n.one: n.mode, c: mode}
		n.one, n.mode = nil, 0
	}
}

// all yields every watching connection and its modes. The node's watchers may be changed while
// iterating, as a map's may.
func (n *wnode) all() iter.Seq2[*conn, watchMode] {
	return func(yield func(*conn, watchMode) bool) {
		if n.ext == nil || n.ext.more == nil {
			if n.one != nil {
				yield(n.one, n.mode)
			}
			return
		}
		for c, m := range n.ext.more {
			if !yield(c, m) {
				return
			}
		}
	}
}

// firstSegment returns s up to its first "/".
func firstSegment(s string) string {
	if i := strings.IndexByte(s, '/'); i >= 0 {
		return s[:i]
	}
	return s
}

// kidLocked returns n's child whose name starts with segment seg, or nil.
func (w *watchManager) kidLocked(n *wnode, seg string) *wnode {
	if n.ext == nil {
		return nil
	}
	return n.ext.kids.find(maphash.String(w.seed, seg), func(k *wnode) bool { return firstSegment(k.name) == seg })
}

// addKidLocked makes k a child of n, keyed by the first segment of k's name (so that must not
// change while it is).
func (w *watchManager) addKidLocked(n, k *wnode) {
	if n.ext == nil {
		n.ext = &wnodeExt{}
	}
	k.parent = n
	n.ext.kids.add(k, w.byName)
}

// dropKidLocked takes k out of n's children.
func (w *watchManager) dropKidLocked(n, k *wnode) {
	n.ext.kids.remove(k, w.byName)
	n.trimExt()
}

// kidCount is the number of n's children.
func (n *wnode) kidCount() int {
	if n.ext == nil {
		return 0
	}
	return n.ext.kids.len()
}

func (n *wnode) trimExt() {
	if n.ext.kids.len() == 0 && n.ext.more == nil {
		n.ext = nil
	}
}

// below reports whether rest, a path relative to n's parent, is n's path or under it, and then
// returns what is left of rest below n (ok and "" for n itself: exact).
func (n *wnode) below(rest string) (tail string, exact, ok bool) {
	if !strings.HasPrefix(rest, n.name) {
		return "", false, false
	}
	if len(rest) == len(n.name) {
		return "", true, true
	}
	if rest[len(n.name)] != '/' {
		return "", false, false
	}
	return rest[len(n.name)+1:], false, true
}

// commonSegments returns the length of the longest run of whole leading segments a and b share:
// a[:i] == b[:i], and each of them ends at i or has a "/" there.
func commonSegments(a, b string) int {
	end := 0
	for i := 0; ; {
		sa, sb := firstSegment(a[i:]), firstSegment(b[i:])
		if sa != sb {
			return end
		}
		end = i + len(sa)
		if end == len(a) || end == len(b) {
			return end
		}
		i = end + 1
	}
}

// rootOf returns the root a path hangs from and the path's rest below it ("" with exact for "/"
// itself). An absolute path hangs from the root, the node of "/": "/a/b" is the segments "a" and
// "b" below it. Any string a client sends is a path here, as it is a key of ZooKeeper's watch
// tables: "/a/" is the segments "a" and "". A path that does not start with "/" (such as "")
// hangs from a second root, which is no path, so no event (always on an absolute path) reaches
// it.
func (w *watchManager) rootOf(path string) (n *wnode, rest string, exact bool) {
	if p, ok := strings.CutPrefix(path, "/"); ok {
		return &w.mu.root, p, p == ""
	}
	return &w.mu.rel, path, false
}

// lookupLocked returns path's node, or nil.
func (w *watchManager) lookupLocked(path string) *wnode {
	n, rest, exact := w.rootOf(path)
	for !exact {
		k := w.kidLocked(n, firstSegment(rest))
		if k == nil {
			return nil
		}
		tail, ex, ok := k.below(rest)
		if !ok {
			return nil
		}
		n, rest, exact = k, tail, ex
	}
	return n
}

// nodeLocked returns path's node, making it if need be: a new leaf, and a split of the child
// whose name path leaves part of the way.
func (w *watchManager) nodeLocked(path string) *wnode {
	n, rest, exact := w.rootOf(path)
	for !exact {
		k := w.kidLocked(n, firstSegment(rest))
		if k == nil {
			k = &wnode{name: strings.Clone(rest)}
			w.addKidLocked(n, k)
			return k
		}
		tail, ex, ok := k.below(rest)
		if !ok {
			// rest and k's name part after their first i bytes of whole segments: they meet
			// at a new node of that name, k below it under the rest of its name.
			i := commonSegments(rest, k.name)
			m := &wnode{name: strings.Clone(k.name[:i])}
			w.dropKidLocked(n, k)
			k.name = strings.Clone(k.name[i+1:])
			w.addKidLocked(n, m)
			w.addKidLocked(m, k)
			if i == len(rest) {
				return m
			}
			k, tail, ex = m, rest[i+1:], false
		}
		n, rest, exact = k, tail, ex
	}
	return n
}

// pruneLocked keeps the tree's shape once n lost a watcher: a node with no watcher left is taken
// out if it has no child, and merged into its child if it has one; taking a node out may leave
// its parent to the same.
func (w *watchManager) pruneLocked(n *wnode) {
	for n.parent != nil && n.watchers() == 0 {
		p := n.parent
		switch n.kidCount() {
		case 0:
			w.dropKidLocked(p, n)
			n = p
			continue
		case 1:
			var k *wnode
			for k = range n.ext.kids.all() {
			}
			w.dropKidLocked(p, n)
			k.name = n.name + "/" + k.name
			w.addKidLocked(p, k)
		}
		return
	}
}

// pathOf returns the path n stands for.
func (w *watchManager) pathOf(n *wnode) string {
	size := 0
	top := n
	for ; top.parent != nil; top = top.parent {
		size += len(top.name) + 1
	}
	if top == &w.mu.root && size == 0 {
		return "/"
	}
	if top == &w.mu.rel {
		size-- // no leading "/"
	}
	b := make([]byte, size)
	for ; n.parent != nil; n = n.parent {
		size -= len(n.name)
		copy(b[size:], n.name)
		if size > 0 {
			size--
			b[size] = '/'
		}
	}
	return string(b)
}

// walkLocked calls visit for every node that has a watcher. visit may release and retake the
// watch lock: what changes meanwhile may or may not be visited, as in a map iteration (a node
// taken out meanwhile is visited with its watchers of when it was).
func (w *watchManager) walkLocked(visit func(*wnode)) {
	stack := []*wnode{&w.mu.root, &w.mu.rel}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n.watchers() > 0 {
			visit(n)
		}
		if n.ext != nil {
			for k := range n.ext.kids.all() {
				stack = append(stack, k)
			}
		}
	}
}
