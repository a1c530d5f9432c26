package znode

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/zkd-io/zkd/jute"
)

// setQuota does what zkCli's setquota does for path q: it creates the node chain under
// /zookeeper/quota, then zookeeper_limits with limits and zookeeper_stats with stats (which the
// tree overwrites with the subtree's real usage).
func (h *harness) setQuota(q, limits, stats string) {
	h.t.Helper()
	p := quotaPath
	for _, seg := range strings.Split(q[1:], "/") {
		p += "/" + seg
		if _, err := h.create(p, nil, 0); err != nil && err != ErrNodeExists {
			h.t.Fatalf("create %s: %v", p, err)
		}
	}
	if _, err := h.create(p+"/"+quotaLimitsName, []byte(limits), 0); err != nil {
		h.t.Fatalf("create limits of %s: %v", q, err)
	}
	if _, err := h.create(p+"/"+quotaStatsName, []byte(stats), 0); err != nil {
		h.t.Fatalf("create stats of %s: %v", q, err)
	}
}

// statsText returns the data of quota root q's stats node, or "<none>".
func (h *harness) statsText(q string) string {
	h.t.Helper()
	return statsIn(h.tree.View(), q)
}

func statsIn(v *View, q string) string {
	n := v.lookup(quotaStatsPath(q))
	if n == nil {
		return "<none>"
	}
	return string(n.data())
}

func (h *harness) mustApply(op jute.Op, req any) Result {
	h.t.Helper()
	res := h.apply(op, req)
	if res.Err != nil {
		h.t.Fatalf("%v %+v = %v", op, req, res.Err)
	}
	return res
}

func (h *harness) mk(path, data string) {
	h.t.Helper()
	if _, err := h.create(path, []byte(data), 0); err != nil {
		h.t.Fatalf("create %s: %v", path, err)
	}
}

func (h *harness) set(path, data string) {
	h.t.Helper()
	h.mustApply(jute.OpSetData, &jute.SetDataRequest{Path: path, Data: []byte(data), Version: -1})
}

func (h *harness) del(path string) {
	h.t.Helper()
	h.mustApply(jute.OpDelete, &jute.DeleteRequest{Path: path, Version: -1})
}

func TestQuotaAccounting(t *testing.T) {
	tests := []struct {
		name  string
		run   func(h *harness)
		want  map[string]string // quota root -> stats text
		roots []string
	}{
		{"creating stats counts the subtree", func(h *harness) {
			h.mk("/a", "hello")
			h.mk("/a/b", "xy")
			h.mk("/a/b/c", "")
			h.mk("/ab", "not me")
			h.setQuota("/a", "count=10,bytes=-1", "count=99,bytes=99")
		}, map[string]string{"/a": "count=3,bytes=7"}, []string{"/a"}},
		{"stats of a missing path count nothing", func(h *harness) {
			h.setQuota("/nothere", "count=10,bytes=-1", "junk")
		}, map[string]string{"/nothere": "count=0,bytes=0"}, []string{"/nothere"}},
		{"create", func(h *harness) {
			h.mk("/a", "")
			h.setQuota("/a", "count=10,bytes=-1", "")
			h.mk("/a/b", "hello")
			h.mk("/a/b/c", "xy")
			h.mk("/a/d", "")
		}, map[string]string{"/a": "count=4,bytes=7"}, []string{"/a"}},
		{"create2, container and TTL creates", func(h *harness) {
			h.mk("/a", "")
			h.setQuota("/a", "count=10,bytes=-1", "")
			h.mustApply(jute.OpCreate2, &jute.CreateRequest{Path: "/a/s-", Data: []byte("12"), ACL: worldAll, Flags: jute.ModePersistentSequential})
			h.mustApply(jute.OpCreateContainer, &jute.CreateRequest{Path: "/a/c", Data: []byte("123"), ACL: worldAll, Flags: jute.ModeContainer})
			h.mustApply(jute.OpCreateTTL, &jute.CreateTTLRequest{Path: "/a/t", Data: []byte("1"), ACL: worldAll, Flags: jute.ModePersistentWithTTL, TTL: 10})
		}, map[string]string{"/a": "count=4,bytes=6"}, []string{"/a"}},
		{"delete", func(h *harness) {
			h.mk("/a", "")
			h.mk("/a/b", "hello")
			h.mk("/a/c", "xyz")
			h.setQuota("/a", "count=10,bytes=-1", "")
			h.del("/a/b")
		}, map[string]string{"/a": "count=2,bytes=3"}, []string{"/a"}},
		{"deleting the root itself", func(h *harness) {
			h.mk("/a", "abc")
			h.setQuota("/a", "count=10,bytes=-1", "")
			h.del("/a")
		}, map[string]string{"/a": "count=0,bytes=0"}, []string{"/a"}},
		{"setData", func(h *harness) {
			h.mk("/a", "")
			h.mk("/a/b", "hello")
			h.setQuota("/a", "count=10,bytes=-1", "")
			h.set("/a/b", "hi")
			h.set("/a", "12345678")
			h.mustApply(jute.OpSetData, &jute.SetDataRequest{Path: "/a/b", Data: nil, Version: -1})
		}, map[string]string{"/a": "count=2,bytes=8"}, []string{"/a"}},
		{"failed writes change nothing", func(h *harness) {
			h.mk("/a", "")
			h.mk("/a/b", "hello")
			h.setQuota("/a", "count=10,bytes=-1", "")
			for _, res := range []Result{
				h.apply(jute.OpCreate, &jute.CreateRequest{Path: "/a/b", Data: []byte("dup"), ACL: worldAll}),
				h.apply(jute.OpSetData, &jute.SetDataRequest{Path: "/a/b", Data: []byte("x"), Version: 7}),
				h.apply(jute.OpDelete, &jute.DeleteRequest{Path: "/a", Version: -1}),
			} {
				if res.Err == nil {
					h.t.Fatalf("write succeeded")
				}
			}
		}, map[string]string{"/a": "count=2,bytes=5"}, []string{"/a"}},
		{"multi", func(h *harness) {
			h.mk("/a", "")
			h.mk("/a/old", "1234")
			h.setQuota("/a", "count=10,bytes=-1", "")
			h.mustApply(jute.OpMulti, &jute.MultiRequest{Ops: []jute.MultiOp{
				{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: "/a/m", Data: []byte("abc"), ACL: worldAll}},
				{Type: jute.OpSetData, Req: &jute.SetDataRequest{Path: "/a/m", Data: []byte("abcdefg"), Version: -1}},
				{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: "/a/n", Data: []byte("z"), ACL: worldAll}},
				{Type: jute.OpDelete, Req: &jute.DeleteRequest{Path: "/a/old", Version: -1}},
				{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: "/elsewhere", Data: []byte("zzzz"), ACL: worldAll}},
			}})
		}, map[string]string{"/a": "count=3,bytes=8"}, []string{"/a"}},
		{"failed multi", func(h *harness) {
			h.mk("/a", "")
			h.setQuota("/a", "count=10,bytes=-1", "")
			res := h.apply(jute.OpMulti, &jute.MultiRequest{Ops: []jute.MultiOp{
				{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: "/a/m", Data: []byte("abc"), ACL: worldAll}},
				{Type: jute.OpCheck, Req: &jute.CheckVersionRequest{Path: "/a/m", Version: 5}},
			}})
			if r := res.Resp.(*jute.MultiResponse).Results; r[1].Err != jute.CodeBadVersion {
				h.t.Fatalf("multi results %+v", r)
			}
		}, map[string]string{"/a": "count=1,bytes=0"}, []string{"/a"}},
		{"quota nodes created in one multi", func(h *harness) {
			h.mk("/a", "ab")
			h.mustApply(jute.OpMulti, &jute.MultiRequest{Ops: []jute.MultiOp{
				{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: "/zookeeper/quota/a", ACL: worldAll}},
				{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: "/zookeeper/quota/a/zookeeper_limits", Data: []byte("count=1,bytes=1"), ACL: worldAll}},
				{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: "/zookeeper/quota/a/zookeeper_stats", ACL: worldAll}},
				{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: "/a/b", Data: []byte("cde"), ACL: worldAll}},
			}})
		}, map[string]string{"/a": "count=2,bytes=5"}, []string{"/a"}},
		{"ephemerals of a closed session", func(h *harness) {
			h.openSession(7)
			h.mk("/a", "")
			h.setQuota("/a", "count=10,bytes=-1", "")
			h.sess = 7
			h.mustApply(jute.OpCreate, &jute.CreateRequest{Path: "/a/e1", Data: []byte("123"), ACL: worldAll, Flags: jute.ModeEphemeral})
			h.mustApply(jute.OpCreate, &jute.CreateRequest{Path: "/a/e2", Data: []byte("45"), ACL: worldAll, Flags: jute.ModeEphemeral})
			h.mustApply(jute.OpCreate, &jute.CreateRequest{Path: "/out", Data: []byte("45"), ACL: worldAll, Flags: jute.ModeEphemeral})
			if got := h.statsText("/a"); got != "count=3,bytes=5" {
				h.t.Fatalf("before close: %q", got)
			}
			h.sess = 0
			h.mustApply(jute.OpCloseSession, &CloseSessions{IDs: []int64{7}})
		}, map[string]string{"/a": "count=1,bytes=0"}, []string{"/a"}},
		{"reaped containers", func(h *harness) {
			h.mk("/a", "")
			h.setQuota("/a", "count=10,bytes=-1", "")
			h.mustApply(jute.OpCreateContainer, &jute.CreateRequest{Path: "/a/c", Data: []byte("xyz"), ACL: worldAll, Flags: jute.ModeContainer})
			h.mk("/a/c/x", "")
			h.del("/a/c/x")
			h.mustApply(jute.OpDeleteContainer, &Reap{Paths: []string{"/a/c"}})
		}, map[string]string{"/a": "count=1,bytes=0"}, []string{"/a"}},
		{"nested roots: the longest wins", func(h *harness) {
			h.mk("/a", "")
			h.setQuota("/a", "count=10,bytes=-1", "")
			h.mk("/a/b", "12")
			h.setQuota("/a/b", "count=10,bytes=-1", "")
			h.mk("/a/b/c", "345")
			h.mk("/a/b/c/d", "6")
			h.mk("/a/x", "7890")
			h.set("/a/b", "")
		}, map[string]string{"/a": "count=3,bytes=6", "/a/b": "count=3,bytes=4"}, []string{"/a", "/a/b"}},
		{"sibling roots and shared name prefixes", func(h *harness) {
			h.mk("/a", "")
			h.mk("/ab", "")
			h.setQuota("/a", "count=10,bytes=-1", "")
			h.setQuota("/ab", "count=10,bytes=-1", "")
			h.mk("/a/x", "1")
			h.mk("/ab/x", "22")
			h.mk("/ab/y", "333")
			h.mk("/abc", "4444")
		}, map[string]string{"/a": "count=2,bytes=1", "/ab": "count=3,bytes=5"}, []string{"/a", "/ab"}},
		{"removing the limits node ends accounting", func(h *harness) {
			h.mk("/a", "")
			h.setQuota("/a", "count=10,bytes=-1", "")
			h.mk("/a/b", "1")
			h.del("/zookeeper/quota/a/zookeeper_limits")
			h.mk("/a/c", "22")
			h.del("/a/b")
		}, map[string]string{"/a": "count=2,bytes=1"}, nil},
		{"removing the inner limits gives the subtree back to the outer root", func(h *harness) {
			h.mk("/a", "")
			h.mk("/a/b", "")
			h.setQuota("/a", "count=10,bytes=-1", "")
			h.setQuota("/a/b", "count=10,bytes=-1", "")
			h.del("/zookeeper/quota/a/b/zookeeper_limits")
			h.mk("/a/b/c", "123")
		}, map[string]string{"/a": "count=3,bytes=3", "/a/b": "count=1,bytes=0"}, []string{"/a"}},
		{"limits without stats", func(h *harness) {
			h.mk("/a", "")
			h.mk("/zookeeper/quota/a", "")
			h.mk("/zookeeper/quota/a/zookeeper_limits", "count=1,bytes=1")
			h.mk("/a/b", "1")
			h.set("/a/b", "22")
			h.del("/a/b")
		}, map[string]string{"/a": "<none>"}, []string{"/a"}},
		{"stats without limits are only counted once", func(h *harness) {
			h.mk("/a", "abc")
			h.mk("/zookeeper/quota/a", "")
			h.mk("/zookeeper/quota/a/zookeeper_stats", "")
			h.mk("/a/b", "1")
		}, map[string]string{"/a": "count=1,bytes=3"}, nil},
		{"a limits node right under /zookeeper/quota is ignored", func(h *harness) {
			h.mk("/zookeeper/quota/zookeeper_limits", "count=1,bytes=1")
			h.mk("/zookeeper/quota/zookeeper_stats", "keep")
			h.mk("/a", "1")
		}, map[string]string{"": "keep"}, nil},
		{"a quota on /zookeeper covers the quota nodes themselves", func(h *harness) {
			h.setQuota("/zookeeper", "count=100,bytes=-1", "12")
			// The stats node was recounted with itself inside (/zookeeper, quota, config,
			// zookeeper/quota/zookeeper, its limits, its stats: 6 nodes, 18+2 bytes), then charged
			// for its own create: count 7, bytes 20+2.
			h.mk("/zookeeper/x", "abc")
		}, map[string]string{"/zookeeper": "count=8,bytes=25"}, []string{"/zookeeper"}},
		{"extra fields are kept, sorted", func(h *harness) {
			h.mk("/a", "")
			h.setQuota("/a", "count=10,bytes=-1", "")
			h.set("/zookeeper/quota/a/zookeeper_stats", "count=1,bytes=0=;zzz=5;aaa=2;;byteHardLimit==1")
			h.mk("/a/b", "xyz")
		}, map[string]string{"/a": "count=2,bytes=3=;aaa=2;byteHardLimit=-1;zzz=5"}, []string{"/a"}},
		{"unreadable stats text", func(h *harness) {
			h.mk("/a", "")
			h.setQuota("/a", "count=10,bytes=-1", "")
			h.set("/zookeeper/quota/a/zookeeper_stats", "count=x,hello,=,count=,bytes=4")
			h.mk("/a/b", "xyz")
		}, map[string]string{"/a": "count=0,bytes=7"}, []string{"/a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			tt.run(h)
			for q, want := range tt.want {
				if got := h.statsText(q); got != want {
					t.Errorf("stats of %s = %q; want %q", q, got, want)
				}
			}
			v := h.tree.View()
			var roots []string
			for _, q := range v.Quotas() {
				roots = append(roots, q.Path)
			}
			if !slices.Equal(roots, tt.roots) {
				t.Errorf("quota roots %q; want %q", roots, tt.roots)
			}
			checkInvariants(t, v)
			// A restored tree has the same quota roots and bytes.
			snap := snapshotBytes(t, v)
			r, err := ReadSnapshot(bytes.NewReader(snap))
			if err != nil {
				t.Fatalf("ReadSnapshot = %v", err)
			}
			if got := r.View().Quotas(); !slices.Equal(got, v.Quotas()) {
				t.Errorf("restored quotas %+v; want %+v", got, v.Quotas())
			}
			if r.View().DataSize() != v.DataSize() {
				t.Errorf("restored DataSize %d; live %d", r.View().DataSize(), v.DataSize())
			}
		})
	}
}

func TestQuotaStatsNodeKeepsItsStat(t *testing.T) {
	h := newHarness(t)
	h.mk("/a", "")
	h.now = 2000
	h.setQuota("/a", "count=10,bytes=-1", "count=1,bytes=0")
	sp := quotaStatsPath("/a")
	before := h.stat(sp)
	old := h.tree.View()
	h.now = 3000
	res := h.mustApply(jute.OpCreate, &jute.CreateRequest{Path: "/a/b", Data: []byte("hello"), ACL: worldAll})
	for _, ev := range res.Events {
		if strings.HasPrefix(ev.Path, quotaPath) {
			t.Errorf("event %v %s for the stats update", ev.Type, ev.Path)
		}
	}
	after := h.stat(sp)
	want := before
	want.DataLength = int32(len("count=2,bytes=5"))
	if after != want {
		t.Fatalf("stats node Stat %+v; want %+v (only dataLength changes)", after, want)
	}
	if got := statsIn(old, "/a"); got != "count=1,bytes=0" {
		t.Fatalf("an older view sees %q", got)
	}
	if got := h.statsText("/a"); got != "count=2,bytes=5" {
		t.Fatalf("stats %q", got)
	}
	res = h.mustApply(jute.OpSetData, &jute.SetDataRequest{Path: "/a/b", Data: []byte("hi"), Version: -1})
	if got := eventStrings(res.Events); !slices.Equal(got, []string{"NodeDataChanged /a/b"}) {
		t.Fatalf("setData events %q", got)
	}
}

func TestQuotasReport(t *testing.T) {
	h := newHarness(t)
	h.mk("/a", "xy")
	h.mk("/b", "")
	h.setQuota("/a", "count=10,bytes=100=;byteHardLimit=200;countHardLimit=20", "")
	h.setQuota("/b", "count=5", "")
	h.del("/zookeeper/quota/b/zookeeper_stats")
	want := []Quota{
		{Path: "/a", CountLimit: 10, BytesLimit: 100, CountHardLimit: 20, BytesHardLimit: 200, Count: 1, Bytes: 2},
		{Path: "/b", CountLimit: 5, BytesLimit: -1, CountHardLimit: -1, BytesHardLimit: -1, Count: -1, Bytes: -1},
	}
	if got := h.tree.View().Quotas(); !slices.Equal(got, want) {
		t.Fatalf("Quotas() = %+v; want %+v", got, want)
	}
	if got := New().View().Quotas(); got != nil {
		t.Fatalf("fresh tree Quotas() = %+v", got)
	}
}

func TestParseQuotaStats(t *testing.T) {
	tests := []struct{ in, out string }{
		{"", "count=-1,bytes=-1"},
		{"count=3,bytes=7", "count=3,bytes=7"},
		{"bytes=7;count=3", "count=3,bytes=7"},
		{"count=1,bytes=5=;countHardLimit=10;byteHardLimit=20", "count=1,bytes=5=;byteHardLimit=20;countHardLimit=10"},
		{"count=1,,;;bytes=2", "count=1,bytes=2"},
		{"count==5,bytes=+3", "count=-1,bytes=3"},
		{"count=1,count=2", "count=2,bytes=-1"},
		{"count=9223372036854775807,bytes=-9223372036854775808", "count=9223372036854775807,bytes=-9223372036854775808"},
		{"count=99999999999999999999,bytes=1", "count=-1,bytes=1"},
		{"=5", "count=-1,bytes=-1=;=5"},
		{"junk", "count=-1,bytes=-1"},
	}
	for _, tt := range tests {
		if got := string(parseQuotaStats([]byte(tt.in)).appendText(nil)); got != tt.out {
			t.Errorf("parse %q then format = %q; want %q", tt.in, got, tt.out)
		}
	}
}

// TestQuotaDeterminism runs the random transaction mix under quota roots that are set, removed
// and set again, and checks that two trees agree byte for byte, that a restored tree goes on
// exactly like the original, and that the stats match the subtrees.
func TestQuotaDeterminism(t *testing.T) {
	setup := func(q string) []Txn {
		var out []Txn
		p := quotaPath
		for _, seg := range strings.Split(q[1:], "/") {
			p += "/" + seg
			out = append(out, Txn{Op: jute.OpCreate, Req: &jute.CreateRequest{Path: p, ACL: worldAll}})
		}
		for _, name := range []string{quotaLimitsName, quotaStatsName} {
			out = append(out, Txn{Op: jute.OpCreate, Req: &jute.CreateRequest{Path: p + "/" + name, Data: []byte("count=5,bytes=50"), ACL: worldAll}})
		}
		return out
	}
	unset := func(q string) []Txn {
		var out []Txn
		for _, name := range []string{quotaLimitsName, quotaStatsName} {
			out = append(out, Txn{Op: jute.OpDelete, Req: &jute.DeleteRequest{Path: quotaPath + q + "/" + name, Version: -1}})
		}
		return out
	}
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			random := randomTxns(seed+100, 3000)
			var txns []Txn
			txns = append(txns, setup("/a")...)
			txns = append(txns, setup("/a/b")...)
			txns = append(txns, setup("/c")...)
			txns = append(txns, random[:1000]...)
			txns = append(txns, unset("/c")...)
			txns = append(txns, random[1000:1500]...)
			txns = append(txns, setup("/c")...)
			txns = append(txns, random[1500:]...)
			split := len(txns) - 1000

			a, b := New(), New()
			for i := range txns[:split] {
				ra, rb := a.Apply(int64(i+1), &txns[i]), b.Apply(int64(i+1), &txns[i])
				if resultString(ra) != resultString(rb) {
					t.Fatalf("txn %d: results differ", i)
				}
			}
			checkQuotaUsage(t, a.View())
			sa := snapshotBytes(t, a.View())
			if !bytes.Equal(sa, snapshotBytes(t, b.View())) {
				t.Fatalf("same transactions, different snapshots")
			}
			r, err := ReadSnapshot(bytes.NewReader(sa))
			if err != nil {
				t.Fatalf("ReadSnapshot = %v", err)
			}
			checkInvariants(t, r.View())
			for i := split; i < len(txns); i++ {
				ra, rr := a.Apply(int64(i+1), &txns[i]), r.Apply(int64(i+1), &txns[i])
				if resultString(ra) != resultString(rr) {
					t.Fatalf("txn %d after restore: results differ", i)
				}
			}
			checkInvariants(t, a.View())
			checkQuotaUsage(t, r.View())
			if !bytes.Equal(snapshotBytes(t, a.View()), snapshotBytes(t, r.View())) {
				t.Fatalf("original and restored trees diverged")
			}
		})
	}
}

// checkQuotaUsage checks the stats of /a (less its nested root /a/b), /a/b and /c against their
// subtrees.
func checkQuotaUsage(t *testing.T, v *View) {
	t.Helper()
	usage := func(path string) (count, size int64) {
		n := v.lookup(path)
		if n == nil {
			return 0, 0
		}
		var walk func(*node) bool
		walk = func(x *node) bool {
			count++
			size += int64(len(x.data()))
			return x.kids.ascend(walk)
		}
		walk(n)
		return count, size
	}
	ac, ab := usage("/a")
	bc, bb := usage("/a/b")
	cc, cb := usage("/c")
	want := map[string]string{
		"/a":   fmt.Sprintf("count=%d,bytes=%d", ac-bc, ab-bb),
		"/a/b": fmt.Sprintf("count=%d,bytes=%d", bc, bb),
		"/c":   fmt.Sprintf("count=%d,bytes=%d", cc, cb),
	}
	if ac < 2 || cc < 2 {
		t.Fatalf("sequence too tame: /a has %d nodes, /c %d", ac, cc)
	}
	for q, w := range want {
		if got := statsIn(v, q); got != w {
			t.Errorf("stats of %s = %q; subtree says %q", q, got, w)
		}
	}
}

// BenchmarkApplyCreateUnderQuota is creates and deletes of a node two levels below a quota root,
// so every op parses and rewrites the stats node.
func BenchmarkApplyCreateUnderQuota(b *testing.B) {
	for _, quota := range []bool{false, true} {
		b.Run(fmt.Sprint("quota=", quota), func(b *testing.B) {
			tr := New()
			zxid := int64(0)
			apply := func(op jute.Op, req any) {
				zxid++
				if res := tr.Apply(zxid, &Txn{Time: 1, Op: op, Req: req}); res.Err != nil {
					b.Fatalf("%v: %v", op, res.Err)
				}
			}
			paths := []string{"/app", "/app/data"}
			if quota {
				paths = append(paths, quotaPath+"/app", quotaPath+"/app/"+quotaLimitsName, quotaPath+"/app/"+quotaStatsName)
			}
			for _, p := range paths {
				apply(jute.OpCreate, &jute.CreateRequest{Path: p, ACL: worldAll})
			}
			create := &jute.CreateRequest{Path: "/app/data/n", Data: make([]byte, 100), ACL: worldAll}
			del := &jute.DeleteRequest{Path: "/app/data/n", Version: -1}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				apply(jute.OpCreate, create)
				apply(jute.OpDelete, del)
			}
			b.StopTimer()
			if want := map[bool]string{false: "<none>", true: "count=2,bytes=0"}[quota]; statsIn(tr.View(), "/app") != want {
				b.Fatalf("stats %q; want %q", statsIn(tr.View(), "/app"), want)
			}
		})
	}
}
