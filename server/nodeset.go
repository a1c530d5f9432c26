package server

import (
	"iter"
	"math/bits"
	"slices"
)

// nodeSet is a set of watch-table nodes held in one slice of pointers: open addressing with
// linear probing, and deletion that shifts back the entries after the hole, so there are no
// tombstones. A slot is 8 bytes; a table grows by half once three quarters full and has as many
// slots as its allocation's size class holds, so it stays about 60% full, where a Go map of the
// same nodes took 24 B an entry (map[*wnode]struct{}) and one keyed by name 41 B. The watch table
// holds a node's children by name in one, and a connection's watched nodes in another.
//
// The set does not know its nodes' keys: each call takes the hash of the key it is about, and
// the calls that move entries take the hash function (a set's one use keeps it the same).
// Hashes are seeded per watch manager (maphash), so a client cannot choose names that collide.
type nodeSet struct {
	slots []*wnode // empty, or at least minNodeSlots
	n     int
}

// minNodeSlots is the size of a set's first table.
const minNodeSlots = 4

func (s *nodeSet) len() int { return s.n }

// home is the slot where probing for hash h starts: h scaled to the table (Lemire's reduction,
// so a table may have any size).
func (s *nodeSet) home(h uint64) int {
	hi, _ := bits.Mul64(h, uint64(len(s.slots)))
	return int(hi)
}

// next is the slot after i.
func (s *nodeSet) next(i int) int {
	if i++; i == len(s.slots) {
		return 0
	}
	return i
}

// find returns the node of hash h that eq accepts, or nil.
func (s *nodeSet) find(h uint64, eq func(*wnode) bool) *wnode {
	if s.n == 0 {
		return nil
	}
	for i := s.home(h); ; i = s.next(i) {
		k := s.slots[i]
		if k == nil {
			return nil
		}
		if eq(k) {
			return k
		}
	}
}

// add puts k, which the set must not hold, into it.
func (s *nodeSet) add(k *wnode, hash func(*wnode) uint64) {
	if (s.n+1)*4 > len(s.slots)*3 {
		s.resize(max(minNodeSlots, len(s.slots)+len(s.slots)/2), hash)
	}
	s.place(k, hash(k))
	s.n++
}

// place puts k in the first free slot from its hash's home on.
func (s *nodeSet) place(k *wnode, h uint64) {
	i := s.home(h)
	for s.slots[i] != nil {
		i = s.next(i)
	}
	s.slots[i] = k
}

// remove takes k out of the set, if it holds it.
func (s *nodeSet) remove(k *wnode, hash func(*wnode) uint64) {
	if s.n == 0 {
		return
	}
	i := s.home(hash(k))
	for s.slots[i] != k {
		if s.slots[i] == nil {
			return
		}
		i = s.next(i)
	}
	// Empty slot i, then move back into the hole every entry of the run after it that may sit
	// there: one whose home is not after the hole, up to where it sits.
	s.slots[i] = nil
	size := len(s.slots)
	for j := s.next(i); s.slots[j] != nil; j = s.next(j) {
		home := s.home(hash(s.slots[j]))
		if (j-home+size)%size >= (j-i+size)%size {
			s.slots[i], s.slots[j] = s.slots[j], nil
			i = j
		}
	}
	s.n--
	switch {
	case s.n == 0:
		s.slots = nil
	case s.n*8 < len(s.slots) && len(s.slots) > minNodeSlots:
		s.resize(len(s.slots)/2, hash)
	}
}

// resize moves the entries into a table of at least size slots: as many as its allocation holds.
func (s *nodeSet) resize(size int, hash func(*wnode) uint64) {
	old := s.slots
	s.slots = slices.Grow([]*wnode(nil), size)
	s.slots = s.slots[:cap(s.slots)]
	for _, k := range old {
		if k != nil {
			s.place(k, hash(k))
		}
	}
}

// all yields the set's nodes. The set must not change while iterating.
func (s *nodeSet) all() iter.Seq[*wnode] {
	return func(yield func(*wnode) bool) {
		for _, k := range s.slots {
			if k != nil && !yield(k) {
				return
			}
		}
	}
}
