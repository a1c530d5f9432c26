package znode

import (
	"bytes"
	"os"
	"testing"

	"github.com/zkd-io/zkd/jute"
)

// TestWriteOfDeadSessionRefused: a client write of a session that is not in the table when it is
// applied is refused with SessionExpired and changes nothing, whatever the op; closing a session
// that is gone is a no-op, as in ZooKeeper.
func TestWriteOfDeadSessionRefused(t *testing.T) {
	h := newHarness(t)
	h.openSession(7)
	h.sess = 7
	h.mustCreate("/a", 0)
	h.apply(jute.OpCloseSession, nil)

	before := snapshotBytes(t, h.tree.View())
	writes := []struct {
		op  jute.Op
		req any
	}{
		{jute.OpCreate, &jute.CreateRequest{Path: "/b", ACL: worldAll}},
		{jute.OpCreate2, &jute.CreateRequest{Path: "/b", ACL: worldAll, Flags: jute.ModeEphemeral}},
		{jute.OpCreateContainer, &jute.CreateRequest{Path: "/c", ACL: worldAll, Flags: jute.ModeContainer}},
		{jute.OpCreateTTL, &jute.CreateTTLRequest{Path: "/t", ACL: worldAll, Flags: jute.ModePersistentWithTTL, TTL: 10}},
		{jute.OpSetData, &jute.SetDataRequest{Path: "/a", Data: []byte("x"), Version: -1}},
		{jute.OpSetACL, &jute.SetACLRequest{Path: "/a", ACL: worldRead, Version: -1}},
		{jute.OpDelete, &jute.DeleteRequest{Path: "/a", Version: -1}},
		{jute.OpMulti, &jute.MultiRequest{Ops: []jute.MultiOp{{Type: jute.OpDelete, Req: &jute.DeleteRequest{Path: "/a", Version: -1}}}}},
	}
	for _, w := range writes {
		res := h.apply(w.op, w.req)
		wantCode(t, w.op.String(), res.Err, jute.CodeSessionExpired)
		if len(res.Events) != 0 {
			t.Fatalf("%v of a closed session fired %v", w.op, res.Events)
		}
	}
	// Never opened at all.
	h.sess = 99
	wantCode(t, "create by an unknown session", h.apply(jute.OpCreate, &jute.CreateRequest{Path: "/u", ACL: worldAll}).Err, jute.CodeSessionExpired)

	after := h.tree.View()
	if _, ok := after.Stat("/b"); ok {
		t.Fatal("a closed session's create took effect")
	}
	// Only the zxid moved: compare the snapshots with the zxid field masked.
	if got := snapshotBytes(t, after); !bytes.Equal(maskZxid(got), maskZxid(before)) {
		t.Fatal("refused writes changed the tree")
	}
	h.sess = 7
	if res := h.apply(jute.OpCloseSession, nil); res.Err != nil {
		t.Fatalf("closing a closed session = %v; want OK (no effect)", res.Err)
	}
	// Session 0 is the servers' own: not subject to the session rules.
	h.sess = 0
	if _, err := h.create("/internal", nil, 0); err != nil {
		t.Fatalf("unchecked write = %v", err)
	}
}

// maskZxid zeroes the snapshot header's zxid (after the 8-byte magic and the 4-byte version).
func maskZxid(b []byte) []byte {
	b = bytes.Clone(b)
	clear(b[12:20])
	// The trailing CRC covers the zxid too.
	clear(b[len(b)-4:])
	return b
}

// TestSessionWriteOrder: ordered writes take effect only in each attachment's order, attachment
// after attachment; a gap, a repeat, or a write from an attachment the session has left is refused
// with SessionMoved and changes nothing; a write that fails still takes its place.
func TestSessionWriteOrder(t *testing.T) {
	h := newHarness(t)
	h.openSession(7)
	h.sess = 7
	write := func(attach, seq uint64, path string) Result {
		t.Helper()
		zxid := h.tree.LastZxid() + 1
		return h.tree.Apply(zxid, &Txn{Time: h.now, Session: 7, Op: jute.OpCreate, Attach: attach, Seq: seq,
			Req: &jute.CreateRequest{Path: path, ACL: worldAll}})
	}
	exists := func(path string) bool { _, ok := h.tree.View().Stat(path); return ok }
	steps := []struct {
		attach, seq uint64
		path        string
		want        jute.Code
	}{
		{5, 2, "/gap-first", jute.CodeSessionMoved}, // an attachment starts at 1
		{5, 1, "/a1", jute.CodeOK},
		{5, 2, "/a2", jute.CodeOK},
		{5, 4, "/a4", jute.CodeSessionMoved}, // 3 never took effect: the gap is refused
		{5, 3, "/a3", jute.CodeOK},
		{5, 3, "/a3-again", jute.CodeSessionMoved}, // a resubmission of 3
		{5, 4, "/a1", jute.CodeNodeExists},         // fails, but takes its place
		{5, 5, "/a5", jute.CodeOK},
		{9, 2, "/b2", jute.CodeSessionMoved}, // a new attachment must start at 1
		{9, 1, "/b1", jute.CodeOK},
		{5, 6, "/a6", jute.CodeSessionMoved}, // the session left attachment 5
		{8, 1, "/c1", jute.CodeSessionMoved}, // an attachment older than 9
		{0, 0, "/unordered", jute.CodeOK},    // unordered writes are not checked
		{9, 2, "/b2", jute.CodeOK},
	}
	for i, st := range steps {
		res := write(st.attach, st.seq, st.path)
		wantCode(t, st.path, res.Err, st.want)
		if st.want != jute.CodeOK && st.want != jute.CodeNodeExists && exists(st.path) {
			t.Fatalf("step %d: refused write %s took effect", i, st.path)
		}
	}
	// The order survives a snapshot: the restored tree expects (9, 3) next, as the original does.
	restored := roundTrip(t, h.tree.View())
	for _, tr := range []*Tree{h.tree, restored} {
		z := tr.LastZxid() + 1
		if res := tr.Apply(z, &Txn{Session: 7, Op: jute.OpCreate, Attach: 9, Seq: 4, Req: &jute.CreateRequest{Path: "/x", ACL: worldAll}}); res.Err != jute.CodeSessionMoved {
			t.Fatalf("(9, 4) before (9, 3) = %v; want SessionMoved", res.Err)
		}
		if res := tr.Apply(z+1, &Txn{Session: 7, Op: jute.OpCreate, Attach: 9, Seq: 3, Req: &jute.CreateRequest{Path: "/x", ACL: worldAll}}); res.Err != nil {
			t.Fatalf("(9, 3) = %v", res.Err)
		}
	}
	// closeSession is ordered too: a stale attachment cannot close the session.
	res := h.tree.Apply(h.tree.LastZxid()+1, &Txn{Session: 7, Op: jute.OpCloseSession, Attach: 5, Seq: 7})
	wantCode(t, "closeSession from a left attachment", res.Err, jute.CodeSessionMoved)
	if _, ok := h.tree.View().Session(7); !ok {
		t.Fatal("a stale closeSession closed the session")
	}
}

// TestCreateSessionStartsAttachment: the attachment a session is created on is its first one, so a
// write from any earlier token is refused.
func TestCreateSessionStartsAttachment(t *testing.T) {
	tr := New()
	tr.Apply(1, &Txn{Op: jute.OpCreateSession, Req: &CreateSession{ID: 3, Timeout: 4000, Passwd: []byte("p"), Attach: 40}})
	res := tr.Apply(2, &Txn{Session: 3, Op: jute.OpCreate, Attach: 39, Seq: 1, Req: &jute.CreateRequest{Path: "/x", ACL: worldAll}})
	wantCode(t, "write from an earlier attachment", res.Err, jute.CodeSessionMoved)
	res = tr.Apply(3, &Txn{Session: 3, Op: jute.OpCreate, Attach: 40, Seq: 1, Req: &jute.CreateRequest{Path: "/x", ACL: worldAll}})
	if res.Err != nil {
		t.Fatalf("first write of the creating attachment = %v", res.Err)
	}
}

// TestReadSnapshotVersion1 reads a snapshot written before sessions carried their write order
// (testdata/snapshot-v1.bin: session 0x1234 with an ephemeral /app/e under /app): it restores, and
// the session takes ordered writes from any attachment.
func TestReadSnapshotVersion1(t *testing.T) {
	b, err := os.ReadFile("testdata/snapshot-v1.bin")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := ReadSnapshot(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("ReadSnapshot(v1) = %v", err)
	}
	v := tr.View()
	if s, ok := v.Session(0x1234); !ok || s.Timeout != 6000 || string(s.Passwd) != "0123456789abcdef" {
		t.Fatalf("session = %+v, %v", s, ok)
	}
	if st, ok := v.Stat("/app/e"); !ok || st.EphemeralOwner != 0x1234 || v.Zxid() != 3 {
		t.Fatalf("/app/e = %+v, %v; zxid %d", st, ok, v.Zxid())
	}
	res := tr.Apply(4, &Txn{Session: 0x1234, Op: jute.OpSetData, Attach: 1, Seq: 1, Req: &jute.SetDataRequest{Path: "/app", Data: []byte("x"), Version: -1}})
	if res.Err != nil {
		t.Fatalf("first ordered write after a v1 restore = %v", res.Err)
	}
	// Written back, it is the current version.
	var out bytes.Buffer
	if err := tr.View().WriteSnapshot(&out); err != nil {
		t.Fatal(err)
	}
	if out.Bytes()[11] != snapVersion {
		t.Fatalf("rewritten snapshot version %d", out.Bytes()[11])
	}
}

// roundTrip writes v as a snapshot and reads it back.
func roundTrip(t *testing.T, v *View) *Tree {
	t.Helper()
	tr, err := ReadSnapshot(bytes.NewReader(snapshotBytes(t, v)))
	if err != nil {
		t.Fatalf("ReadSnapshot = %v", err)
	}
	return tr
}
