package znode

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/zkd-io/zkd/jute"
)

// randomTxns makes a seeded sequence of transactions over a small namespace, so that creates,
// deletes and conflicts happen often, with sessions, ephemerals, containers, TTL nodes, ACL
// changes, multis (many of which fail) and reaping.
func randomTxns(seed uint64, n int) []Txn {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	names := []string{"a", "b", "c", "d"}
	path := func() string {
		depth := 1 + rng.IntN(3)
		var b strings.Builder
		for range depth {
			b.WriteString("/" + names[rng.IntN(len(names))])
		}
		return b.String()
	}
	acls := [][]jute.ACL{
		worldAll,
		worldRead,
		{{Perms: jute.PermAll, ID: jute.Id{Scheme: "digest", ID: DigestID("u", "p")}}},
		{{Perms: jute.PermRead | jute.PermCreate, ID: jute.Id{Scheme: "world", ID: "anyone"}}, {Perms: jute.PermAll, ID: jute.Id{Scheme: "ip", ID: "127.0.0.0/8"}}},
		{{Perms: jute.PermAll, ID: jute.Id{Scheme: "auth", ID: ""}}},
	}
	auths := [][]jute.Id{nil, {{Scheme: "ip", ID: "127.0.0.1"}}, {{Scheme: "digest", ID: DigestID("u", "p")}}}
	data := func() []byte {
		switch rng.IntN(4) {
		case 0:
			return nil
		case 1:
			return []byte{}
		}
		b := make([]byte, rng.IntN(20))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return b
	}
	createReq := func() *jute.CreateRequest {
		return &jute.CreateRequest{Path: path(), Data: data(), ACL: acls[rng.IntN(len(acls))], Flags: jute.CreateMode(rng.IntN(5))}
	}
	writeOp := func() jute.MultiOp {
		switch rng.IntN(6) {
		case 0, 1:
			return jute.MultiOp{Type: []jute.Op{jute.OpCreate, jute.OpCreate2, jute.OpCreateContainer}[rng.IntN(3)], Req: createReq()}
		case 2:
			return jute.MultiOp{Type: jute.OpCreateTTL, Req: &jute.CreateTTLRequest{Path: path(), Data: data(), ACL: worldAll, Flags: jute.CreateMode(5 + rng.IntN(2)), TTL: int64(1 + rng.IntN(50))}}
		case 3:
			return jute.MultiOp{Type: jute.OpDelete, Req: &jute.DeleteRequest{Path: path(), Version: int32(rng.IntN(3)) - 1}}
		case 4:
			return jute.MultiOp{Type: jute.OpSetData, Req: &jute.SetDataRequest{Path: path(), Data: data(), Version: int32(rng.IntN(3)) - 1}}
		}
		return jute.MultiOp{Type: jute.OpCheck, Req: &jute.CheckVersionRequest{Path: path(), Version: int32(rng.IntN(3)) - 1}}
	}
	var out []Txn
	now := int64(1_000_000)
	for range n {
		now += int64(rng.IntN(10))
		// Session 0 sends unchecked writes; sessions 1-4 come and go, and some of their writes are
		// ordered (Attach set), so the session rules refuse some and the order state changes.
		txn := Txn{Time: now, Session: int64(max(0, rng.IntN(9)-4)), Auth: auths[rng.IntN(len(auths))]}
		if rng.IntN(4) == 0 {
			txn.Attach, txn.Seq = uint64(rng.IntN(3)), uint64(1+rng.IntN(2))
		}
		switch r := rng.IntN(100); {
		case r < 8:
			txn.Op, txn.Req = jute.OpCreateSession, &CreateSession{ID: int64(1 + rng.IntN(4)), Timeout: 4000, Passwd: []byte{byte(r)}, Attach: uint64(rng.IntN(2))}
		case r < 10:
			txn.Op = jute.OpCloseSession
		case r < 12:
			txn.Op, txn.Req = jute.OpCloseSession, &CloseSessions{IDs: []int64{int64(1 + rng.IntN(4)), 77}}
		case r < 15:
			txn.Op, txn.Req = jute.OpDeleteContainer, &Reap{Paths: []string{path(), path(), path()}, NeverUsedInterval: int64(rng.IntN(2) * 20)}
		case r < 18:
			txn.Op, txn.Req = jute.OpSetACL, &jute.SetACLRequest{Path: path(), ACL: acls[rng.IntN(len(acls))], Version: int32(rng.IntN(3)) - 1}
		case r < 28:
			req := &jute.MultiRequest{}
			for range rng.IntN(5) {
				req.Ops = append(req.Ops, writeOp())
			}
			txn.Op, txn.Req = jute.OpMulti, req
		default:
			op := writeOp()
			if op.Type == jute.OpCheck {
				op = jute.MultiOp{Type: jute.OpCreate, Req: createReq()}
			}
			txn.Op, txn.Req = op.Type, op.Req
		}
		out = append(out, txn)
	}
	return out
}

// resultString renders a Result with its reply encoded, for comparing results by content.
func resultString(r Result) string {
	var body []byte
	if r.Resp != nil {
		body = jute.Marshal(nil, r.Resp)
	}
	return fmt.Sprintf("%d %v %x %v", r.Zxid, r.Err, body, r.Events)
}

func snapshotBytes(t *testing.T, v *View) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := v.WriteSnapshot(&b); err != nil {
		t.Fatalf("WriteSnapshot = %v", err)
	}
	return b.Bytes()
}

// checkInvariants walks the whole view and checks every derived value against the nodes.
func checkInvariants(t *testing.T, v *View) {
	t.Helper()
	var nodes, ephemerals int32
	size := int64(0)
	eph := map[int64][]string{}
	var containers, ttls []string
	var walk func(n *node, path string) int32
	walk = func(n *node, path string) int32 {
		nodes++
		size += int64(len(path) + len(n.data()))
		switch n.kind() {
		case kindEphemeral:
			ephemerals++
			eph[n.owner()] = append(eph[n.owner()], path)
			if n.numChildren() != 0 {
				t.Fatalf("ephemeral %s has children", path)
			}
		case kindContainer:
			containers = append(containers, path)
		case kindTTL:
			ttls = append(ttls, path)
		}
		var count, desc int32
		n.kids.ascend(func(c *node) bool {
			name := c.name()
			count++
			p := path + "/" + name
			if path == "/" {
				p = "/" + name
			}
			desc += 1 + walk(c, p)
			return true
		})
		if count != n.numChildren() || desc != descendants(n) {
			t.Fatalf("%s: numChildren %d (have %d), descendants %d (have %d)", path, n.numChildren(), count, descendants(n), desc)
		}
		return desc
	}
	walk(v.root, "/")
	if nodes != v.nodes || size+baseDataSize-44 != v.dataSize-0 || ephemerals != v.ephemerals {
		t.Fatalf("counters: nodes %d/%d size %d/%d ephemerals %d/%d", nodes, v.nodes, size, v.dataSize, ephemerals, v.ephemerals)
	}
	for _, s := range v.Sessions() {
		got := v.Ephemerals(s.ID)
		want := eph[s.ID]
		slices.Sort(want)
		if !slices.Equal(got, want) && len(got)+len(want) > 0 {
			t.Fatalf("session %d ephemerals %v; nodes say %v", s.ID, got, want)
		}
		delete(eph, s.ID)
	}
	if len(eph) != 0 {
		t.Fatalf("ephemerals of unknown sessions: %v", eph)
	}
	keys := func(b btree[string, pathKey]) []string {
		var out []string
		b.ascend(func(k pathKey) bool { out = append(out, string(k)); return true })
		return out
	}
	slices.Sort(containers)
	slices.Sort(ttls)
	if got := keys(v.containers); !slices.Equal(got, containers) {
		t.Fatalf("container index %v; nodes say %v", got, containers)
	}
	if got := keys(v.ttls); !slices.Equal(got, ttls) {
		t.Fatalf("TTL index %v; nodes say %v", got, ttls)
	}
	if got, want := keys(v.quotas), collectQuotaRoots(v.root); !slices.Equal(got, want) {
		t.Fatalf("quota root index %v; nodes say %v", got, want)
	}
}

func TestDeterminismAndRoundTrip(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			txns := randomTxns(seed, 3000)
			a, b := New(), New()
			var failures, events int
			for i := range txns[:2000] {
				ra := a.Apply(int64(i+1), &txns[i])
				rb := b.Apply(int64(i+1), &txns[i])
				if resultString(ra) != resultString(rb) {
					t.Fatalf("txn %d: results differ: %v vs %v", i, ra, rb)
				}
				if ra.Err != nil {
					failures++
				}
				events += len(ra.Events)
			}
			if failures < 100 || events < 500 {
				t.Fatalf("sequence too tame: %d failures, %d events", failures, events)
			}
			checkInvariants(t, a.View())
			sa, sb := snapshotBytes(t, a.View()), snapshotBytes(t, b.View())
			if !bytes.Equal(sa, sb) {
				t.Fatalf("same transactions, different snapshots")
			}
			r, err := ReadSnapshot(bytes.NewReader(sa))
			if err != nil {
				t.Fatalf("ReadSnapshot = %v", err)
			}
			checkInvariants(t, r.View())
			if again := snapshotBytes(t, r.View()); !bytes.Equal(again, sa) {
				t.Fatalf("restore then write gives different bytes")
			}
			if r.LastZxid() != 2000 || r.View().NodeCount() != a.View().NodeCount() || r.View().DataSize() != a.View().DataSize() {
				t.Fatalf("restored counters differ")
			}
			// The restored tree behaves like the original from here on.
			for i := 2000; i < len(txns); i++ {
				ra := a.Apply(int64(i+1), &txns[i])
				rr := r.Apply(int64(i+1), &txns[i])
				if resultString(ra) != resultString(rr) {
					t.Fatalf("txn %d after restore: results differ: %v vs %v", i, ra, rr)
				}
			}
			checkInvariants(t, r.View())
			if !bytes.Equal(snapshotBytes(t, a.View()), snapshotBytes(t, r.View())) {
				t.Fatalf("original and restored trees diverged")
			}
		})
	}
}

func TestReadSnapshotCorrupt(t *testing.T) {
	h := newHarness(t)
	h.openSession(1)
	h.sess = 1
	h.mustCreate("/a", 0)
	h.mustCreate("/a/e", jute.ModeEphemeral)
	good := snapshotBytes(t, h.tree.View())
	if _, err := ReadSnapshot(bytes.NewReader(good)); err != nil {
		t.Fatal(err)
	}
	cases := map[string][]byte{
		"empty":     nil,
		"magic":     append([]byte("notsnap\x00"), good[8:]...),
		"truncated": good[:len(good)-5],
		"trailing":  append(slices.Clone(good), 0),
	}
	for i := 8; i < len(good); i += 7 {
		b := slices.Clone(good)
		b[i] ^= 0x5a
		cases[fmt.Sprint("flip", i)] = b
	}
	for name, b := range cases {
		if _, err := ReadSnapshot(bytes.NewReader(b)); !errors.Is(err, ErrCorruptSnapshot) {
			t.Errorf("%s: ReadSnapshot = %v; want ErrCorruptSnapshot", name, err)
		}
	}
	if _, err := ReadSnapshot(io.MultiReader(bytes.NewReader(good[:20]), errReader{})); err == nil || errors.Is(err, ErrCorruptSnapshot) {
		t.Errorf("read error: ReadSnapshot = %v; want the reader's error", err)
	}
	if err := h.tree.View().WriteSnapshot(errWriter{}); err == nil {
		t.Errorf("WriteSnapshot to a failing writer succeeded")
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

type errWriter struct{}

func (errWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func FuzzReadSnapshot(f *testing.F) {
	tr := New()
	for i, txn := range randomTxns(42, 200) {
		tr.Apply(int64(i+1), &txn)
	}
	var b bytes.Buffer
	if err := tr.View().WriteSnapshot(&b); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	f.Add(b.Bytes()[:100])
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := ReadSnapshot(bytes.NewReader(in))
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := r.View().WriteSnapshot(&out); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), in) {
			t.Fatalf("a snapshot that restores must write back the same bytes")
		}
	})
}

// TestConcurrentReadsAndSnapshot runs readers and a snapshot writer against views while Apply
// keeps going; with -race it checks that views share nothing mutable with Apply.
func TestConcurrentReadsAndSnapshot(t *testing.T) {
	tr := New()
	txns := randomTxns(7, 4000)
	for i := range txns[:1000] {
		tr.Apply(int64(i+1), &txns[i])
	}
	frozen := tr.View()
	want := snapshotBytes(t, frozen)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 3 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				v := tr.View()
				if g == 0 {
					var b bytes.Buffer
					if err := frozen.WriteSnapshot(&b); err != nil || !bytes.Equal(b.Bytes(), want) {
						errs <- fmt.Errorf("snapshot of a frozen view changed while Apply ran (err %v)", err)
						return
					}
					continue
				}
				for _, p := range []string{"/a", "/a/b", "/b/c/d", "/"} {
					_, _ = v.Read(1, nil, jute.OpGetChildren2, &jute.GetChildren2Request{Path: p})
					_, _ = v.Read(1, nil, jute.OpGetData, &jute.GetDataRequest{Path: p})
				}
				_ = v.ReapCandidates(2_000_000, 1, 0)
				_ = v.Sessions()
			}
		})
	}
	for i := 1000; i < len(txns); i++ {
		tr.Apply(int64(i+1), &txns[i])
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	checkInvariants(t, tr.View())
}
