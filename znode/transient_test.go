package znode

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zkd-io/zkd/jute"
)

// randomMulti returns a multi of creates (some under nodes the same multi creates, enough under one
// parent to split its child B-tree), setData (some twice on the same node), deletes and checks,
// and now and then an op that fails, which must undo the whole multi.
func randomMulti(r *rand.Rand, round int) *jute.MultiRequest {
	var ops []jute.MultiOp
	parent := fmt.Sprintf("/p%d", r.IntN(3))
	for i := range 5 + r.IntN(60) {
		name := fmt.Sprintf("%s/r%03d-%03d", parent, round, i)
		switch k := r.IntN(10); {
		case k < 5:
			ops = append(ops, jute.MultiOp{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: name, Data: []byte{byte(i)}, ACL: worldAll}})
			if r.IntN(4) == 0 {
				ops = append(ops, jute.MultiOp{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: name + "/kid", Data: []byte("k"), ACL: worldAll}})
			}
		case k < 8:
			target := fmt.Sprintf("/p%d", r.IntN(3))
			for range 1 + r.IntN(2) {
				data := bytes.Repeat([]byte{'d'}, r.IntN(40)) // sizes differ, so data size accounting shows
				ops = append(ops, jute.MultiOp{Type: jute.OpSetData, Req: &jute.SetDataRequest{Path: target, Data: data, Version: -1}})
			}
		case k < 9:
			ops = append(ops, jute.MultiOp{Type: jute.OpCheck, Req: &jute.CheckVersionRequest{Path: parent, Version: -1}})
		default:
			ops = append(ops, jute.MultiOp{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: name + "-seq", ACL: worldAll, Flags: jute.ModePersistentSequential}})
		}
	}
	if r.IntN(3) == 0 {
		// A node an earlier round may have made (a childless one, unless it got a kid); when it
		// is missing or has children the multi fails.
		victim := fmt.Sprintf("%s/r%03d-%03d", parent, r.IntN(round+1), r.IntN(20))
		at := r.IntN(len(ops) + 1)
		ops = slices.Insert(ops, at, jute.MultiOp{Type: jute.OpDelete, Req: &jute.DeleteRequest{Path: victim, Version: -1}})
	}
	if r.IntN(6) == 0 {
		ops = append(ops, jute.MultiOp{Type: jute.OpSetData, Req: &jute.SetDataRequest{Path: parent, Version: 1 << 30}})
	}
	return &jute.MultiRequest{Ops: ops}
}

// A multi changes its own copies in place (transients), which must be invisible: every multi
// leaves the tree exactly as copying every change does, results included, and never changes a
// View that was published before it, whether it succeeds or fails.
func TestMultiTransientsMatchCopying(t *testing.T) {
	fast, slow := New(), New()
	slow.copyMultis = true
	// /p1 is a quota root, so its creates and setData also rewrite its stats node.
	setup := []struct{ path, data string }{
		{"/p0", ""}, {"/p1", ""}, {"/p2", ""},
		{"/zookeeper/quota/p1", ""},
		{"/zookeeper/quota/p1/zookeeper_limits", "count=1000000,bytes=100000000"},
		{"/zookeeper/quota/p1/zookeeper_stats", "count=1,bytes=0"},
	}
	for i, tr := range []*Tree{fast, slow} {
		for z, c := range setup {
			res := tr.Apply(int64(z+1), &Txn{Time: 1, Op: jute.OpCreate, Req: &jute.CreateRequest{Path: c.path, Data: []byte(c.data), ACL: worldAll}})
			if res.Err != nil {
				t.Fatalf("tree %d: %v", i, res.Err)
			}
		}
	}
	r := rand.New(rand.NewPCG(7, 11))
	failed, ok := 0, 0
	for round := range 300 {
		req := randomMulti(r, round)
		zxid := int64(round + 10)
		before := fast.View()
		beforeBytes := snapshotBytes(t, before)
		got := fast.Apply(zxid, &Txn{Time: zxid, Op: jute.OpMulti, Req: req})
		want := slow.Apply(zxid, &Txn{Time: zxid, Op: jute.OpMulti, Req: req})
		if g, w := resultString(got), resultString(want); g != w {
			t.Fatalf("round %d: transient multi gave %s; copying gives %s", round, g, w)
		}
		if !bytes.Equal(snapshotBytes(t, before), beforeBytes) {
			t.Fatalf("round %d: the multi changed the View published before it", round)
		}
		if !bytes.Equal(snapshotBytes(t, fast.View()), snapshotBytes(t, slow.View())) {
			t.Fatalf("round %d: the trees differ after the multi", round)
		}
		checkInvariants(t, fast.View())
		if m, _ := got.Resp.(*jute.MultiResponse); m != nil && len(m.Results) > 0 && m.Results[0].Type == jute.OpError {
			failed++
		} else {
			ok++
		}
	}
	t.Logf("%d failed, %d ok, %d nodes", failed, ok, fast.View().nodes)
	if failed < 20 || ok < 20 {
		t.Fatalf("%d multis failed and %d succeeded; the test needs many of each", failed, ok)
	}
	if n := fast.View().nodes; n < 3000 {
		t.Fatalf("only %d nodes after the rounds; the child B-trees were not exercised", n)
	}
}

// A multi of creates under one parent copies the ancestors once, not once per create.
func TestMultiCopiesAncestorsOnce(t *testing.T) {
	tr := New()
	tr.Apply(1, &Txn{Time: 1, Op: jute.OpCreate, Req: &jute.CreateRequest{Path: "/a", ACL: worldAll}})
	tr.Apply(2, &Txn{Time: 2, Op: jute.OpCreate, Req: &jute.CreateRequest{Path: "/a/b", ACL: worldAll}})
	var ops []jute.MultiOp
	for i := range 100 {
		ops = append(ops, jute.MultiOp{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: fmt.Sprintf("/a/b/n%03d", i), Data: make([]byte, 8), ACL: worldAll}})
	}
	req := &jute.MultiRequest{Ops: ops}
	zxid := int64(3)
	measure := func(copying bool) float64 {
		return testing.AllocsPerRun(5, func() {
			t2 := &Tree{copyMultis: copying}
			t2.cur.Store(tr.View())
			t2.acls = tr.acls
			t2.Apply(zxid, &Txn{Time: zxid, Op: jute.OpMulti, Req: req})
		})
	}
	in, copied := measure(false), measure(true)
	t.Logf("allocations for a multi of 100 creates: %.0f in place, %.0f copying", in, copied)
	if in > copied*2/3 {
		t.Fatalf("a multi of 100 creates made %.0f allocations; copying every change makes %.0f", in, copied)
	}
}
