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

// setupPair makes /p0, /p1 and /p2 in both trees, at zxids 1 to 6, with /p1 a quota root, so that
// creates and setData under it also rewrite its stats node.
func setupPair(t *testing.T, fast, slow *Tree) {
	t.Helper()
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
}

// A multi changes its own copies in place (transients), which must be invisible: every multi
// leaves the tree exactly as copying every change does, results included, and never changes a
// View that was published before it, whether it succeeds or fails.
func TestMultiTransientsMatchCopying(t *testing.T) {
	fast, slow := New(), New()
	slow.noTransients = true
	setupPair(t, fast, slow)
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
			t2 := &Tree{noTransients: copying}
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

// A rewrite that reuses find's walk (setData, setACL, create's parent, delete's parent, session
// closes and reaping) leaves the tree exactly as a fresh walk from the root does, through single
// ops, multis, closed sessions and deep paths.
func TestWalkReuseMatchesFreshWalks(t *testing.T) {
	fast, slow := New(), New()
	slow.freshWalks = true
	zxid := int64(0)
	apply := func(txn *Txn) {
		t.Helper()
		zxid++
		got, want := fast.Apply(zxid, txn), slow.Apply(zxid, txn)
		if g, w := resultString(got), resultString(want); g != w {
			t.Fatalf("zxid %d (%v): reusing walks gave %s; fresh walks give %s", zxid, txn.Op, g, w)
		}
		if !bytes.Equal(snapshotBytes(t, fast.View()), snapshotBytes(t, slow.View())) {
			t.Fatalf("zxid %d (%v): the trees differ", zxid, txn.Op)
		}
		checkInvariants(t, fast.View())
	}
	create := func(path string, flags jute.CreateMode, session int64) {
		apply(&Txn{Time: zxid, Session: session, Op: jute.OpCreate, Req: &jute.CreateRequest{Path: path, ACL: worldAll, Flags: flags}})
	}
	for _, p := range []string{"/p0", "/p1", "/p2", "/p1/deep", "/p1/deep/er"} {
		create(p, 0, 0)
	}
	for s := int64(1); s <= 3; s++ {
		apply(&Txn{Time: zxid, Op: jute.OpCreateSession, Req: &CreateSession{ID: s, Timeout: 30000}})
	}
	r := rand.New(rand.NewPCG(3, 5))
	path := func() string {
		return []string{"/p0", "/p1", "/p2", "/p1/deep", "/p1/deep/er"}[r.IntN(5)] + fmt.Sprintf("/n%02d", r.IntN(30))
	}
	for round := range 600 {
		switch k := r.IntN(8); k {
		case 0, 1:
			create(path(), jute.CreateMode(r.IntN(4)), 1+int64(r.IntN(3))) // persistent, ephemeral, and their sequential kinds
		case 2:
			apply(&Txn{Time: zxid, Op: jute.OpDelete, Req: &jute.DeleteRequest{Path: path(), Version: -1}})
		case 3:
			apply(&Txn{Time: zxid, Op: jute.OpSetData, Req: &jute.SetDataRequest{Path: path(), Data: []byte{byte(round)}, Version: -1}})
		case 4:
			apply(&Txn{Time: zxid, Op: jute.OpSetACL, Req: &jute.SetACLRequest{Path: path(), ACL: worldAll, Version: -1}})
		case 5:
			apply(&Txn{Time: zxid, Op: jute.OpMulti, Req: randomMulti(r, round)})
		case 6:
			if round%50 == 6 { // close a session with its ephemerals, then open it again
				s := 1 + int64(r.IntN(3))
				apply(&Txn{Time: zxid, Session: s, Op: jute.OpCloseSession})
				apply(&Txn{Time: zxid, Op: jute.OpCreateSession, Req: &CreateSession{ID: s, Timeout: 30000}})
			}
		default:
			apply(&Txn{Time: zxid, Op: jute.OpMulti, Req: &jute.MultiRequest{Ops: []jute.MultiOp{
				{Type: jute.OpSetData, Req: &jute.SetDataRequest{Path: "/p1/deep", Data: []byte("x"), Version: -1}},
				{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: fmt.Sprintf("/p1/deep/m%03d", round), ACL: worldAll}},
				{Type: jute.OpSetData, Req: &jute.SetDataRequest{Path: "/p1/deep", Data: []byte("y"), Version: -1}},
				{Type: jute.OpDelete, Req: &jute.DeleteRequest{Path: fmt.Sprintf("/p1/deep/m%03d", round), Version: -1}},
				{Type: jute.OpSetData, Req: &jute.SetDataRequest{Path: "/p1/deep/er", Data: []byte("z"), Version: -1}},
			}}})
		}
	}
	if n := fast.View().nodes; n < 100 {
		t.Fatalf("only %d nodes at the end; the test did not exercise the tree", n)
	}
}

// A walk is reused only until the tree changes: a second rewrite of the path found, or of its
// parent, walks again and sees the first rewrite's node.
func TestWalkReuseEndsAtRewrite(t *testing.T) {
	tr := New()
	for z, p := range []string{"/a", "/a/b"} {
		if res := tr.Apply(int64(z+1), &Txn{Op: jute.OpCreate, Req: &jute.CreateRequest{Path: p, ACL: worldAll}}); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	a := applier{t: tr, v: *tr.View(), zxid: 3, txn: &Txn{}}
	if a.find("/a/b") == nil {
		t.Fatal("find /a/b: not found")
	}
	setVersion := func(path string, v int32) (seen int32) {
		a.rewrite(path, func(p *node) *node {
			seen = p.version()
			c := *p
			c.x = c.ext()
			c.x.version = v
			return &c
		})
		return seen
	}
	setVersion("/a/b", 7)
	if seen := setVersion("/a/b", 8); seen != 7 {
		t.Fatalf("the second rewrite of /a/b saw version %d, want the first rewrite's 7", seen)
	}
	if a.find("/a/b") == nil {
		t.Fatal("find /a/b again: not found")
	}
	setVersion("/a", 5)
	if seen := setVersion("/a", 6); seen != 5 {
		t.Fatalf("the second rewrite of /a saw version %d, want 5", seen)
	}
	if n := a.v.lookup("/a/b"); n == nil || n.version() != 8 {
		t.Fatalf("/a/b lost its rewrite: %+v", n)
	}
	// Only the parent's walk is reused: rewriting the root's child after finding a grandchild
	// rewrites that child, not the grandchild's parent.
	if a.find("/a/b") == nil {
		t.Fatal("find /a/b a third time: not found")
	}
	if seen := setVersion("/a", 9); seen != 6 {
		t.Fatalf("rewriting /a after finding /a/b saw version %d, want /a's 6", seen)
	}
	if res := tr.Apply(4, &Txn{Op: jute.OpCreate, Req: &jute.CreateRequest{Path: "/a/b/c", ACL: worldAll}}); res.Err != nil {
		t.Fatal(res.Err)
	}
	a = applier{t: tr, v: *tr.View(), zxid: 5, txn: &Txn{}}
	if a.find("/a/b/c") == nil {
		t.Fatal("find /a/b/c: not found")
	}
	if seen := setVersion("/a", 11); seen != 0 {
		t.Fatalf("rewriting /a after finding /a/b/c saw version %d, want /a's 0", seen)
	}
	if n := a.v.lookup("/a/b"); n == nil || n.version() != 0 {
		t.Fatalf("rewriting /a after finding /a/b/c changed /a/b: %+v", n)
	}
}
