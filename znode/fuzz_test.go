package znode

import (
	"bytes"
	"testing"

	"github.com/zkd-io/zkd/jute"
)

// badInputTree is a small tree with a session, an ephemeral, a container and ACL variety, for
// feeding arbitrary requests to.
func badInputTree(t testing.TB) *Tree {
	t.Helper()
	tr := New()
	txns := randomTxns(3, 300)
	for i := range txns {
		tr.Apply(int64(i+1), &txns[i])
	}
	return tr
}

var fuzzOps = []jute.Op{
	jute.OpCreate, jute.OpCreate2, jute.OpCreateContainer, jute.OpCreateTTL, jute.OpDelete,
	jute.OpSetData, jute.OpSetACL, jute.OpMulti, jute.OpCheck, jute.OpDeleteContainer,
	jute.OpExists, jute.OpGetData, jute.OpGetACL, jute.OpGetChildren, jute.OpGetChildren2,
	jute.OpGetAllChildrenNumber, jute.OpGetEphemerals, jute.OpMultiRead, jute.OpSync,
}

// FuzzApply decodes arbitrary bytes as a request of some op and applies or reads it: nothing a
// client can send may panic, and a write always advances the zxid.
func FuzzApply(f *testing.F) {
	seed := func(op jute.Op, r jute.Record) { f.Add(byte(0), uint8(indexOp(op)), jute.Marshal(nil, r)) }
	seed(jute.OpCreate, &jute.CreateRequest{Path: "/a/b", Data: []byte("x"), ACL: worldAll, Flags: 3})
	seed(jute.OpCreateTTL, &jute.CreateTTLRequest{Path: "/t", ACL: worldAll, Flags: 5, TTL: 10})
	seed(jute.OpSetACL, &jute.SetACLRequest{Path: "/a", ACL: []jute.ACL{{Perms: 31, ID: jute.Id{Scheme: "ip", ID: "10.0.0.0/8"}}}, Version: -1})
	seed(jute.OpMulti, &jute.MultiRequest{Ops: []jute.MultiOp{
		{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: "/m", ACL: worldAll}},
		{Type: jute.OpCheck, Req: &jute.CheckVersionRequest{Path: "/m", Version: 0}},
		{Type: jute.OpDelete, Req: &jute.DeleteRequest{Path: "/m", Version: -1}},
	}})
	seed(jute.OpMultiRead, &jute.MultiRequest{Ops: []jute.MultiOp{{Type: jute.OpGetData, Req: &jute.GetDataRequest{Path: "/a"}}}})
	seed(jute.OpGetEphemerals, &jute.GetEphemeralsRequest{PrefixPath: "/a"})
	tr := badInputTree(f)
	f.Fuzz(func(t *testing.T, authSel byte, opSel uint8, body []byte) {
		op := fuzzOps[int(opSel)%len(fuzzOps)]
		req := jute.NewRequest(op)
		if req == nil || jute.Unmarshal(body, 0, req) != nil {
			return
		}
		auth := [][]jute.Id{nil, {{Scheme: "digest", ID: DigestID("u", "p")}}, {{Scheme: "ip", ID: "10.1.2.3"}}, {{Scheme: "super"}}}[authSel%4]
		if op.IsWrite() {
			local := &Tree{}
			local.cur.Store(tr.View())
			zxid := local.LastZxid() + 1
			res := local.Apply(zxid, &Txn{Time: 2_000_000, Session: int64(authSel % 5), Auth: auth, Op: op, Req: req})
			if res.Zxid != zxid || local.LastZxid() != zxid {
				t.Fatalf("zxid not advanced")
			}
			if c, ok := res.Err.(jute.Code); res.Err != nil && (!ok || !c.Known()) {
				t.Fatalf("error %v is not a known code", res.Err)
			}
			checkBatched(t, tr, &Txn{Time: 2_000_000, Session: int64(authSel % 5), Auth: auth, Op: op, Req: req})
			return
		}
		_, err := tr.View().Read(int64(authSel%5), auth, op, req)
		if c, ok := err.(jute.Code); err != nil && (!ok || !c.Known()) {
			t.Fatalf("error %v is not a known code", err)
		}
	})
}

// checkBatched applies txn inside a batch, between writes that leave the root and the nodes
// under it as the batch's own copies, and checks that it gives what applying each alone with
// every change copied gives, without changing the tree's published View.
func checkBatched(t *testing.T, tr *Tree, txn *Txn) {
	t.Helper()
	var around []*Txn
	for _, p := range []string{"/", "/a", "/b", "/a/b"} {
		around = append(around, &Txn{Time: 1_000_000, Op: jute.OpSetData, Req: &jute.SetDataRequest{Path: p, Data: []byte("w"), Version: -1}})
	}
	txns := append(append(append([]*Txn{}, around...), txn), around...)
	before := snapshotBytes(t, tr.View())
	fast := &Tree{}
	fast.cur.Store(tr.View())
	slow := &Tree{noTransients: true}
	slow.cur.Store(tr.View())
	b := fast.Batch()
	zxid := tr.LastZxid()
	for i, x := range txns {
		zxid++
		got, want := resultString(b.Apply(zxid, x)), resultString(slow.Apply(zxid, x))
		if got != want {
			t.Fatalf("txn %d in a batch gave %s; alone and copying %s", i, got, want)
		}
	}
	b.Publish()
	if !bytes.Equal(snapshotBytes(t, fast.View()), snapshotBytes(t, slow.View())) {
		t.Fatalf("the batch left a different tree")
	}
	if !bytes.Equal(snapshotBytes(t, tr.View()), before) {
		t.Fatalf("the batch changed the View it started from")
	}
}

func indexOp(op jute.Op) int {
	for i, o := range fuzzOps {
		if o == op {
			return i
		}
	}
	return 0
}

func TestMalformedTransactions(t *testing.T) {
	tr := New()
	for i, txn := range []*Txn{
		nil,
		{Op: jute.OpCreate, Req: (*jute.CreateRequest)(nil)},
		{Op: jute.OpMulti, Req: &jute.MultiRequest{Ops: []jute.MultiOp{{Type: jute.OpCreate, Req: (*jute.CreateRequest)(nil)}}}},
		{Op: jute.OpMulti, Req: &jute.MultiRequest{Ops: []jute.MultiOp{{Type: jute.OpCreate, Req: &jute.DeleteRequest{}}}}},
		{Op: jute.OpCloseSession, Req: (*CloseSessions)(nil)},
		{Op: jute.OpDeleteContainer, Req: "nonsense"},
		{Op: jute.OpCreateSession, Req: nil},
		{Op: jute.Op(12345)},
	} {
		res := tr.Apply(int64(i+1), txn)
		if res.Err == nil && res.Resp != nil {
			if mr, ok := res.Resp.(*jute.MultiResponse); !ok || mr.Results[0].Err == 0 {
				t.Errorf("txn %d: Apply = %+v; want a failure", i, res)
			}
		} else if res.Err == nil {
			t.Errorf("txn %d: Apply succeeded", i)
		}
		if tr.LastZxid() != int64(i+1) {
			t.Fatalf("txn %d did not use its zxid", i)
		}
	}
	if _, err := tr.View().Read(0, nil, jute.OpMultiRead, &jute.MultiRequest{Ops: []jute.MultiOp{{Type: jute.OpGetData, Req: (*jute.GetDataRequest)(nil)}}}); err == nil {
		t.Errorf("multiRead with a nil op succeeded")
	}
	// A long ACL of duplicates collapses to one entry.
	long := make([]jute.ACL, 10000)
	for i := range long {
		long[i] = worldAll[0]
	}
	if got, err := fixupACL(long, nil, false); err != nil || len(got) != 1 {
		t.Errorf("fixupACL of 10000 duplicates = %d entries, %v", len(got), err)
	}
}
