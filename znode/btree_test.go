package znode

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// kv is a test item: key k, payload v.
type kv struct{ k, v int }

func (x kv) key() int { return x.k }

// checkBtree verifies ordering, equal leaf depth and child counts, and returns the keys in order.
func checkBtree(t *testing.T, tr btree[int, kv]) []int {
	t.Helper()
	var keys []int
	leafDepth := -1
	var walk func(n *bnode[int, kv], depth int, root bool)
	walk = func(n *bnode[int, kv], depth int, root bool) {
		if !root && len(n.items) == 0 {
			t.Fatalf("empty non-root bnode at depth %d", depth)
		}
		if len(n.items) > maxItems {
			t.Fatalf("bnode with %d items > %d", len(n.items), maxItems)
		}
		if n.kids == nil {
			if leafDepth == -1 {
				leafDepth = depth
			} else if leafDepth != depth {
				t.Fatalf("leaves at depths %d and %d", leafDepth, depth)
			}
			for _, e := range n.items {
				keys = append(keys, e.k)
			}
			return
		}
		if len(n.kids) != len(n.items)+1 {
			t.Fatalf("bnode has %d items and %d kids", len(n.items), len(n.kids))
		}
		for i, e := range n.items {
			walk(n.kids[i], depth+1, false)
			keys = append(keys, e.k)
		}
		walk(n.kids[len(n.items)], depth+1, false)
	}
	if tr.root != nil {
		walk(tr.root, 0, true)
	}
	if !slices.IsSorted(keys) {
		t.Fatalf("keys out of order")
	}
	return keys
}

func TestBtreeRandomAgainstMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var tr btree[int, kv]
	model := map[int]int{}
	var versions []btree[int, kv]
	var snapshots []map[int]int
	for step := range 20000 {
		k := rng.IntN(3000)
		if rng.IntN(3) == 0 {
			var ok bool
			tr, ok = tr.delete(k)
			_, had := model[k]
			if ok != had {
				t.Fatalf("step %d: delete(%d) = %v; want %v", step, k, ok, had)
			}
			delete(model, k)
		} else {
			var replaced bool
			tr, replaced = tr.set(kv{k, step})
			_, had := model[k]
			if replaced != had {
				t.Fatalf("step %d: set(%d) replaced = %v; want %v", step, k, replaced, had)
			}
			model[k] = step
		}
		if step%97 == 0 {
			checkWeight(t, tr, model) // cached sums are reused by the next weighings
		}
		if step%1000 == 0 {
			versions = append(versions, tr)
			snapshots = append(snapshots, maps(model))
		}
	}
	keys := checkBtree(t, tr)
	if len(keys) != len(model) {
		t.Fatalf("tree has %d keys; model %d", len(keys), len(model))
	}
	for k, v := range model {
		if got, ok := tr.get(k); !ok || got.v != v {
			t.Fatalf("get(%d) = %d, %v; want %d", k, got.v, ok, v)
		}
	}
	// Old versions are unchanged by later writes.
	for i, old := range versions {
		keys := checkBtree(t, old)
		if len(keys) != len(snapshots[i]) {
			t.Fatalf("version %d has %d keys; want %d", i, len(keys), len(snapshots[i]))
		}
		checkWeight(t, old, snapshots[i])
		for k, v := range snapshots[i] {
			if got, ok := old.get(k); !ok || got.v != v {
				t.Fatalf("version %d: get(%d) = %d, %v; want %d", i, k, got.v, ok, v)
			}
		}
	}
	// Delete everything.
	for k := range model {
		tr, _ = tr.delete(k)
	}
	if !tr.empty() {
		t.Fatalf("tree not empty after deleting every key")
	}
}

// weighValue weighs a kv by its value, so that a replaced item changes the sum.
func weighValue(x kv) int64 { return int64(x.v) }

// checkWeight checks that weigh of tr is the sum of model's values.
func checkWeight(t *testing.T, tr btree[int, kv], model map[int]int) {
	t.Helper()
	var want, got int64
	for _, v := range model {
		want += int64(v)
	}
	if tr.root != nil {
		got = tr.root.weigh(weighValue)
	}
	if got != want {
		t.Fatalf("weigh = %d; want %d", got, want)
	}
}

// TestBtreeWeighTransient checks weigh over a transient's in-place inserts: a sum cached between
// them is not kept once the bnode changes.
func TestBtreeWeighTransient(t *testing.T) {
	tr := new(transient)
	var b btree[int, kv]
	model := map[int]int{}
	rng := rand.New(rand.NewPCG(3, 4))
	for step := range 3000 {
		k := rng.IntN(1000)
		b, _ = b.setIn(tr, kv{k, step})
		model[k] = step
		if step%13 == 0 {
			checkWeight(t, b, model)
		}
	}
	checkWeight(t, b, model)
}

func maps(m map[int]int) map[int]int {
	out := make(map[int]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func TestBtreeBuildAndAscendFrom(t *testing.T) {
	for _, n := range []int{0, 1, 31, 32, 33, 1000, 1023, 1024, 5000, 40000} {
		items := make([]kv, n)
		for i := range items {
			items[i] = kv{k: 2 * i, v: i}
		}
		tr := buildBtree[int](items)
		keys := checkBtree(t, tr)
		if len(keys) != n {
			t.Fatalf("build(%d) holds %d keys", n, len(keys))
		}
		for _, from := range []int{-1, 0, 1, 7, n, 2*n - 2, 2 * n} {
			var got []int
			tr.ascendFrom(from, func(x kv) bool {
				got = append(got, x.k)
				return len(got) < 5
			})
			var want []int
			for k := max(0, from+from%2); k < 2*n && len(want) < 5; k += 2 {
				want = append(want, k)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("n=%d ascendFrom(%d) = %v; want %v", n, from, got, want)
			}
			// In runs, to the end and stopped early, the items are the same in the same order.
			var all, runs []int
			tr.ascendFrom(from, func(x kv) bool { all = append(all, x.k); return true })
			if tr.root != nil {
				tr.root.ascendRunsFrom(from, func(run []kv) bool {
					for _, x := range run {
						runs = append(runs, x.k)
					}
					return true
				})
			}
			if !slices.Equal(runs, all) {
				t.Fatalf("n=%d ascendRunsFrom(%d) gave %d items; ascendFrom %d", n, from, len(runs), len(all))
			}
			calls := 0
			if tr.root != nil {
				ranToEnd := tr.root.ascendRunsFrom(from, func([]kv) bool { calls++; return false })
				if ranToEnd != (len(all) == 0) {
					t.Fatalf("n=%d ascendRunsFrom(%d) stopped at once reports ran to the end = %v", n, from, ranToEnd)
				}
			}
			if calls > 1 {
				t.Fatalf("n=%d ascendRunsFrom(%d) ran on after fn returned false", n, from)
			}
		}
		// A built tree stays valid through deletes and inserts.
		rng := rand.New(rand.NewPCG(uint64(n), 9))
		for range 2 * n {
			if rng.IntN(2) == 0 {
				tr, _ = tr.delete(2 * rng.IntN(n+1))
			} else {
				tr, _ = tr.set(kv{rng.IntN(2*n + 1), 0})
			}
		}
		checkBtree(t, tr)
	}
}
