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

// From yields the names in name order, starting at the first one at or after from ("" for all).
// The strings share the tree's memory and stay valid while the caller holds them.
func (c Children) From(from string) iter.Seq[string] {
	return func(yield func(string) bool) {
		if c.n == nil {
			return
		}
		c.n.kids.ascendFrom(from, func(k *node) bool { return yield(k.name()) })
	}
}
