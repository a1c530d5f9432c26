package znode

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/zkd-io/zkd/jute"
)

func eventStrings(evs []Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = fmt.Sprintf("%s %s", e.Type, e.Path)
	}
	return out
}

func TestEvents(t *testing.T) {
	h := newHarness(t)
	h.openSession(1)
	h.openSession(2)
	digestACL := []jute.ACL{{Perms: jute.PermAll, ID: jute.Id{Scheme: "digest", ID: DigestID("u", "p")}}}
	tests := []struct {
		name string
		op   jute.Op
		req  any
		want []string
	}{
		{"create", jute.OpCreate, &jute.CreateRequest{Path: "/a", ACL: worldAll},
			[]string{"NodeCreated /a", "NodeChildrenChanged /"}},
		{"create child", jute.OpCreate2, &jute.CreateRequest{Path: "/a/b", ACL: digestACL},
			[]string{"NodeCreated /a/b", "NodeChildrenChanged /a"}},
		{"setData", jute.OpSetData, &jute.SetDataRequest{Path: "/a", Data: []byte("x"), Version: -1},
			[]string{"NodeDataChanged /a"}},
		{"setACL fires nothing", jute.OpSetACL, &jute.SetACLRequest{Path: "/a", ACL: worldAll, Version: -1}, nil},
		{"failed write fires nothing", jute.OpDelete, &jute.DeleteRequest{Path: "/a", Version: -1}, nil},
		{"ephemeral", jute.OpCreate, &jute.CreateRequest{Path: "/a/e", ACL: worldAll, Flags: jute.ModeEphemeral},
			[]string{"NodeCreated /a/e", "NodeChildrenChanged /a"}},
		{"multi", jute.OpMulti, &jute.MultiRequest{Ops: []jute.MultiOp{
			{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: "/m", ACL: worldAll}},
			{Type: jute.OpSetData, Req: &jute.SetDataRequest{Path: "/m", Version: -1}},
			{Type: jute.OpCheck, Req: &jute.CheckVersionRequest{Path: "/m", Version: 1}},
			{Type: jute.OpDelete, Req: &jute.DeleteRequest{Path: "/m", Version: -1}},
		}}, []string{"NodeCreated /m", "NodeChildrenChanged /", "NodeDataChanged /m", "NodeDeleted /m", "NodeChildrenChanged /"}},
		{"failed multi fires nothing", jute.OpMulti, &jute.MultiRequest{Ops: []jute.MultiOp{
			{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: "/m2", ACL: worldAll}},
			{Type: jute.OpCheck, Req: &jute.CheckVersionRequest{Path: "/m2", Version: 9}},
		}}, nil},
		{"close session", jute.OpCloseSession, nil,
			[]string{"NodeDeleted /a/e", "NodeChildrenChanged /a"}},
		{"delete", jute.OpDelete, &jute.DeleteRequest{Path: "/a/b", Version: -1},
			[]string{"NodeDeleted /a/b", "NodeChildrenChanged /a"}},
	}
	h.sess = 1
	for _, tt := range tests {
		res := h.apply(tt.op, tt.req)
		if tt.op == jute.OpCloseSession {
			h.sess = 2 // a closed session writes nothing more
		}
		if got := eventStrings(res.Events); !slices.Equal(got, tt.want) && (len(got) != 0 || len(tt.want) != 0) {
			t.Errorf("%s: events %q; want %q", tt.name, got, tt.want)
		}
	}
}

func TestEventACLs(t *testing.T) {
	h := newHarness(t)
	digestACL := []jute.ACL{{Perms: jute.PermAll, ID: jute.Id{Scheme: "digest", ID: DigestID("u", "p")}}}
	h.apply(jute.OpCreate, &jute.CreateRequest{Path: "/a", ACL: digestACL})
	h.auth = []jute.Id{{Scheme: "digest", ID: DigestID("u", "p")}}
	res := h.apply(jute.OpCreate, &jute.CreateRequest{Path: "/a/b", ACL: worldRead})
	if !slices.Equal(res.Events[0].ACL, worldRead) || !slices.Equal(res.Events[1].ACL, digestACL) {
		t.Fatalf("create events carry ACLs %v and %v", res.Events[0].ACL, res.Events[1].ACL)
	}
	res = h.apply(jute.OpDelete, &jute.DeleteRequest{Path: "/a/b", Version: -1})
	if !slices.Equal(res.Events[0].ACL, worldRead) || !slices.Equal(res.Events[1].ACL, digestACL) {
		t.Fatalf("delete events carry ACLs %v and %v", res.Events[0].ACL, res.Events[1].ACL)
	}
}

func TestMulti(t *testing.T) {
	h := newHarness(t)
	h.mustCreate("/x", 0)
	res := h.apply(jute.OpMulti, &jute.MultiRequest{Ops: []jute.MultiOp{
		{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: "/m", ACL: worldAll}},
		{Type: jute.OpCreate2, Req: &jute.CreateRequest{Path: "/m/p", ACL: worldAll}},
		{Type: jute.OpCreateContainer, Req: &jute.CreateRequest{Path: "/m/c", ACL: worldAll, Flags: jute.ModeContainer}},
		{Type: jute.OpCreateTTL, Req: &jute.CreateTTLRequest{Path: "/m/t", ACL: worldAll, Flags: jute.ModePersistentWithTTL, TTL: 5}},
		{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: "/m/p/c", ACL: worldAll}},
		{Type: jute.OpDelete, Req: &jute.DeleteRequest{Path: "/m/p/c", Version: -1}},
		{Type: jute.OpSetData, Req: &jute.SetDataRequest{Path: "/x", Data: []byte("v"), Version: 0}},
		{Type: jute.OpCheck, Req: &jute.CheckVersionRequest{Path: "/x", Version: 1}},
	}})
	if res.Err != nil {
		t.Fatalf("multi = %v", res.Err)
	}
	zxid := res.Zxid
	var types []jute.Op
	for _, r := range res.Resp.(*jute.MultiResponse).Results {
		types = append(types, r.Type)
		if r.Err != 0 {
			t.Fatalf("result %+v has err", r)
		}
	}
	want := []jute.Op{jute.OpCreate, jute.OpCreate2, jute.OpCreate2, jute.OpCreate2, jute.OpCreate, jute.OpDelete, jute.OpSetData, jute.OpCheck}
	if !slices.Equal(types, want) {
		t.Fatalf("result types %v; want %v", types, want)
	}
	rs := res.Resp.(*jute.MultiResponse).Results
	if st := rs[1].Resp.(*jute.Create2Response).Stat; st.Czxid != zxid {
		t.Fatalf("create2 in multi stat %+v; want czxid %d", st, zxid)
	}
	if st := rs[6].Resp.(*jute.SetDataResponse).Stat; st.Version != 1 || st.Mzxid != zxid {
		t.Fatalf("setData in multi stat %+v", st)
	}
	// Everything in one zxid.
	if st := h.stat("/m/p"); st.Czxid != zxid || st.Pzxid != zxid || st.Cversion != 2 {
		t.Fatalf("Stat(/m/p) = %+v", st)
	}

	// A failing multi: layout and no change at all.
	before := h.tree.View()
	res = h.apply(jute.OpMulti, &jute.MultiRequest{Ops: []jute.MultiOp{
		{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: "/n", ACL: worldAll}},
		{Type: jute.OpSetData, Req: &jute.SetDataRequest{Path: "/x", Version: -1}},
		{Type: jute.OpCheck, Req: &jute.CheckVersionRequest{Path: "/x", Version: 0}},
		{Type: jute.OpSetData, Req: &jute.SetDataRequest{Path: "/x", Version: -1}},
		{Type: jute.OpCreate2, Req: &jute.CreateRequest{Path: "/n2", ACL: worldAll}},
	}})
	if res.Err != nil {
		t.Fatalf("failed multi header err = %v; want nil", res.Err)
	}
	var got []string
	for _, r := range res.Resp.(*jute.MultiResponse).Results {
		if r.Type != jute.OpError || r.Resp.(*jute.ErrorResponse).Err != r.Err {
			t.Fatalf("failed multi result %+v", r)
		}
		got = append(got, fmt.Sprint(int32(r.Err)))
	}
	if w := []string{"0", "0", "-103", "-2", "-2"}; !slices.Equal(got, w) {
		t.Fatalf("failed multi codes %v; want %v", got, w)
	}
	if h.exists("/n") || h.stat("/x").Version != 1 || res.Events != nil {
		t.Fatalf("failed multi changed the tree")
	}
	var b1, b2 strings.Builder
	if err := before.WriteSnapshot(&b1); err != nil {
		t.Fatal(err)
	}
	after := h.tree.View()
	if after.Zxid() != res.Zxid {
		t.Fatalf("failed multi did not use its zxid")
	}
	a := *after
	a.zxid = before.zxid
	if err := a.WriteSnapshot(&b2); err != nil {
		t.Fatal(err)
	}
	if b1.String() != b2.String() {
		t.Fatalf("failed multi changed the state")
	}

	// Reads inside a multi, or unknown op types: the whole request fails with MarshallingError.
	res = h.apply(jute.OpMulti, &jute.MultiRequest{Ops: []jute.MultiOp{
		{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: "/r", ACL: worldAll}},
		{Type: jute.OpGetData, Req: &jute.GetDataRequest{Path: "/x"}},
	}})
	wantCode(t, "multi with a read", res.Err, jute.CodeMarshallingError)
	if h.exists("/r") {
		t.Fatalf("multi with a read applied its write")
	}
	// An empty multi succeeds and uses a zxid.
	res = h.apply(jute.OpMulti, &jute.MultiRequest{})
	if res.Err != nil || len(res.Resp.(*jute.MultiResponse).Results) != 0 {
		t.Fatalf("empty multi = %+v", res)
	}
	// A multi's ephemeral on an unknown session fails that op.
	res = h.apply(jute.OpMulti, &jute.MultiRequest{Ops: []jute.MultiOp{
		{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: "/e", ACL: worldAll, Flags: jute.ModeEphemeral}},
	}})
	if r := res.Resp.(*jute.MultiResponse).Results[0]; r.Err != jute.CodeSessionExpired {
		t.Fatalf("ephemeral in multi without session: %+v", r)
	}
}

func TestMultiRead(t *testing.T) {
	h := newHarness(t)
	h.mustCreate("/a", 0)
	h.mustCreate("/a/b", 0)
	h.apply(jute.OpCreate, &jute.CreateRequest{Path: "/secret", ACL: []jute.ACL{{Perms: jute.PermAll, ID: jute.Id{Scheme: "digest", ID: "u:x"}}}})
	v := h.tree.View()
	resp, err := v.Read(0, nil, jute.OpMultiRead, &jute.MultiRequest{Ops: []jute.MultiOp{
		{Type: jute.OpGetChildren, Req: &jute.GetChildrenRequest{Path: "/a", Watch: true}},
		{Type: jute.OpGetData, Req: &jute.GetDataRequest{Path: "/a/b"}},
		{Type: jute.OpGetData, Req: &jute.GetDataRequest{Path: "/nope"}},
		{Type: jute.OpGetChildren, Req: &jute.GetChildrenRequest{Path: "/secret"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	rs := resp.(*jute.MultiResponse).Results
	if rs[0].Type != jute.OpGetChildren || !slices.Equal(rs[0].Resp.(*jute.GetChildrenResponse).Children, []string{"b"}) {
		t.Fatalf("multiRead[0] = %+v", rs[0])
	}
	if rs[1].Type != jute.OpGetData || string(rs[1].Resp.(*jute.GetDataResponse).Data) != "d" {
		t.Fatalf("multiRead[1] = %+v", rs[1])
	}
	if rs[2].Type != jute.OpError || rs[2].Err != jute.CodeNoNode || rs[3].Err != jute.CodeNoAuth {
		t.Fatalf("multiRead errors = %+v %+v", rs[2], rs[3])
	}
	resp, err = v.Read(0, nil, jute.OpMultiRead, &jute.MultiRequest{Ops: []jute.MultiOp{
		{Type: jute.OpDelete, Req: &jute.DeleteRequest{Path: "/a"}},
	}})
	wantCode(t, "multiRead with a write", err, jute.CodeMarshallingError)
	if mr, ok := resp.(*jute.MultiResponse); !ok || len(mr.Results) != 0 {
		t.Fatalf("multiRead with a write returned %#v; want an empty MultiResponse", resp)
	}
}

func TestSessions(t *testing.T) {
	h := newHarness(t)
	h.openSession(5)
	h.openSession(3)
	h.openSession(9)
	if got := h.tree.View().Sessions(); len(got) != 3 || got[0].ID != 3 || got[2].ID != 9 || got[1].Timeout != 4000 {
		t.Fatalf("Sessions() = %+v", got)
	}
	h.sess = 5
	h.mustCreate("/d", 0)
	h.mustCreate("/e", jute.ModeEphemeral)
	h.mustCreate("/es-", jute.ModeEphemeralSequential)
	h.mustCreate("/d/x", jute.ModeEphemeral)
	h.sess = 9
	h.mustCreate("/d/y", jute.ModeEphemeral)
	h.sess = 5
	v := h.tree.View()
	if got, want := v.Ephemerals(5), []string{"/d/x", "/e", "/es-0000000002"}; !slices.Equal(got, want) {
		t.Fatalf("Ephemerals(5) = %v; want %v", got, want)
	}
	for _, tt := range []struct {
		prefix string
		want   []string
	}{
		{"", []string{"/d/x", "/e", "/es-0000000002"}},
		{"/", []string{"/d/x", "/e", "/es-0000000002"}},
		{"/e", []string{"/e", "/es-0000000002"}},
		{"/d", []string{"/d/x"}},
		{"/zz", []string{}},
	} {
		resp, err := v.Read(5, nil, jute.OpGetEphemerals, &jute.GetEphemeralsRequest{PrefixPath: tt.prefix})
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.(*jute.GetEphemeralsResponse).Ephemerals; !slices.Equal(got, tt.want) || got == nil {
			t.Errorf("getEphemerals(%q) = %#v; want %v", tt.prefix, got, tt.want)
		}
	}
	if v.EphemeralCount() != 4 {
		t.Fatalf("EphemeralCount = %d", v.EphemeralCount())
	}
	// Deleting an ephemeral drops it from its session.
	h.apply(jute.OpDelete, &jute.DeleteRequest{Path: "/e", Version: -1})
	if got := h.tree.View().Ephemerals(5); !slices.Equal(got, []string{"/d/x", "/es-0000000002"}) {
		t.Fatalf("after delete: %v", got)
	}
	// Closing sessions: one zxid, all ephemerals, events; unknown ids skipped.
	res := h.apply(jute.OpCloseSession, &CloseSessions{IDs: []int64{5, 42, 9}})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	want := []string{"NodeDeleted /d/x", "NodeChildrenChanged /d", "NodeDeleted /es-0000000002", "NodeChildrenChanged /",
		"NodeDeleted /d/y", "NodeChildrenChanged /d"}
	if got := eventStrings(res.Events); !slices.Equal(got, want) {
		t.Fatalf("closeSessions events %q; want %q", got, want)
	}
	v = h.tree.View()
	if v.EphemeralCount() != 0 || h.exists("/d/x") || h.exists("/d/y") {
		t.Fatalf("ephemerals survived their sessions")
	}
	if st := h.stat("/d"); st.Pzxid != res.Zxid || st.NumChildren != 0 {
		t.Fatalf("Stat(/d) after close = %+v", st)
	}
	if got := v.Sessions(); len(got) != 1 || got[0].ID != 3 {
		t.Fatalf("Sessions() after close = %+v", got)
	}
	if _, ok := v.Session(5); ok {
		t.Fatalf("Session(5) still present")
	}
	if s, ok := v.Session(3); !ok || string(s.Passwd) != "0123456789abcdef" {
		t.Fatalf("Session(3) = %+v, %v", s, ok)
	}
	// closeSession with no body closes the txn's own session.
	h.sess = 3
	h.apply(jute.OpCloseSession, nil)
	if len(h.tree.View().Sessions()) != 0 {
		t.Fatalf("closeSession(nil) left %v", h.tree.View().Sessions())
	}
}

func TestReap(t *testing.T) {
	h := newHarness(t)
	h.now = 1000
	h.apply(jute.OpCreateContainer, &jute.CreateRequest{Path: "/used", ACL: worldAll})
	h.apply(jute.OpCreateContainer, &jute.CreateRequest{Path: "/unused", ACL: worldAll})
	h.apply(jute.OpCreateContainer, &jute.CreateRequest{Path: "/full", ACL: worldAll})
	h.apply(jute.OpCreateTTL, &jute.CreateTTLRequest{Path: "/ttl", ACL: worldAll, Flags: jute.ModePersistentWithTTL, TTL: 500})
	h.apply(jute.OpCreateTTL, &jute.CreateTTLRequest{Path: "/ttlkid", ACL: worldAll, Flags: jute.ModePersistentWithTTL, TTL: 500})
	h.mustCreate("/used/c", 0)
	h.apply(jute.OpDelete, &jute.DeleteRequest{Path: "/used/c", Version: -1})
	h.mustCreate("/full/c", 0)
	h.mustCreate("/ttlkid/c", 0)
	v := h.tree.View()
	for _, tt := range []struct {
		now, never int64
		max        int
		want       []string
	}{
		{1000, 0, 0, []string{"/used"}},
		{1500, 0, 0, []string{"/used"}}, // ttl not passed yet (strictly greater)
		{1501, 0, 0, []string{"/used", "/ttl"}},
		{1501, 100, 0, []string{"/unused", "/used", "/ttl"}},
		{1501, 100, 2, []string{"/unused", "/used"}},
		{1100, 100, 0, []string{"/used"}},
	} {
		if got := v.ReapCandidates(tt.now, tt.never, tt.max); !slices.Equal(got, tt.want) {
			t.Errorf("ReapCandidates(%d, %d, %d) = %v; want %v", tt.now, tt.never, tt.max, got, tt.want)
		}
	}
	// setData on a TTL node resets its clock; Apply checks candidates again.
	h.now = 1400
	h.apply(jute.OpSetData, &jute.SetDataRequest{Path: "/ttl", Version: -1})
	h.now = 1600
	h.mustCreate("/used/again", 0)
	res := h.apply(jute.OpDeleteContainer, &Reap{Paths: []string{"/used", "/ttl", "/full", "/gone", "/unused"}, NeverUsedInterval: 0})
	if res.Err != nil || len(res.Events) != 0 {
		t.Fatalf("reap of non-candidates = %+v", res)
	}
	h.apply(jute.OpDelete, &jute.DeleteRequest{Path: "/used/again", Version: -1})
	h.now = 2000
	res = h.apply(jute.OpDeleteContainer, &Reap{Paths: []string{"/used", "/ttl", "/unused"}, NeverUsedInterval: 10})
	want := []string{"NodeDeleted /used", "NodeChildrenChanged /", "NodeDeleted /ttl", "NodeChildrenChanged /", "NodeDeleted /unused", "NodeChildrenChanged /"}
	if got := eventStrings(res.Events); !slices.Equal(got, want) {
		t.Fatalf("reap events %q; want %q", got, want)
	}
	if got := h.tree.View().ReapCandidates(99999, 1, 0); len(got) != 0 {
		t.Fatalf("candidates after reaping: %v", got)
	}
	// deleteContainer as a client op.
	h.openSession(1)
	h.sess = 1
	h.mustCreate("/eph", jute.ModeEphemeral)
	for _, tt := range []struct {
		path string
		want jute.Code
	}{
		{"/", jute.CodeBadArguments},
		{"/nope", jute.CodeNoNode},
		{"/full", jute.CodeNotEmpty},
		{"/eph", jute.CodeBadVersion},
		{"/full/c", jute.CodeOK},
	} {
		res := h.apply(jute.OpDeleteContainer, &jute.DeleteContainerRequest{Path: tt.path})
		wantCode(t, "deleteContainer "+tt.path, res.Err, tt.want)
	}
}
