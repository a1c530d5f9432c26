package znode

import (
	"cmp"
	"slices"
	"sync/atomic"
)

// The tree's ordered maps (each node's children, the session table, each session's ephemerals and
// the container and TTL indexes) are persistent B-trees: a change never modifies a bnode, it copies
// the nodes on the path from the root to the change and shares everything else. An old root stays a
// valid, unchanging map, which is what makes a View free to take and safe to read while Apply runs.
// The one exception is setIn: the bnodes a multi's transient made are changed in place by its later
// ops, because no View reaches them yet.
//
// Each bnode holds its items in an exactly sized slice (a copy is made for every change anyway),
// so a half-full node costs no unused slots; a transient's bnodes may keep some spare capacity.

const (
	maxItems = 31 // entries per bnode before it splits
	minItems = 15 // fewest entries a non-root bnode keeps after a delete
)

// item is what a btree holds: a value that carries its own key (a node its name, a session its id),
// so an entry costs one word for the pointer types.
type item[K cmp.Ordered] interface {
	key() K
}

type bnode[K cmp.Ordered, V item[K]] struct {
	items []V
	kids  []*bnode[K, V] // nil in a leaf; otherwise len(items)+1
	// owner is the transient that made this bnode, if one did (see setIn); nil otherwise.
	owner *transient
	// weight is 1 + the subtree's weight once weigh has computed it, 0 before. It is the one field
	// written after a bnode is reachable, by readers, atomically and always with the same value.
	// (The bnode stays in the 64-byte size class with it.)
	weight atomic.Int64
}

// transient marks the bnodes one multi's Apply made: they are not yet reachable from any View, so
// the later ops of the same multi may change them in place instead of copying them again (the
// "transient" of persistent data structures). Its address is its identity: a bnode keeps its
// owner alive, so no later transient can have the same address while such a bnode exists.
type transient struct{ _ byte }

// btree is a persistent ordered set of items, keyed by their key(). The zero value is empty. Its
// methods never modify the receiver: they return the changed tree.
type btree[K cmp.Ordered, V item[K]] struct {
	root *bnode[K, V]
}

// pathKey is a path in a set of paths (a session's ephemerals, the container and TTL indexes).
type pathKey string

func (p pathKey) key() string { return string(p) }

func (n *bnode[K, V]) search(k K) (int, bool) {
	lo, hi := 0, len(n.items)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if n.items[m].key() < k {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(n.items) && n.items[lo].key() == k
}

func (t btree[K, V]) get(k K) (V, bool) {
	for n := t.root; n != nil; {
		i, ok := n.search(k)
		if ok {
			return n.items[i], true
		}
		if n.kids == nil {
			break
		}
		n = n.kids[i]
	}
	var zero V
	return zero, false
}

func (t btree[K, V]) empty() bool { return t.root == nil }

// set returns the tree with v in it, replacing the item with the same key, and whether there was one.
func (t btree[K, V]) set(v V) (btree[K, V], bool) {
	if t.root == nil {
		return btree[K, V]{root: &bnode[K, V]{items: []V{v}}}, false
	}
	n, med, right, replaced := t.root.insert(v.key(), v)
	if right != nil {
		n = &bnode[K, V]{items: []V{med}, kids: []*bnode[K, V]{n, right}}
	}
	return btree[K, V]{root: n}, replaced
}

// setIn is set for a transient: bnodes owned by tr are changed in place, others are copied into
// tr's ownership, so a run of inserts into the same region copies its path once instead of every
// time. With a nil tr it is set.
func (t btree[K, V]) setIn(tr *transient, v V) (btree[K, V], bool) {
	if tr == nil {
		return t.set(v)
	}
	if t.root == nil {
		return btree[K, V]{root: &bnode[K, V]{items: []V{v}, owner: tr}}, false
	}
	n, med, right, replaced := t.root.insertIn(tr, v.key(), v)
	if right != nil {
		n = &bnode[K, V]{items: []V{med}, kids: []*bnode[K, V]{n, right}, owner: tr}
	}
	return btree[K, V]{root: n}, replaced
}

// own returns n itself when tr owns it, or else a copy owned by tr with slices of its own.
func (n *bnode[K, V]) own(tr *transient) *bnode[K, V] {
	if n.owner == tr {
		n.weight.Store(0) // about to change; no View reaches it yet
		return n
	}
	return &bnode[K, V]{items: clone(n.items), kids: clone(n.kids), owner: tr}
}

// insertIn is insert for a transient: it returns n, or tr's copy of it, with (k, v) in it, split in
// two around the median entry if it overflowed.
func (n *bnode[K, V]) insertIn(tr *transient, k K, v V) (*bnode[K, V], V, *bnode[K, V], bool) {
	var zero V
	i, found := n.search(k)
	if found {
		c := n.own(tr)
		c.items[i] = v
		return c, zero, nil, true
	}
	if n.kids == nil {
		c := n.own(tr)
		c.items = slices.Insert(c.items, i, v)
		l, med, r := splitIn(tr, c)
		return l, med, r, false
	}
	child, med, right, replaced := n.kids[i].insertIn(tr, k, v)
	c := n.own(tr)
	c.kids[i] = child
	if right == nil {
		return c, zero, nil, replaced
	}
	c.items = slices.Insert(c.items, i, med)
	c.kids = slices.Insert(c.kids, i+1, right)
	l, m, r := splitIn(tr, c)
	return l, m, r, replaced
}

// splitIn is split for a transient's bnode: both halves are new and owned by tr.
func splitIn[K cmp.Ordered, V item[K]](tr *transient, n *bnode[K, V]) (*bnode[K, V], V, *bnode[K, V]) {
	l, med, r := split(n)
	if r != nil {
		l.owner, r.owner = tr, tr
	}
	return l, med, r
}

func insertAt[T any](s []T, i int, v T) []T {
	out := make([]T, len(s)+1)
	copy(out, s[:i])
	out[i] = v
	copy(out[i+1:], s[i:])
	return out
}

func removeAt[T any](s []T, i int) []T {
	out := make([]T, len(s)-1)
	copy(out, s[:i])
	copy(out[i:], s[i+1:])
	return out
}

func clone[T any](s []T) []T {
	if s == nil {
		return nil
	}
	out := make([]T, len(s))
	copy(out, s)
	return out
}

// insert returns the copy of n with (k, v) in it; when that copy overflowed it is returned split in
// two with the median entry between them.
func (n *bnode[K, V]) insert(k K, v V) (*bnode[K, V], V, *bnode[K, V], bool) {
	var zero V
	i, found := n.search(k)
	if found {
		c := &bnode[K, V]{items: clone(n.items), kids: n.kids}
		c.items[i] = v
		return c, zero, nil, true
	}
	if n.kids == nil {
		l, med, r := split(&bnode[K, V]{items: insertAt(n.items, i, v)})
		return l, med, r, false
	}
	child, med, right, replaced := n.kids[i].insert(k, v)
	if right == nil {
		c := &bnode[K, V]{items: n.items, kids: clone(n.kids)}
		c.kids[i] = child
		return c, zero, nil, replaced
	}
	kids := make([]*bnode[K, V], len(n.kids)+1)
	copy(kids, n.kids[:i])
	kids[i], kids[i+1] = child, right
	copy(kids[i+2:], n.kids[i+1:])
	l, m, r := split(&bnode[K, V]{items: insertAt(n.items, i, med), kids: kids})
	return l, m, r, replaced
}

// split divides an overfull node around its median; a node that fits is returned as it is.
func split[K cmp.Ordered, V item[K]](n *bnode[K, V]) (*bnode[K, V], V, *bnode[K, V]) {
	if len(n.items) <= maxItems {
		var zero V
		return n, zero, nil
	}
	m := len(n.items) / 2
	l := &bnode[K, V]{items: clone(n.items[:m])}
	r := &bnode[K, V]{items: clone(n.items[m+1:])}
	if n.kids != nil {
		l.kids = clone(n.kids[:m+1])
		r.kids = clone(n.kids[m+1:])
	}
	return l, n.items[m], r
}

// delete returns the map without k, and whether k was present.
func (t btree[K, V]) delete(k K) (btree[K, V], bool) {
	if t.root == nil {
		return t, false
	}
	n, ok := t.root.remove(k)
	if !ok {
		return t, false
	}
	if len(n.items) == 0 {
		if n.kids == nil {
			return btree[K, V]{}, true
		}
		n = n.kids[0]
	}
	return btree[K, V]{root: n}, true
}

func (n *bnode[K, V]) remove(k K) (*bnode[K, V], bool) {
	i, found := n.search(k)
	if n.kids == nil {
		if !found {
			return n, false
		}
		return &bnode[K, V]{items: removeAt(n.items, i)}, true
	}
	if found {
		child, pred := n.kids[i].removeMax()
		c := &bnode[K, V]{items: clone(n.items), kids: clone(n.kids)}
		c.items[i] = pred
		c.kids[i] = child
		c.fix(i)
		return c, true
	}
	child, ok := n.kids[i].remove(k)
	if !ok {
		return n, false
	}
	c := &bnode[K, V]{items: clone(n.items), kids: clone(n.kids)}
	c.kids[i] = child
	c.fix(i)
	return c, true
}

// removeMax returns the copy of n without its largest entry, and that entry.
func (n *bnode[K, V]) removeMax() (*bnode[K, V], V) {
	last := len(n.items) - 1
	if n.kids == nil {
		return &bnode[K, V]{items: clone(n.items[:last])}, n.items[last]
	}
	child, max := n.kids[last+1].removeMax()
	c := &bnode[K, V]{items: clone(n.items), kids: clone(n.kids)}
	c.kids[last+1] = child
	c.fix(last + 1)
	return c, max
}

// fix refills c.kids[i] after a removal left it below minItems, by borrowing from a sibling or
// merging with one. c must be a fresh copy (its slices are modified in place); siblings are copied.
func (c *bnode[K, V]) fix(i int) {
	child := c.kids[i]
	if len(child.items) >= minItems {
		return
	}
	switch {
	case i > 0 && len(c.kids[i-1].items) > minItems:
		left := c.kids[i-1]
		ll := len(left.items) - 1
		nc := &bnode[K, V]{items: insertAt(child.items, 0, c.items[i-1])}
		nl := &bnode[K, V]{items: clone(left.items[:ll])}
		if child.kids != nil {
			nc.kids = insertAt(child.kids, 0, left.kids[ll+1])
			nl.kids = clone(left.kids[:ll+1])
		}
		c.items[i-1] = left.items[ll]
		c.kids[i-1], c.kids[i] = nl, nc
	case i < len(c.kids)-1 && len(c.kids[i+1].items) > minItems:
		right := c.kids[i+1]
		nc := &bnode[K, V]{items: make([]V, len(child.items)+1)}
		copy(nc.items, child.items)
		nc.items[len(child.items)] = c.items[i]
		nr := &bnode[K, V]{items: clone(right.items[1:])}
		if child.kids != nil {
			nc.kids = make([]*bnode[K, V], len(child.kids)+1)
			copy(nc.kids, child.kids)
			nc.kids[len(child.kids)] = right.kids[0]
			nr.kids = clone(right.kids[1:])
		}
		c.items[i] = right.items[0]
		c.kids[i], c.kids[i+1] = nc, nr
	default:
		if i == len(c.kids)-1 {
			i-- // merge with the left sibling instead
		}
		l, r := c.kids[i], c.kids[i+1]
		m := &bnode[K, V]{items: make([]V, 0, len(l.items)+1+len(r.items))}
		m.items = append(append(append(m.items, l.items...), c.items[i]), r.items...)
		if l.kids != nil {
			m.kids = make([]*bnode[K, V], 0, len(l.kids)+len(r.kids))
			m.kids = append(append(m.kids, l.kids...), r.kids...)
		}
		c.items = removeAt(c.items, i)
		c.kids = removeAt(c.kids, i+1)
		c.kids[i] = m
	}
}

// ascend calls fn on every item in key order until fn returns false; it reports whether it ran to
// the end.
func (t btree[K, V]) ascend(fn func(V) bool) bool {
	if t.root == nil {
		return true
	}
	return t.root.ascend(fn)
}

func (n *bnode[K, V]) ascend(fn func(V) bool) bool {
	for i := range n.items {
		if n.kids != nil && !n.kids[i].ascend(fn) {
			return false
		}
		if !fn(n.items[i]) {
			return false
		}
	}
	if n.kids != nil {
		return n.kids[len(n.items)].ascend(fn)
	}
	return true
}

// ascendFrom is ascend starting at the first key >= from.
func (t btree[K, V]) ascendFrom(from K, fn func(V) bool) bool {
	if t.root == nil {
		return true
	}
	return t.root.ascendFrom(from, fn)
}

func (n *bnode[K, V]) ascendFrom(from K, fn func(V) bool) bool {
	i, _ := n.search(from)
	for j := i; j < len(n.items); j++ {
		if n.kids != nil {
			var ok bool
			if j == i {
				ok = n.kids[j].ascendFrom(from, fn)
			} else {
				ok = n.kids[j].ascend(fn)
			}
			if !ok {
				return false
			}
		}
		if !fn(n.items[j]) {
			return false
		}
	}
	if n.kids != nil {
		last := len(n.items)
		if i == last {
			return n.kids[last].ascendFrom(from, fn)
		}
		return n.kids[last].ascend(fn)
	}
	return true
}

// ascendRunsFrom is ascendFrom handing fn the items in runs, a leaf's at once and an inner bnode's
// one at a time, so that a caller can load a run's items together before it uses them (when the
// items are pointers, their loads then overlap instead of waiting on one another).
func (n *bnode[K, V]) ascendRunsFrom(from K, fn func([]V) bool) bool {
	i, _ := n.search(from)
	if n.kids == nil {
		return i == len(n.items) || fn(n.items[i:])
	}
	for j := i; j < len(n.items); j++ {
		var ok bool
		if j == i {
			ok = n.kids[j].ascendRunsFrom(from, fn)
		} else {
			ok = n.kids[j].ascendRuns(fn)
		}
		if !ok || !fn(n.items[j:j+1]) {
			return false
		}
	}
	last := len(n.items)
	if i == last {
		return n.kids[last].ascendRunsFrom(from, fn)
	}
	return n.kids[last].ascendRuns(fn)
}

// ascendRuns is ascendRunsFrom from the first item.
func (n *bnode[K, V]) ascendRuns(fn func([]V) bool) bool {
	if n.kids == nil {
		return fn(n.items)
	}
	for j := range n.items {
		if !n.kids[j].ascendRuns(fn) || !fn(n.items[j:j+1]) {
			return false
		}
	}
	return n.kids[len(n.items)].ascendRuns(fn)
}

// weigh returns the sum of w over the items of the subtree at n. A bnode never changes once a
// View reaches it, so the sum is kept in it: weighing a tree again after a change walks only the
// bnodes the change copied (a path from the root, a few dozen items) and reads the rest from the
// bnodes it shares. Every caller of weigh on the same tree must pass the same w.
func (n *bnode[K, V]) weigh(w func(V) int64) int64 {
	if s := n.weight.Load(); s != 0 {
		return s - 1
	}
	var s int64
	for _, v := range n.items {
		s += w(v)
	}
	for _, k := range n.kids {
		s += k.weigh(w)
	}
	n.weight.Store(s + 1)
	return s
}

// buildBtree makes a balanced tree from items sorted by strictly increasing key, in linear time.
func buildBtree[K cmp.Ordered, V item[K]](items []V) btree[K, V] {
	if len(items) == 0 {
		return btree[K, V]{}
	}
	h, capacity := 0, maxItems
	for capacity < len(items) {
		h++
		capacity = (maxItems+1)*(capacity+1) - 1
	}
	return btree[K, V]{root: buildLevel(items, h)}
}

// capacityAt is the most entries a subtree of height h holds.
func capacityAt(h int) int {
	c := maxItems
	for ; h > 0; h-- {
		c = (maxItems+1)*(c+1) - 1
	}
	return c
}

func buildLevel[K cmp.Ordered, V item[K]](items []V, h int) *bnode[K, V] {
	if h == 0 {
		return &bnode[K, V]{items: clone(items)}
	}
	sub := capacityAt(h - 1)
	k := (len(items) + 1 + sub) / (sub + 1) // children needed, rounded up
	if k < 2 {
		k = 2
	}
	rest := len(items) - (k - 1)
	base, extra := rest/k, rest%k
	n := &bnode[K, V]{items: make([]V, 0, k-1), kids: make([]*bnode[K, V], 0, k)}
	pos := 0
	for c := 0; c < k; c++ {
		size := base
		if c < extra {
			size++
		}
		n.kids = append(n.kids, buildLevel(items[pos:pos+size], h-1))
		pos += size
		if c < k-1 {
			n.items = append(n.items, items[pos])
			pos++
		}
	}
	return n
}
