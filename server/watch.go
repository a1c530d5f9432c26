package server

import (
	"hash/maphash"
	"slices"
	"sort"
	"sync"

	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/znode"
)

// watchMode is a set of watch kinds one connection holds on one path. ZooKeeper 3.9 lets a
// connection hold a standard, a persistent and a recursive watch on the same path at once.
type watchMode uint8

const (
	watchData       watchMode = 1 << iota // one-shot data watch (getData, exists)
	watchChild                            // one-shot child watch (getChildren)
	watchPersistent                       // addWatch PERSISTENT: data and child events, kept
	watchRecursive                        // addWatch PERSISTENT_RECURSIVE: data events of the subtree, kept
)

// watchManager holds every watch of the server's connections. Watches belong to connections, not
// to sessions or the replicated state: they disappear when their connection closes.
//
// The watched paths are a tree of their segments (watchtree.go), so that the long prefixes of a
// large deployment's paths are held once, and each connection has the set of its paths' nodes.
//
// Events are queued on connections from the apply hook, under mu. A reader registers a watch
// under mu too, and only if no transaction newer than the view it read has been applied since:
// otherwise the read is retried on a fresh view, so a watch can never miss the change that
// follows the state its read returned.
type watchManager struct {
	mu struct {
		sync.Mutex
		// root is the node of "/"; rel is the parent of the paths that do not start with "/".
		root, rel wnode
		byConn    map[*conn]*nodeSet // each connection's watched nodes
		paths     int                // nodes with a watcher
		total     int                // watches, as wchs counts them (watchCount)
		recursive int                // recursive registrations, so the ancestor walk is skipped when none
		applied   int64              // zxid of the last transaction whose events were queued
		targets   []*conn
		mark      uint64 // counts fire's events; a connection already a target of one has it in fireMark
	}
	// seed seeds the hashes of the tree's node sets; byName and byNode are their two hash
	// functions: of a node's first segment (its key among its parent's children), and of the
	// node itself (a connection's set).
	seed           maphash.Seed
	byName, byNode func(*wnode) uint64
	// fired, when set, is told how many connections each triggering event notified.
	fired func(typ jute.EventType, conns int)
}

func newWatchManager(applied int64) *watchManager {
	w := &watchManager{seed: maphash.MakeSeed()}
	w.byName = func(k *wnode) uint64 { return maphash.String(w.seed, firstSegment(k.name)) }
	w.byNode = func(k *wnode) uint64 { return maphash.Comparable(w.seed, k) }
	w.mu.byConn = make(map[*conn]*nodeSet)
	w.mu.applied = applied
	return w
}

// registerAll runs fn under the watch lock, provided the view the caller read at (zxid) is still
// the newest applied state; fn registers watches through add and queues what must precede any
// later event (the reply, catch-up events). It reports false, without running fn, when the
// caller must read again on a newer view.
func (w *watchManager) registerAll(c *conn, zxid int64, fn func(add func(string, watchMode))) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if zxid < w.mu.applied {
		return false
	}
	fn(func(path string, mode watchMode) { w.addLocked(c, path, mode) })
	return true
}

// add registers mode on path for c unconditionally (addWatch and setWatches registrations that
// need no catch-up).
func (w *watchManager) add(c *conn, path string, mode watchMode) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.addLocked(c, path, mode)
}

func (w *watchManager) addLocked(c *conn, path string, mode watchMode) {
	if c.isClosed() {
		return
	}
	n := w.nodeLocked(path)
	w.setLocked(c, n, n.get(c)|mode)
}

// setLocked sets c's modes on n's path to mode (zero: c no longer watches it), and keeps the
// counts, c's set of nodes and the tree in step: n is pruned once unused.
func (w *watchManager) setLocked(c *conn, n *wnode, mode watchMode) {
	old := n.get(c)
	if old == mode {
		return
	}
	had := n.watchers() > 0
	n.set(c, mode)
	w.mu.total += watchCount(mode) - watchCount(old)
	if old&watchRecursive != mode&watchRecursive {
		if mode&watchRecursive != 0 {
			w.mu.recursive++
		} else {
			w.mu.recursive--
		}
	}
	switch {
	case old == 0:
		if !had {
			w.mu.paths++
		}
		pc := w.mu.byConn[c]
		if pc == nil {
			pc = &nodeSet{}
			w.mu.byConn[c] = pc
		}
		pc.add(n, w.byNode)
	case mode == 0:
		if n.watchers() == 0 {
			w.mu.paths--
		}
		if pc := w.mu.byConn[c]; pc != nil {
			pc.remove(n, w.byNode)
			if pc.len() == 0 {
				delete(w.mu.byConn, c)
			}
		}
		w.pruneLocked(n)
	}
}

// clearLocked removes the bits in mode from c's watch on n and reports which were set.
func (w *watchManager) clearLocked(c *conn, n *wnode, mode watchMode) watchMode {
	old := n.get(c)
	w.setLocked(c, n, old&^mode)
	return old & mode
}

// removeConn drops every watch of c (its connection closed).
func (w *watchManager) removeConn(c *conn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	pc := w.mu.byConn[c]
	if pc == nil {
		return
	}
	// Out of the table first: setLocked leaves the set alone, which it may not change while
	// this loop goes through it.
	delete(w.mu.byConn, c)
	for n := range pc.all() {
		w.setLocked(c, n, 0)
	}
}

// modesFor maps a checkWatches/removeWatches watcher type onto watch modes.
func modesFor(t jute.WatcherType) (watchMode, bool) {
	switch t {
	case jute.WatcherChildren:
		return watchChild, true
	case jute.WatcherData:
		return watchData, true
	case jute.WatcherAny:
		return ^watchMode(0), true
	case jute.WatcherPersistent:
		return watchPersistent, true
	case jute.WatcherPersistentRecursive:
		return watchRecursive, true
	}
	return 0, false
}

// remove removes c's watches of the given modes on exactly path and reports whether any existed.
// With dryRun (checkWatches) nothing is removed.
func (w *watchManager) remove(c *conn, path string, mode watchMode, dryRun bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := w.lookupLocked(path)
	if n == nil || n.get(c)&mode == 0 {
		return false
	}
	if !dryRun {
		w.clearLocked(c, n, mode)
	}
	return true
}

// fire queues the notifications of one applied transaction on the watching connections, one
// event per connection per trigger, dropped for connections without READ on the node's ACL.
// It never blocks: a connection whose queue overflows is closed instead.
func (w *watchManager) fire(zxid int64, events []znode.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mu.applied = max(w.mu.applied, zxid)
	for i := range events {
		ev := &events[i]
		targets := w.mu.targets[:0]
		var oneShot watchMode
		var match watchMode
		switch ev.Type {
		case jute.EventNodeCreated, jute.EventNodeDataChanged:
			match, oneShot = watchData|watchPersistent, watchData
		case jute.EventNodeDeleted:
			match, oneShot = watchData|watchChild|watchPersistent, watchData|watchChild
		case jute.EventNodeChildrenChanged:
			match, oneShot = watchChild|watchPersistent, watchChild
		default:
			continue
		}
		w.mu.mark++
		mark := w.mu.mark
		if n := w.lookupLocked(ev.Path); n != nil {
			for c, m := range n.all() {
				if m&match != 0 {
					c.fireMark = mark
					targets = append(targets, c) // a map's keys: no duplicates yet
					if m&oneShot != 0 {
						w.clearLocked(c, n, oneShot)
					}
				}
			}
		}
		if w.mu.recursive > 0 && ev.Type != jute.EventNodeChildrenChanged {
			// The recursive watches of the path and of each of its ancestors, from "/" down to
			// the deepest that has a node.
			n, rest, exact := w.rootOf(ev.Path)
			for {
				for c, m := range n.all() {
					if m&watchRecursive != 0 && c.fireMark != mark {
						c.fireMark = mark
						targets = append(targets, c)
					}
				}
				if exact {
					break
				}
				k := w.kidLocked(n, firstSegment(rest))
				if k == nil {
					break
				}
				tail, ex, ok := k.below(rest)
				if !ok {
					break
				}
				n, rest, exact = k, tail, ex
			}
		}
		if len(targets) > 0 {
			if w.fired != nil {
				w.fired(ev.Type, len(targets))
			}
			hdr := jute.ReplyHeader{Xid: jute.XidNotification, Zxid: zxid}
			we := jute.WatcherEvent{Type: ev.Type, State: jute.StateSyncConnected, Path: ev.Path}
			for _, c := range targets {
				if !znode.CheckACL(ev.ACL, c.authIDs(), jute.PermRead) {
					continue
				}
				if !c.out.pushFrame(&hdr, &we) {
					c.abort(closeSlowConsumer, errSlowConsumer)
					continue
				}
				c.eventZxid.Store(zxid) // fire's zxids only grow, under the lock
			}
		}
		clear(targets)
		w.mu.targets = targets[:0]
	}
}

// advance records that the transaction at zxid was applied without events.
func (w *watchManager) advance(zxid int64) {
	w.mu.Lock()
	w.mu.applied = max(w.mu.applied, zxid)
	w.mu.Unlock()
}

// watchSummary is the wchs figure set.
type watchSummary struct {
	Connections int
	Paths       int
	Total       int
}

func (w *watchManager) summary() watchSummary {
	w.mu.Lock()
	defer w.mu.Unlock()
	return watchSummary{Connections: len(w.mu.byConn), Paths: w.mu.paths, Total: w.mu.total}
}

// watchCount counts a mode set as ZooKeeper counts entries in its data and child tables.
func watchCount(m watchMode) int {
	n := 0
	if m&(watchData|watchPersistent|watchRecursive) != 0 {
		n++
	}
	if m&(watchChild|watchPersistent) != 0 {
		n++
	}
	return n
}

// bySession returns, for wchc, each session's watched paths (sorted).
func (w *watchManager) bySession() map[int64][]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[int64][]string)
	for c, nodes := range w.mu.byConn {
		sid := c.session()
		for n := range nodes.all() {
			out[sid] = append(out[sid], w.pathOf(n))
		}
	}
	for _, v := range out {
		sort.Strings(v)
	}
	return out
}

// byPath returns, for wchp, each watched path's sessions (sorted).
func (w *watchManager) byPath() map[string][]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string][]int64, w.mu.paths)
	visit := func(n *wnode) {
		p := w.pathOf(n)
		for c := range n.all() {
			out[p] = append(out[p], c.session())
		}
		slices.Sort(out[p])
	}
	w.walkLocked(visit)
	return out
}
