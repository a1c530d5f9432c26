package znode

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/zkd-io/zkd/jute"
)

// randomTxn returns one transaction of a mix that batches must get right: creates of every kind
// (under a quota root too), setData and deletes that succeed and that fail, setACL, multis, and
// sessions opened and closed with their ephemerals.
func randomTxn(r *rand.Rand, step int) *Txn {
	parent := fmt.Sprintf("/p%d", r.IntN(3))
	name := fmt.Sprintf("%s/n%02d", parent, r.IntN(40)) // collide often: exists, missing, not empty
	data := bytes.Repeat([]byte{byte('a' + step%26)}, r.IntN(50))
	switch k := r.IntN(20); {
	case k < 5:
		return &Txn{Op: jute.OpCreate, Req: &jute.CreateRequest{Path: name, Data: data, ACL: worldAll}}
	case k < 6:
		return &Txn{Op: jute.OpCreate2, Req: &jute.CreateRequest{Path: name + "/kid", Data: data, ACL: worldAll}}
	case k < 7:
		return &Txn{Op: jute.OpCreate, Req: &jute.CreateRequest{Path: parent + "/s", ACL: worldAll, Flags: jute.ModePersistentSequential}}
	case k < 8:
		return &Txn{Op: jute.OpCreateContainer, Req: &jute.CreateRequest{Path: name, Data: data, ACL: worldAll, Flags: jute.ModeContainer}}
	case k < 9:
		return &Txn{Op: jute.OpCreateTTL, Req: &jute.CreateTTLRequest{Path: name, Data: data, ACL: worldAll, Flags: jute.ModePersistentWithTTL, TTL: 1000}}
	case k < 10:
		id := int64(1 + r.IntN(3))
		return &Txn{Op: jute.OpCreate, Session: id, Req: &jute.CreateRequest{Path: name + "-e", Data: data, ACL: worldAll, Flags: jute.ModeEphemeral}}
	case k < 13:
		version := int32(-1)
		if r.IntN(4) == 0 {
			version = int32(r.IntN(3)) // sometimes right, often a bad version
		}
		target := name
		if r.IntN(3) == 0 {
			target = parent
		}
		return &Txn{Op: jute.OpSetData, Req: &jute.SetDataRequest{Path: target, Data: data, Version: version}}
	case k < 15:
		return &Txn{Op: jute.OpDelete, Req: &jute.DeleteRequest{Path: name, Version: -1}}
	case k < 16:
		return &Txn{Op: jute.OpSetACL, Req: &jute.SetACLRequest{Path: name, ACL: worldAll, Version: -1}}
	case k < 18:
		return &Txn{Op: jute.OpMulti, Req: randomMulti(r, step)}
	case k < 19:
		return &Txn{Op: jute.OpCreateSession, Req: &CreateSession{ID: int64(1 + r.IntN(3)), Timeout: 10000, Passwd: make([]byte, 16)}}
	default:
		return &Txn{Op: jute.OpCloseSession, Req: &CloseSessions{IDs: []int64{int64(1 + r.IntN(3))}}}
	}
}

// A batch changes its own copies in place, which must be invisible: a run of transactions applied
// as one batch gives the same results and leaves the same tree as applying each alone with every
// change copied, and no View published before the batch changes, whatever fails inside it.
func TestBatchMatchesSingleApplies(t *testing.T) {
	fast, slow := New(), New()
	slow.noTransients = true
	setupPair(t, fast, slow)
	zxid := int64(6)
	r := rand.New(rand.NewPCG(3, 5))
	kinds := map[string]int{}
	for round := range 400 {
		before := fast.View()
		beforeBytes := snapshotBytes(t, before)
		b := fast.Batch()
		n := 1 + r.IntN(24)
		for i := range n {
			zxid++
			txn := randomTxn(r, round*100+i)
			txn.Time = zxid
			got := b.Apply(zxid, txn)
			want := slow.Apply(zxid, txn)
			if g, w := resultString(got), resultString(want); g != w {
				t.Fatalf("round %d, txn %d (%v): in a batch %s; alone and copying %s", round, i, txn.Op, g, w)
			}
			outcome := "ok"
			if got.Err != nil {
				outcome = "failed"
			} else if m, _ := got.Resp.(*jute.MultiResponse); m != nil && len(m.Results) > 0 && m.Results[0].Type == jute.OpError {
				outcome = "failed"
			}
			kinds[fmt.Sprintf("%v %s", txn.Op, outcome)]++
		}
		if fast.View() != before {
			t.Fatalf("round %d: the batch was visible before Publish", round)
		}
		v := b.Publish()
		if fast.View() != v || v.Zxid() != zxid {
			t.Fatalf("round %d: Publish gave zxid %d; the tree shows zxid %d, want %d", round, v.Zxid(), fast.View().Zxid(), zxid)
		}
		if !bytes.Equal(snapshotBytes(t, before), beforeBytes) {
			t.Fatalf("round %d: the batch changed the View published before it", round)
		}
		if !bytes.Equal(snapshotBytes(t, v), snapshotBytes(t, slow.View())) {
			t.Fatalf("round %d: the trees differ after the batch", round)
		}
		checkInvariants(t, v)
	}
	t.Logf("%d nodes; %v", fast.View().nodes, kinds)
	for _, k := range []string{"create ok", "create failed", "setData ok", "setData failed", "delete ok", "delete failed", "multi ok", "multi failed"} {
		if kinds[k] < 20 {
			t.Errorf("only %d transactions were %q; the test needs many of each", kinds[k], k)
		}
	}
}

// A batch of creates under one parent copies the ancestors once, not once per create.
func TestBatchCopiesAncestorsOnce(t *testing.T) {
	tr := New()
	tr.Apply(1, &Txn{Time: 1, Op: jute.OpCreate, Req: &jute.CreateRequest{Path: "/a", ACL: worldAll}})
	tr.Apply(2, &Txn{Time: 2, Op: jute.OpCreate, Req: &jute.CreateRequest{Path: "/a/b", ACL: worldAll}})
	reqs := make([]*jute.CreateRequest, 100)
	for i := range reqs {
		reqs[i] = &jute.CreateRequest{Path: fmt.Sprintf("/a/b/n%03d", i), Data: make([]byte, 8), ACL: worldAll}
	}
	measure := func(copying bool) float64 {
		return testing.AllocsPerRun(5, func() {
			t2 := &Tree{noTransients: copying}
			t2.cur.Store(tr.View())
			t2.acls = tr.acls
			b := t2.Batch()
			for i, req := range reqs {
				if res := b.Apply(int64(3+i), &Txn{Time: 3, Op: jute.OpCreate, Req: req}); res.Err != nil {
					t.Fatal(res.Err)
				}
			}
			b.Publish()
		})
	}
	in, copied := measure(false), measure(true)
	t.Logf("allocations for a batch of 100 creates: %.0f in place, %.0f copying", in, copied)
	if in > copied*2/3 {
		t.Fatalf("a batch of 100 creates made %.0f allocations; copying every change makes %.0f", in, copied)
	}
}

// BenchmarkApplyBatch applies setData and creates in batches of 10 under one parent of 1000
// children (zkbench's set and create), in place and copying every change.
func BenchmarkApplyBatch(b *testing.B) {
	for _, op := range []string{"setData", "create"} {
		for _, copying := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/copying=%v", op, copying), func(b *testing.B) {
				tr := New()
				tr.noTransients = copying
				data := bytes.Repeat([]byte{'m'}, 128)
				zxid := int64(1)
				tr.Apply(zxid, &Txn{Op: jute.OpCreate, Req: &jute.CreateRequest{Path: "/zkbench", ACL: worldAll}})
				keys := make([]string, 1000)
				for k := range keys {
					zxid++
					keys[k] = fmt.Sprintf("/zkbench/key-%06d", k)
					tr.Apply(zxid, &Txn{Op: jute.OpCreate, Req: &jute.CreateRequest{Path: keys[k], Data: data, ACL: worldAll}})
				}
				i := 0
				b.ReportAllocs()
				cpu0 := cpuTime()
				for b.Loop() {
					bt := tr.Batch()
					for range 10 {
						zxid++
						i++
						txn := &Txn{Time: zxid, Op: jute.OpSetData, Req: &jute.SetDataRequest{Path: keys[(i*7919)%len(keys)], Data: data, Version: -1}}
						if op == "create" {
							txn = &Txn{Time: zxid, Op: jute.OpCreate, Req: &jute.CreateRequest{Path: "/zkbench/c-" + strconv.Itoa(i), Data: data, ACL: worldAll}}
						}
						if res := bt.Apply(zxid, txn); res.Err != nil {
							b.Fatal(res.Err)
						}
					}
					bt.Publish()
				}
				reportCPU(b, cpu0)
			})
		}
	}
}
