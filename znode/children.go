package znode

import (
	"iter"

	"github.com/zkd-io/zkd/jute"
)

// Children is one node's child list as a View saw it: the names in name order, readable from any
// goroutine for as long as it is held, since the node it comes from is never modified. It lets a
// server encode a large getChildren reply while it writes it, rather than build the whole list
// (and a copy of it in reply bytes) first.
type Children struct{ n *node }

// Children returns the child list of the node at path and that node's Stat, with getChildren's
// ACL check and errors (NoNode, then NoAuth).
func (v *View) Children(path string, auth []jute.Id) (Children, jute.Stat, error) {
	n, err := v.readable(path, auth, jute.PermRead)
	if err != nil {
		return Children{}, jute.Stat{}, err
	}
	return Children{n}, n.stat(), nil
}

// Len is the number of children.
func (c Children) Len() int {
	if c.n == nil {
		return 0
	}
	return int(c.n.numChildren())
}

// NameBytes is the total length of the names in bytes. It is kept in the child list's tree as it
// is asked for, so that after a change it costs a walk of the few tree nodes the change made, not
// of every name: a server sizes a long reply by it before encoding the reply.
func (c Children) NameBytes() int {
	if c.n == nil || c.n.kids.root == nil {
		return 0
	}
	return int(c.n.kids.root.weigh(nameLen))
}

// nameLen weighs a child in NameBytes.
func nameLen(k *node) int64 {
	_, l, _ := k.head()
	return int64(l)
}

// From yields the names in name order, starting at the first one at or after from ("" for all).
// The strings share the tree's memory and stay valid while the caller holds them.
func (c Children) From(from string) iter.Seq[string] {
	return func(yield func(string) bool) {
		if c.n == nil || c.n.kids.root == nil {
			return
		}
		// A long list is read for its names alone, each two loads away (the node, then its
		// bytes), and rarely in the caches. They are fetched a tree node's worth at a time, each
		// load for all of them before the next, so that the loads overlap instead of waiting on
		// one another: a list out of cache encodes in about two thirds of the time.
		var (
			bufs  [maxItems]*byte
			names [maxItems]string
		)
		c.n.kids.root.ascendRunsFrom(from, func(run []*node) bool {
			for len(run) > 0 {
				batch := names[:min(len(run), len(names))]
				for i := range batch {
					bufs[i] = run[i].buf
				}
				for i := range batch {
					batch[i] = nameAt(bufs[i])
				}
				for _, name := range batch {
					if !yield(name) {
						return false
					}
				}
				run = run[len(batch):]
			}
			return true
		})
	}
}
