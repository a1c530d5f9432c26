package zkfile

import (
	"bytes"
	"errors"
	"hash/adler32"
	"os"
	"path/filepath"
	"testing"

	"github.com/zkd-io/zkd/jute"
)

// logBuilder writes a transaction log by hand, for formats the installed ZooKeeper no longer
// writes (3.4 and 3.5: no digests, the V0 create, closeSession without paths).
type logBuilder struct{ b bytes.Buffer }

func newLog() *logBuilder {
	l := &logBuilder{}
	e := jute.NewEncoder(nil)
	e.Int32(logMagic)
	e.Int32(version)
	e.Int64(0)
	l.b.Write(e.Bytes())
	return l
}

// add appends one entry: the header, then body as the record.
func (l *logBuilder) add(session int64, zxid int64, typ jute.Op, body func(e *jute.Encoder)) {
	e := jute.NewEncoder(nil)
	e.Int64(session)
	e.Int32(1)
	e.Int64(zxid)
	e.Int64(1000 + zxid)
	e.Int32(int32(typ))
	if body != nil {
		body(e)
	}
	payload := e.Bytes()
	h := jute.NewEncoder(nil)
	h.Int64(int64(adler32.Checksum(payload)))
	h.Int32(int32(len(payload)))
	l.b.Write(h.Bytes())
	l.b.Write(payload)
	l.b.WriteByte('B')
}

func worldACL(e *jute.Encoder) {
	e.Int32(1)
	(&jute.ACL{Perms: 31, ID: jute.Id{Scheme: "world", ID: "anyone"}}).Encode(e)
}

// Logs as ZooKeeper 3.4 and 3.5 wrote them replay as ZooKeeper replays them.
func TestReplayOlderLogFormats(t *testing.T) {
	const s1 = 0x100
	l := newLog()
	l.add(s1, 1, jute.OpCreateSession, func(e *jute.Encoder) { e.Int32(30000) })
	// A V0 create (no parentCVersion): the parent's cversion goes up by one.
	l.add(s1, 2, jute.OpCreate, func(e *jute.Encoder) {
		e.String("/a")
		e.Buffer([]byte("x"))
		worldACL(e)
		e.Bool(false)
	})
	l.add(s1, 3, jute.OpCreate, func(e *jute.Encoder) {
		e.String("/a/eph")
		e.Buffer(nil)
		worldACL(e)
		e.Bool(true)
		e.Int32(-1)
	})
	// A multi with an error record changes nothing.
	l.add(s1, 4, jute.OpMulti, func(e *jute.Encoder) {
		e.Int32(2)
		sub := jute.NewEncoder(nil)
		sub.String("/a/never")
		sub.Buffer(nil)
		worldACL(sub)
		sub.Bool(false)
		sub.Int32(2)
		e.Int32(int32(jute.OpCreate))
		e.Buffer(sub.Bytes())
		er := jute.NewEncoder(nil)
		er.Int32(int32(jute.CodeBadVersion))
		e.Int32(int32(jute.OpError))
		e.Buffer(er.Bytes())
	})
	l.add(s1, 5, jute.OpSetData, func(e *jute.Encoder) {
		e.String("/a")
		e.Buffer([]byte("y"))
		e.Int32(1)
	})
	// closeSession as 3.5 logged it, with no paths: the session's ephemerals go.
	l.add(s1, 6, jute.OpCloseSession, nil)

	lg, err := ReadLog(bytes.NewReader(l.b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if len(lg.Txns) != 6 || lg.Torn {
		t.Fatalf("read %d transactions, torn %v", len(lg.Txns), lg.Torn)
	}
	if lg.Txns[1].Op.ParentCVersion != -1 || lg.Txns[5].Op.Paths != nil {
		t.Fatalf("V0 create %+v, closeSession %+v", lg.Txns[1].Op, lg.Txns[5].Op)
	}
	tr, _ := newTree(initialSnapshot())
	for i := range lg.Txns {
		tr.apply(&lg.Txns[i])
	}
	st := tr.state()
	a := st.Nodes["/a"]
	if a == nil || string(a.Data) != "y" || a.Stat.Version != 1 || a.Stat.Mzxid != 5 || a.Stat.Czxid != 2 {
		t.Fatalf("/a = %+v", a)
	}
	if a.Stat.Cversion != 1 || a.Stat.Pzxid != 6 || len(a.Children) != 0 {
		t.Errorf("/a after its ephemeral child came and went: cversion %d pzxid %d children %v", a.Stat.Cversion, a.Stat.Pzxid, a.Children)
	}
	if st.Nodes["/a/eph"] != nil || st.Nodes["/a/never"] != nil {
		t.Error("the closed session's ephemeral or the failed multi's node is there")
	}
	if root := st.Nodes["/"]; root.Stat.Cversion != 1 || root.Stat.Pzxid != 2 {
		t.Errorf("root cversion %d pzxid %d", root.Stat.Cversion, root.Stat.Pzxid)
	}
	if len(st.Sessions) != 0 || st.Zxid != 6 {
		t.Errorf("sessions %v, zxid %d", st.Sessions, st.Zxid)
	}
}

// A closeSession as ZooKeeper 3.6+ logs it names its ephemerals and carries a digest.
func TestReplayCloseSessionWithPaths(t *testing.T) {
	l := newLog()
	l.add(7, 1, jute.OpCreateSession, func(e *jute.Encoder) { e.Int32(30000); e.Int32(2); e.Int64(42) })
	l.add(7, 2, jute.OpCreate2, func(e *jute.Encoder) {
		e.String("/e")
		e.Buffer(nil)
		worldACL(e)
		e.Bool(true)
		e.Int32(1)
		e.Int32(2)
		e.Int64(43)
	})
	l.add(7, 3, jute.OpCloseSession, func(e *jute.Encoder) { e.Strings([]string{"/e"}); e.Int32(2); e.Int64(44) })
	lg, err := ReadLog(bytes.NewReader(l.b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if got := lg.Txns[2]; len(got.Op.Paths) != 1 || got.Digest == nil || got.Digest.Value != 44 {
		t.Fatalf("closeSession %+v digest %+v", got.Op, got.Digest)
	}
	tr, _ := newTree(initialSnapshot())
	for i := range lg.Txns {
		tr.apply(&lg.Txns[i])
	}
	if st := tr.state(); st.Nodes["/e"] != nil || len(st.Sessions) != 0 {
		t.Errorf("after closeSession: /e %v, sessions %v", st.Nodes["/e"], st.Sessions)
	}
}

// A snapshot written by WriteSnapshot (ZooKeeper's format without a digest record, as 3.4 and
// 3.5 wrote it) reads back to the same state.
func TestSnapshotRoundTrip(t *testing.T) {
	tr, _ := newTree(initialSnapshot())
	l := newLog()
	l.add(9, 1, jute.OpCreateSession, func(e *jute.Encoder) { e.Int32(5000) })
	l.add(9, 2, jute.OpCreateTTL, func(e *jute.Encoder) {
		e.String("/ttl")
		e.Buffer([]byte("t"))
		worldACL(e)
		e.Int32(1)
		e.Int64(60000)
	})
	l.add(9, 3, jute.OpCreateContainer, func(e *jute.Encoder) {
		e.String("/c")
		e.Buffer(nil)
		e.Int32(1)
		(&jute.ACL{Perms: 1, ID: jute.Id{Scheme: "digest", ID: "u:x"}}).Encode(e)
		e.Int32(2)
	})
	l.add(9, 4, jute.OpCreate, func(e *jute.Encoder) {
		e.String("/c/e")
		e.Buffer([]byte{})
		worldACL(e)
		e.Bool(true)
		e.Int32(1)
	})
	lg, err := ReadLog(bytes.NewReader(l.b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	for i := range lg.Txns {
		tr.apply(&lg.Txns[i])
	}
	want := tr.state()
	zt, err := want.Tree()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteSnapshot(&buf, want.Sessions, zt.View().RawNodes); err != nil {
		t.Fatal(err)
	}
	snap, err := ReadSnapshot(&buf)
	if err != nil {
		t.Fatal(err)
	}
	snap.Zxid = want.Zxid
	got, err := FromSnapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Nodes) != len(want.Nodes) || len(got.Sessions) != 1 || snap.Digest != nil {
		t.Fatalf("nodes %d/%d sessions %v digest %v", len(got.Nodes), len(want.Nodes), got.Sessions, snap.Digest)
	}
	for p, w := range want.Nodes {
		g := got.Nodes[p]
		if g == nil || g.ClientStat() != w.ClientStat() || !bytes.Equal(g.Data, w.Data) || g.Stat.EphemeralOwner != w.Stat.EphemeralOwner {
			t.Errorf("%s: got %+v, want %+v", p, g, w)
		}
	}
}

// A log whose last tree digest does not match the rebuilt tree stops the load: the files do not
// hold the state ZooKeeper had, and an import must not go on with a different tree.
func TestLoadChecksTheLoggedDigest(t *testing.T) {
	for _, tc := range []struct {
		name   string
		digest func(*State) int64
		want   error
	}{
		{"right digest", func(s *State) int64 { return s.Digest() }, nil},
		{"wrong digest", func(s *State) int64 { return s.Digest() + 1 }, ErrDigest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			v2 := filepath.Join(dir, "version-2")
			if err := os.MkdirAll(v2, 0o755); err != nil {
				t.Fatal(err)
			}
			base, _ := newTree(initialSnapshot())
			zt, err := base.state().Tree()
			if err != nil {
				t.Fatal(err)
			}
			var snap bytes.Buffer
			if err := WriteSnapshot(&snap, nil, zt.View().RawNodes); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(v2, "snapshot.0"), snap.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			// The tree after the create, to write its digest into the log.
			create := func(e *jute.Encoder) {
				e.String("/a")
				e.Buffer([]byte("x"))
				worldACL(e)
				e.Bool(false)
				e.Int32(1)
			}
			probe := newLog()
			probe.add(3, 1, jute.OpCreate, create)
			lg, err := ReadLog(bytes.NewReader(probe.b.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			after, _ := newTree(initialSnapshot())
			after.apply(&lg.Txns[0])
			d := tc.digest(after.state())
			l := newLog()
			l.add(3, 1, jute.OpCreate, func(e *jute.Encoder) { create(e); e.Int32(digestVersion); e.Int64(d) })
			if err := os.WriteFile(filepath.Join(v2, "log.1"), l.b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			st, rep, err := Load(dir, "")
			if !errors.Is(err, tc.want) {
				t.Fatalf("Load: %v, want %v", err, tc.want)
			}
			if tc.want == nil && (!rep.DigestChecked || st.Nodes["/a"] == nil) {
				t.Errorf("digest checked %v, /a %v", rep.DigestChecked, st.Nodes["/a"])
			}
			if tc.want != nil {
				// IgnoreDigest goes on and says so.
				st, rep, err := LoadWith(dir, "", Options{IgnoreDigest: true})
				if err != nil || rep.DigestMismatch == "" || rep.DigestChecked || st.Nodes["/a"] == nil {
					t.Errorf("IgnoreDigest: %v, %+v", err, rep)
				}
			}
		})
	}
}

// A create finds its parent through the last one created under, and not once that parent is
// deleted: a create under a deleted parent fails as ZooKeeper's does, and one under the parent
// created again goes to the new node.
func TestReplayCreateAfterParentDeleted(t *testing.T) {
	l := newLog()
	l.add(7, 1, jute.OpCreate, createBody("/p", false, 1))
	l.add(7, 2, jute.OpCreate, createBody("/p/a", false, 1))
	l.add(7, 3, jute.OpDelete, pathBody("/p/a"))
	l.add(7, 4, jute.OpDelete, pathBody("/p"))
	l.add(7, 5, jute.OpCreate, createBody("/p/b", false, 2))
	l.add(7, 6, jute.OpCreate, createBody("/p", false, 3))
	l.add(7, 7, jute.OpCreate, createBody("/p/c", false, 1))
	l.add(7, 8, jute.OpCreate, createBody("/p/c", false, 2))
	tr := replay(t, l, nil)
	st := tr.state()
	if st.Nodes["/p/b"] != nil || st.Nodes["/p/a"] != nil {
		t.Errorf("/p/a %v, /p/b %v: want neither", st.Nodes["/p/a"], st.Nodes["/p/b"])
	}
	p, c := st.Nodes["/p"], st.Nodes["/p/c"]
	if p == nil || c == nil || len(p.Children) != 1 || p.Children["c"] != c {
		t.Fatalf("/p %+v, /p/c %+v: want /p with the one child c", p, c)
	}
	if c.Stat.Czxid != 7 || p.Stat.Cversion != 2 || p.Stat.Pzxid != 8 {
		t.Errorf("/p/c czxid %d, /p cversion %d pzxid %d: want 7, 2, 8", c.Stat.Czxid, p.Stat.Cversion, p.Stat.Pzxid)
	}
}

// The logs after a snapshot tell how many nodes they create, multis' included, and whether the
// last transaction after it carries a digest to check.
func TestScanLaterLogs(t *testing.T) {
	create := Op{Type: jute.OpCreate}
	logs := []*Log{
		{Txns: []Txn{
			{Header: TxnHeader{Zxid: 5}, Op: create, Digest: &Digest{Version: digestVersion}},
			{Header: TxnHeader{Zxid: 10}, Op: Op{Type: jute.OpMulti, Multi: []Op{create, {Type: jute.OpSetData}, {Type: jute.OpCreateContainer}}}},
		}},
		{Txns: []Txn{
			{Header: TxnHeader{Zxid: 11}, Op: Op{Type: jute.OpCreateTTL}},
			{Header: TxnHeader{Zxid: 12}, Op: Op{Type: jute.OpDelete}, Digest: &Digest{Version: digestVersion}},
		}},
	}
	if creates, digested := scan(logs, 5); creates != 3 || !digested {
		t.Errorf("after zxid 5: %d creates, digested %v; want 3, true", creates, digested)
	}
	logs[1].Txns[1].Digest = nil
	if creates, digested := scan(logs, 0); creates != 4 || digested {
		t.Errorf("after zxid 0, the last without a digest: %d creates, digested %v; want 4, false", creates, digested)
	}
	if creates, digested := scan(logs, 12); creates != 0 || digested {
		t.Errorf("after the last: %d creates, digested %v; want 0, false", creates, digested)
	}
}

// The digest kept as the tree changes is the one computed from every node afterwards, through
// each kind of change a replay makes: creates (the parent's cversion), deletes (its pzxid),
// setData, setACL, a create of a node that exists (cversion brought up), a closeSession's
// deletes, and a quota's stats.
func TestKeptDigestMatchesFullDigest(t *testing.T) {
	l := newLog()
	l.add(7, 1, jute.OpCreateSession, func(e *jute.Encoder) { e.Int32(30000) })
	l.add(7, 2, jute.OpCreate, createBody("/a", false, 1))
	l.add(7, 3, jute.OpCreate, createBody("/a/b", false, 1))
	l.add(7, 4, jute.OpCreate, createBody("/a/c", true, 2))
	l.add(7, 5, jute.OpSetData, func(e *jute.Encoder) { e.String("/a/b"); e.Buffer([]byte("new")); e.Int32(1) })
	l.add(7, 6, jute.OpSetData, func(e *jute.Encoder) { e.String("/a/b"); e.Buffer([]byte("newer")); e.Int32(2) })
	l.add(7, 7, jute.OpSetACL, func(e *jute.Encoder) { e.String("/a"); worldACL(e); e.Int32(1) })
	l.add(7, 8, jute.OpCreate, createBody("/a/b", false, 5))
	l.add(7, 9, jute.OpCreate, createBody("/a/d", false, 6))
	l.add(7, 10, jute.OpDelete, pathBody("/a/d"))
	l.add(7, 11, jute.OpCreate, createBody("/zookeeper/quota/a", false, 1))
	l.add(7, 12, jute.OpCreate, createBody("/zookeeper/quota/a/zookeeper_limits", false, 1))
	l.add(7, 13, jute.OpCreate, createBody("/zookeeper/quota/a/zookeeper_stats", false, 2))
	l.add(7, 14, jute.OpCloseSession, nil)
	tr := replay(t, l, func(tr *tree, x *Txn) {
		if got, want := tr.digest(), tr.state().Digest(); got != want {
			t.Fatalf("after zxid %d: kept digest %#x, computed %#x", x.Header.Zxid, got, want)
		}
	})
	tr.quotaStats()
	kept := tr.digest()
	st := tr.takeState()
	if st.Nodes["/a/c"] != nil || st.Nodes["/a/d"] != nil || st.Nodes["/a/b"] == nil {
		t.Fatalf("the replay went wrong: /a/b %v, /a/c %v, /a/d %v", st.Nodes["/a/b"], st.Nodes["/a/c"], st.Nodes["/a/d"])
	}
	if want := st.Digest(); kept != want {
		t.Errorf("kept digest %#x, computed %#x", kept, want)
	}
}

// createBody is a create's record: data named after the path, the open ACL.
func createBody(path string, ephemeral bool, cversion int32) func(e *jute.Encoder) {
	return func(e *jute.Encoder) {
		e.String(path)
		e.Buffer([]byte("data of " + path))
		worldACL(e)
		e.Bool(ephemeral)
		e.Int32(cversion)
	}
}

// pathBody is a record of one path: a delete's.
func pathBody(path string) func(e *jute.Encoder) { return func(e *jute.Encoder) { e.String(path) } }

// replay reads l back and applies it to ZooKeeper's initial tree, calling each (if set) after
// every transaction.
func replay(t *testing.T, l *logBuilder, each func(tr *tree, x *Txn)) *tree {
	t.Helper()
	lg, err := ReadLog(bytes.NewReader(l.b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := newTree(initialSnapshot())
	for i := range lg.Txns {
		tr.apply(&lg.Txns[i])
		if each != nil {
			each(tr, &lg.Txns[i])
		}
	}
	return tr
}
