package server

import (
	"iter"
	"sort"
	"strings"
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
// Events are queued on connections from the apply hook, under mu. A reader registers a watch
// under mu too, and only if no transaction newer than the view it read has been applied since:
// otherwise the read is retried on a fresh view, so a watch can never miss the change that
// follows the state its read returned.
type watchManager struct {
	mu struct {
		sync.Mutex
		paths     map[string]watchers
		byConn    map[*conn]map[string]struct{}
		recursive int   // recursive registrations, so the ancestor walk is skipped when none
		applied   int64 // zxid of the last transaction whose events were queued
		targets   []*conn
		mark      uint64 // counts fire's events; a connection already a target of one has it in fireMark
	}
	// fired, when set, is told how many connections each triggering event notified.
	fired func(typ jute.EventType, conns int)
}

// watchers is who watches one path. Most watched paths have one watcher (a lock waiter's
// predecessor, a client's own configuration node), which is kept inline, so that a watch costs its
// path and two map slots rather than a map of its own: a million watches on distinct paths took
// 394 B of heap each with a map per path (zkbench scale). Once a second connection watches the
// path, more holds every watcher and one is unused.
type watchers struct {
	one  *conn
	mode watchMode
	more map[*conn]watchMode
}

// len is the number of connections watching.
func (ws watchers) len() int {
	if ws.more != nil {
		return len(ws.more)
	}
	if ws.one != nil {
		return 1
	}
	return 0
}

// get returns c's modes on the path (zero: none).
func (ws watchers) get(c *conn) watchMode {
	if ws.more != nil {
		return ws.more[c]
	}
	if ws.one == c {
		return ws.mode
	}
	return 0
}

// with returns ws with c's modes set to mode (zero removes c).
func (ws watchers) with(c *conn, mode watchMode) watchers {
	switch {
	case ws.more != nil:
		if mode == 0 {
			delete(ws.more, c)
		} else {
			ws.more[c] = mode
		}
	case ws.one == nil || ws.one == c:
		ws.one, ws.mode = c, mode
		if mode == 0 {
			ws.one = nil
		}
	case mode != 0:
		ws.more = map[*conn]watchMode{ws.one: ws.mode, c: mode}
		ws.one, ws.mode = nil, 0
	}
	return ws
}

// all yields every watching connection and its modes. The path's entry may be changed while
// iterating, as a map's may.
func (ws watchers) all() iter.Seq2[*conn, watchMode] {
	return func(yield func(*conn, watchMode) bool) {
		if ws.more == nil {
			if ws.one != nil {
				yield(ws.one, ws.mode)
			}
			return
		}
		for c, m := range ws.more {
			if !yield(c, m) {
				return
			}
		}
	}
}

func newWatchManager(applied int64) *watchManager {
	w := &watchManager{}
	w.mu.paths = make(map[string]watchers)
	w.mu.byConn = make(map[*conn]map[string]struct{})
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
	ws := w.mu.paths[path]
	old := ws.get(c)
	if mode&watchRecursive != 0 && old&watchRecursive == 0 {
		w.mu.recursive++
	}
	w.mu.paths[path] = ws.with(c, old|mode)
	pc := w.mu.byConn[c]
	if pc == nil {
		pc = make(map[string]struct{})
		w.mu.byConn[c] = pc
	}
	pc[path] = struct{}{}
}

// clearLocked removes the bits in mode from c's watch on path and reports which were set.
func (w *watchManager) clearLocked(c *conn, path string, mode watchMode) watchMode {
	ws := w.mu.paths[path]
	old := ws.get(c)
	if old == 0 {
		return 0
	}
	removed := old & mode
	if removed&watchRecursive != 0 {
		w.mu.recursive--
	}
	if rest := old &^ mode; rest != 0 {
		w.mu.paths[path] = ws.with(c, rest)
		return removed
	}
	if ws = ws.with(c, 0); ws.len() == 0 {
		delete(w.mu.paths, path)
	} else {
		w.mu.paths[path] = ws
	}
	if pc := w.mu.byConn[c]; pc != nil {
		delete(pc, path)
		if len(pc) == 0 {
			delete(w.mu.byConn, c)
		}
	}
	return removed
}

// removeConn drops every watch of c (its connection closed).
func (w *watchManager) removeConn(c *conn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for path := range w.mu.byConn[c] {
		w.clearLocked(c, path, ^watchMode(0))
	}
	delete(w.mu.byConn, c)
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
	have := w.mu.paths[path].get(c) & mode
	if have == 0 {
		return false
	}
	if !dryRun {
		w.clearLocked(c, path, mode)
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
		for c, m := range w.mu.paths[ev.Path].all() {
			if m&match != 0 {
				c.fireMark = mark
				targets = append(targets, c) // a map's keys: no duplicates yet
				if m&oneShot != 0 {
					w.clearLocked(c, ev.Path, oneShot)
				}
			}
		}
		if w.mu.recursive > 0 && ev.Type != jute.EventNodeChildrenChanged {
			for p := ev.Path; ; p = parentPath(p) {
				for c, m := range w.mu.paths[p].all() {
					if m&watchRecursive != 0 && c.fireMark != mark {
						c.fireMark = mark
						targets = append(targets, c)
					}
				}
				if p == "/" || p == "" {
					break
				}
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

// parentPath returns the parent of an absolute path ("/" for a top-level node and for "/").
func parentPath(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
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
	s := watchSummary{Connections: len(w.mu.byConn), Paths: len(w.mu.paths)}
	for _, ws := range w.mu.paths {
		for _, mode := range ws.all() {
			s.Total += watchCount(mode)
		}
	}
	return s
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
	for c, paths := range w.mu.byConn {
		sid := c.session()
		for p := range paths {
			out[sid] = append(out[sid], p)
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
	out := make(map[string][]int64, len(w.mu.paths))
	for p, ws := range w.mu.paths {
		for c := range ws.all() {
			out[p] = append(out[p], c.session())
		}
		sort.Slice(out[p], func(i, j int) bool { return out[p][i] < out[p][j] })
	}
	return out
}
