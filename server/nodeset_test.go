package server

import (
	"fmt"
	"testing"
)

// checkSet fails t unless s's count is its entries' and each entry is reached by probing from
// its home slot.
func checkSet(t *testing.T, s *nodeSet, hash func(*wnode) uint64) {
	t.Helper()
	n := 0
	for k := range s.all() {
		n++
		if s.find(hash(k), func(e *wnode) bool { return e == k }) != k {
			t.Fatalf("set entry %q is not reached from its home slot", k.name)
		}
	}
	if n != s.len() {
		t.Fatalf("set counts %d entries; it holds %d", s.len(), n)
	}
}

// TestNodeSetMatchesAMap runs random adds and removes on a nodeSet whose hash sends every node
// to one of three homes, so that runs are long, wrap around the table's end and are shifted back
// on removal, and checks every step against a map.
func TestNodeSetMatchesAMap(t *testing.T) {
	nodes := make([]*wnode, 200)
	id := map[*wnode]uint64{}
	for i := range nodes {
		nodes[i] = &wnode{name: fmt.Sprint(i)}
		id[nodes[i]] = uint64(i)
	}
	hash := func(k *wnode) uint64 { return id[k] % 3 * (1 << 63 / 3 * 2) } // the start, a third, two thirds in
	var s nodeSet
	want := map[*wnode]bool{}
	seed := uint64(7)
	for step := range 20000 {
		seed = seed*6364136223846793005 + 1442695040888963407
		k := nodes[(seed>>33)%uint64(len(nodes))]
		// Mostly adds while small, mostly removes while large: the table grows and shrinks.
		if add := (seed>>20)%uint64(len(nodes)) >= uint64(len(want)); add && !want[k] {
			s.add(k, hash)
			want[k] = true
		} else if !add {
			s.remove(k, hash)
			delete(want, k)
		}
		if s.len() != len(want) {
			t.Fatalf("step %d: %d entries, want %d", step, s.len(), len(want))
		}
		if step%5000 == 4999 { // empty it: the table must shrink as it goes
			for _, k := range nodes {
				s.remove(k, hash)
				delete(want, k)
				if (s.len() == 0) != (s.slots == nil) || len(s.slots) > 16*max(s.len(), 1) {
					t.Fatalf("step %d: %d slots for %d entries: the table did not shrink", step, len(s.slots), s.len())
				}
			}
		}
		for _, k := range nodes {
			got := s.find(hash(k), func(e *wnode) bool { return e == k }) != nil
			if got != want[k] {
				t.Fatalf("step %d: node %s found %v, want %v", step, k.name, got, want[k])
			}
		}
	}
}
