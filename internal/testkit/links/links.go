// Package links is the fault state the in-process test networks (memnet, raftnet) share: which
// directed links between named nodes are cut, and which are slow. A Table only records; the
// network that owns it refuses dials and breaks connections by asking it.
//
// A Table's zero value is fully connected and ready to use. Its methods are safe for concurrent
// use; its lock is a leaf (nothing is called while it is held), so a network may ask it while
// holding its own lock.
//
// It is test-only machinery; no production package imports it.
package links

import (
	"sync"
	"time"
)

type link struct{ from, to string }

// Table records the cut and slow links between named nodes.
type Table struct {
	mu    sync.Mutex
	cut   map[link]bool
	delay map[link]time.Duration
}

func (t *Table) setCut(ls ...link) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cut == nil {
		t.cut = make(map[link]bool)
	}
	for _, l := range ls {
		t.cut[l] = true
	}
}

// Cut cuts the links between a and b in both directions.
func (t *Table) Cut(a, b string) { t.setCut(link{a, b}, link{b, a}) }

// CutOneWay cuts only the direction from → to.
func (t *Table) CutOneWay(from, to string) { t.setCut(link{from, to}) }

// Partition cuts every link between group and the rest of all, both ways.
func (t *Table) Partition(group, all []string) {
	in := make(map[string]bool, len(group))
	for _, g := range group {
		in[g] = true
	}
	var ls []link
	for _, a := range all {
		for _, b := range all {
			if in[a] != in[b] {
				ls = append(ls, link{a, b})
			}
		}
	}
	t.setCut(ls...)
}

// Heal restores every link and removes every delay.
func (t *Table) Heal() {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.cut)
	clear(t.delay)
}

// SetDelay makes the links between a and b (both directions) slow by d; what slow means is the
// network's to say.
func (t *Table) SetDelay(a, b string, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.delay == nil {
		t.delay = make(map[link]time.Duration)
	}
	t.delay[link{a, b}] = d
	t.delay[link{b, a}] = d
}

// IsCut reports whether the direction from → to is cut.
func (t *Table) IsCut(from, to string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cut[link{from, to}]
}

// Blocked reports whether either direction between a and b is cut: a connection carries both,
// so it cannot be made or kept.
func (t *Table) Blocked(a, b string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cut[link{a, b}] || t.cut[link{b, a}]
}

// Delay returns the delay of the direction from → to (0: none).
func (t *Table) Delay(from, to string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.delay[link{from, to}]
}
