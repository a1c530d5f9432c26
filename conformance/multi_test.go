package conformance

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/zkd-io/zkd/jute"
)

// rawMulti sends a multi and returns its header and decoded response.
func rawMulti(t *testing.T, r *Raw, op jute.Op, ops ...jute.MultiOp) (jute.ReplyHeader, jute.MultiResponse) {
	t.Helper()
	var resp jute.MultiResponse
	h, err := r.Do(op, &jute.MultiRequest{Ops: ops}, &resp)
	must(t, op.String(), err)
	return h, resp
}

func mCreate(path string, flags jute.CreateMode) jute.MultiOp {
	return jute.MultiOp{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: path, ACL: openACL(), Flags: flags}}
}

func mDelete(path string) jute.MultiOp {
	return jute.MultiOp{Type: jute.OpDelete, Req: &jute.DeleteRequest{Path: path, Version: -1}}
}

func mSet(path string, data []byte, version int32) jute.MultiOp {
	return jute.MultiOp{Type: jute.OpSetData, Req: &jute.SetDataRequest{Path: path, Data: data, Version: version}}
}

func mCheck(path string, version int32) jute.MultiOp {
	return jute.MultiOp{Type: jute.OpCheck, Req: &jute.CheckVersionRequest{Path: path, Version: version}}
}

// resultShape is the (type, err) pair of a multi result.
type resultShape struct {
	Type jute.Op
	Err  jute.Code
}

func shapes(resp jute.MultiResponse) []resultShape {
	var s []resultShape
	for _, r := range resp.Results {
		s = append(s, resultShape{r.Type, r.Err})
	}
	return s
}

func equalShapes(a, b []resultShape) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestMulti(t *testing.T) {
	runChecks(t, "multi", []check{
		{"success_result_types_match_the_ops", func(t *testing.T, e *env) {
			e.mk(e.p("d"), nil)
			e.mk(e.p("s"), nil)
			r := e.raw()
			_, resp := rawMulti(t, r, jute.OpMulti,
				mCreate(e.p("c"), 0), mDelete(e.p("d")), mSet(e.p("s"), []byte("x"), 0), mCheck(e.p("s"), 1))
			want := []resultShape{{jute.OpCreate, 0}, {jute.OpDelete, 0}, {jute.OpSetData, 0}, {jute.OpCheck, 0}}
			if got := shapes(resp); !equalShapes(got, want) {
				t.Fatalf("results %+v; want %+v", got, want)
			}
			if p := resp.Results[0].Resp.(*jute.CreateResponse).Path; p != e.p("c") {
				t.Fatalf("create result path %q", p)
			}
			if st := resp.Results[2].Resp.(*jute.SetDataResponse).Stat; st.Version != 1 {
				t.Fatalf("setData result stat version %d; want 1", st.Version)
			}
		}},
		{"go_client_multi_succeeds", func(t *testing.T, e *env) {
			res, err := e.zk.Multi(
				&zk.CreateRequest{Path: e.p("a"), Acl: zk.WorldACL(zk.PermAll)},
				&zk.SetDataRequest{Path: e.p("a"), Data: []byte("x"), Version: 0},
				&zk.CheckVersionRequest{Path: e.p("a"), Version: 1},
				&zk.DeleteRequest{Path: e.p("a"), Version: 1},
			)
			must(t, "multi", err)
			for i, r := range res {
				if r.Error != nil {
					t.Fatalf("result %d: %v", i, r.Error)
				}
			}
		}},
		{"failure_layout_is_ok_code_then_runtime_inconsistency", func(t *testing.T, e *env) {
			e.mk(e.p("s"), nil)
			r := e.raw()
			h, resp := rawMulti(t, r, jute.OpMulti,
				mCreate(e.p("c"), 0), mCheck(e.p("s"), 9), mSet(e.p("s"), []byte("x"), -1))
			want := []resultShape{{jute.OpError, 0}, {jute.OpError, jute.CodeBadVersion}, {jute.OpError, jute.CodeRuntimeInconsistency}}
			if got := shapes(resp); h.Err != 0 || !equalShapes(got, want) {
				t.Fatalf("header err %d results %+v; want header 0 and %+v", h.Err, got, want)
			}
			for i, res := range resp.Results {
				if er, ok := res.Resp.(*jute.ErrorResponse); !ok || er.Err != res.Err {
					t.Fatalf("result %d body %+v; want ErrorResponse{%d}", i, res.Resp, res.Err)
				}
			}
		}},
		{"failure_applies_nothing", func(t *testing.T, e *env) {
			e.mk(e.p("s"), []byte("old"))
			_, err := e.zk.Multi(
				&zk.CreateRequest{Path: e.p("c"), Acl: zk.WorldACL(zk.PermAll)},
				&zk.SetDataRequest{Path: e.p("s"), Data: []byte("new"), Version: -1},
				&zk.DeleteRequest{Path: e.p("missing"), Version: -1},
			)
			if !errors.Is(err, zk.ErrNoNode) {
				t.Fatalf("multi: %v; want ErrNoNode", err)
			}
			if e.exists(e.p("c")) {
				t.Fatalf("create of a failed multi was applied")
			}
			if data, _, _ := e.zk.Get(e.p("s")); string(data) != "old" {
				t.Fatalf("setData of a failed multi was applied: %q", data)
			}
		}},
		{"go_client_reports_per_op_errors", func(t *testing.T, e *env) {
			res, err := e.zk.Multi(
				&zk.CreateRequest{Path: e.p("c"), Acl: zk.WorldACL(zk.PermAll)},
				&zk.CreateRequest{Path: e.p("c"), Acl: zk.WorldACL(zk.PermAll)},
				&zk.DeleteRequest{Path: e.p("c"), Version: -1},
			)
			if err == nil || len(res) != 3 || res[0].Error != nil || !errors.Is(res[1].Error, zk.ErrNodeExists) || res[2].Error == nil {
				t.Fatalf("multi = %+v, %v; want [ok, NodeExists, runtime inconsistency]", res, err)
			}
		}},
		{"whole_multi_has_one_zxid", func(t *testing.T, e *env) {
			r := e.raw()
			h, _ := rawMulti(t, r, jute.OpMulti, mCreate(e.p("a"), 0), mCreate(e.p("b"), 0), mCreate(e.p("c"), 0))
			for _, n := range []string{"a", "b", "c"} {
				if st := e.stat(e.p(n)); st.Czxid != h.Zxid {
					t.Fatalf("%s czxid 0x%x; multi reply zxid 0x%x", n, st.Czxid, h.Zxid)
				}
			}
		}},
		{"later_ops_see_earlier_ops", func(t *testing.T, e *env) {
			r := e.raw()
			_, resp := rawMulti(t, r, jute.OpMulti,
				mCreate(e.p("m"), 0), mCreate(e.p("m", "c"), 0), mDelete(e.p("m", "c")), mDelete(e.p("m")))
			for i, res := range resp.Results {
				if res.Err != 0 || res.Type == jute.OpError {
					t.Fatalf("result %d %+v; want success", i, res)
				}
			}
			if e.exists(e.p("m")) {
				t.Fatalf("node created and deleted in one multi exists")
			}
		}},
		{"empty_multi_succeeds_and_uses_a_zxid", func(t *testing.T, e *env) {
			r := e.raw()
			h1, _ := rawCreate(t, r, e.p("n"), nil, jute.ModePersistent)
			h2, resp := rawMulti(t, r, jute.OpMulti)
			if len(resp.Results) != 0 || h2.Zxid <= h1.Zxid {
				t.Fatalf("empty multi: %d results zxid 0x%x (previous 0x%x); want none and a new zxid", len(resp.Results), h2.Zxid, h1.Zxid)
			}
		}},
		{"failed_multi_uses_a_zxid", func(t *testing.T, e *env) {
			r := e.raw()
			h1, _ := rawCreate(t, r, e.p("n"), nil, jute.ModePersistent)
			h2, _ := rawMulti(t, r, jute.OpMulti, mCheck(e.p("n"), 5))
			if h2.Zxid <= h1.Zxid {
				t.Fatalf("failed multi zxid 0x%x not after 0x%x", h2.Zxid, h1.Zxid)
			}
		}},
		{"create2_result_type_3_8_or_3_9", func(t *testing.T, e *env) {
			r := e.raw()
			_, resp := rawMulti(t, r, jute.OpMulti,
				jute.MultiOp{Type: jute.OpCreate2, Req: &jute.CreateRequest{Path: e.p("c"), ACL: openACL()}})
			switch res := resp.Results[0]; {
			case res.Type == jute.OpCreate2 && res.Resp.(*jute.Create2Response).Path == e.p("c"):
				e.seen("create2 in multi returns type 15 with a stat (ZooKeeper 3.8.2+/3.9)")
			case res.Type == jute.OpCreate && res.Resp.(*jute.CreateResponse).Path == e.p("c"):
				e.seen("create2 in multi returns type 1 (ZooKeeper 3.8.0/3.8.1)")
			default:
				t.Fatalf("create2 result %+v", res)
			}
		}},
		{"plain_create_result_is_never_type_15", func(t *testing.T, e *env) {
			r := e.raw()
			_, resp := rawMulti(t, r, jute.OpMulti, mCreate(e.p("a"), 0), mCreate(e.p("b"), jute.ModeEphemeral), mCreate(e.p("s-"), jute.ModePersistentSequential))
			for i, res := range resp.Results {
				if res.Type != jute.OpCreate {
					t.Fatalf("result %d type %v; want create (1)", i, res.Type)
				}
			}
		}},
		{"read_op_inside_multi_fails_MarshallingError", func(t *testing.T, e *env) {
			r := e.raw()
			rep, err := r.Call(jute.OpMulti, &jute.MultiRequest{Ops: []jute.MultiOp{
				mCreate(e.p("c"), 0),
				{Type: jute.OpGetData, Req: &jute.GetDataRequest{Path: e.base}},
			}})
			must(t, "multi", err)
			if rep.Header.Err != jute.CodeMarshallingError {
				t.Fatalf("multi with a read: %+v; want MarshallingError", rep.Header)
			}
			if e.exists(e.p("c")) {
				t.Fatalf("create applied from a refused multi")
			}
		}},
		{"check_alone_is_not_a_valid_request", func(t *testing.T, e *env) {
			if !e.tg.Standalone() && strings.HasPrefix(e.tg.Version, "3.8") {
				// Observed on 3.8.0: the follower forwards it, fails with "Unsupported Txn with
				// type=13", drops out of the quorum and closes every client connection.
				t.Skip("a top-level check knocks a ZooKeeper 3.8 follower out of the quorum")
			}
			r := e.raw()
			must(t, "send check", r.Send(1, jute.OpCheck, &jute.CheckVersionRequest{Path: e.base, Version: 0}))
			got, err := r.ReadUntilClosed(3 * waitTimeout / 10)
			switch {
			case errors.Is(err, ErrStillOpen) && len(got) == 0:
				e.seen("top-level check gets no answer (ZooKeeper 3.8.0)")
			case err == nil && len(got) == 1 && got[0].Header.Err == jute.CodeUnimplemented:
				e.seen("top-level check gets Unimplemented and a close (ZooKeeper 3.9)")
			default:
				t.Fatalf("top-level check: %+v, %v; want no answer (3.8) or -6 then close (3.9)", got, err)
			}
		}},
		{"check_ok_and_setData_version_in_multi", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			_, err := e.zk.Multi(&zk.CheckVersionRequest{Path: e.p("n"), Version: 0}, &zk.SetDataRequest{Path: e.p("n"), Data: []byte("x"), Version: 0})
			must(t, "multi", err)
			if st := e.stat(e.p("n")); st.Version != 1 {
				t.Fatalf("version %d after multi", st.Version)
			}
		}},
		{"check_on_missing_node_fails_NoNode", func(t *testing.T, e *env) {
			res, err := e.zk.Multi(&zk.CheckVersionRequest{Path: e.p("missing"), Version: 0})
			if err == nil || !errors.Is(res[0].Error, zk.ErrNoNode) {
				t.Fatalf("check missing: %+v %v; want NoNode", res, err)
			}
		}},
		{"multi_create_of_existing_node_fails_NodeExists", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			r := e.raw()
			_, resp := rawMulti(t, r, jute.OpMulti, mCreate(e.p("n"), 0))
			if got := shapes(resp); !equalShapes(got, []resultShape{{jute.OpError, jute.CodeNodeExists}}) {
				t.Fatalf("results %+v", got)
			}
		}},
		{"multi_ephemeral_create_is_owned_by_the_session", func(t *testing.T, e *env) {
			r := e.raw()
			rawMulti(t, r, jute.OpMulti, mCreate(e.p("e"), jute.ModeEphemeral))
			if st := e.stat(e.p("e")); st.EphemeralOwner != r.Session.SessionID {
				t.Fatalf("owner 0x%x; want 0x%x", st.EphemeralOwner, r.Session.SessionID)
			}
		}},
		{"multi_with_bad_path_fails_BadArguments", func(t *testing.T, e *env) {
			r := e.raw()
			_, resp := rawMulti(t, r, jute.OpMulti, mCreate(e.p("ok"), 0), mCreate(e.base+"/", 0))
			if got := shapes(resp); !equalShapes(got, []resultShape{{jute.OpError, 0}, {jute.OpError, jute.CodeBadArguments}}) {
				t.Fatalf("results %+v", got)
			}
		}},
		{"setData_result_stat_carries_the_multi_zxid", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			r := e.raw()
			h, resp := rawMulti(t, r, jute.OpMulti, mSet(e.p("n"), []byte("a"), 0), mSet(e.p("n"), []byte("bb"), 1))
			st := resp.Results[1].Resp.(*jute.SetDataResponse).Stat
			if st.Version != 2 || st.Mzxid != h.Zxid || st.DataLength != 2 {
				t.Fatalf("second setData stat %+v (multi zxid 0x%x); want version 2, mzxid = multi zxid, dataLength 2", st, h.Zxid)
			}
			first := resp.Results[0].Resp.(*jute.SetDataResponse).Stat
			if first.Version != 1 || first.Mzxid != h.Zxid {
				t.Fatalf("first setData stat %+v; want version 1 with the multi zxid", first)
			}
		}},
		{"parent_stat_counts_every_child_change_in_a_multi", func(t *testing.T, e *env) {
			r := e.raw()
			rawCreate(t, r, e.p("p"), nil, jute.ModePersistent)
			h, _ := rawMulti(t, r, jute.OpMulti, mCreate(e.p("p", "a"), 0), mCreate(e.p("p", "b"), 0), mDelete(e.p("p", "a")))
			st := e.stat(e.p("p"))
			if st.Cversion != 3 || st.NumChildren != 1 || st.Pzxid != h.Zxid {
				t.Fatalf("parent %+v after 2 creates and 1 delete in a multi at 0x%x; want cversion 3, 1 child, pzxid = multi zxid", st, h.Zxid)
			}
		}},
		{"create_errors_are_header_only_for_every_create_op", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			r := e.raw()
			for _, op := range []jute.Op{jute.OpCreate, jute.OpCreate2, jute.OpCreateContainer} {
				flags := jute.ModePersistent
				if op == jute.OpCreateContainer {
					flags = jute.ModeContainer
				}
				_, err := r.Do(op, &jute.CreateRequest{Path: e.p("n"), ACL: openACL(), Flags: flags}, jute.NewResponse(op))
				wantCode(t, op.String()+" existing", err, jute.CodeNodeExists)
				_, err = r.Do(op, &jute.CreateRequest{Path: e.p("missing", "x"), ACL: openACL(), Flags: flags}, jute.NewResponse(op))
				wantCode(t, op.String()+" without parent", err, jute.CodeNoNode)
			}
		}},
		{"container_create_in_multi_returns_type_15", func(t *testing.T, e *env) {
			r := e.raw()
			_, resp := rawMulti(t, r, jute.OpMulti,
				jute.MultiOp{Type: jute.OpCreateContainer, Req: &jute.CreateRequest{Path: e.p("c"), ACL: openACL(), Flags: jute.ModeContainer}})
			if res := resp.Results[0]; res.Type != jute.OpCreate2 || res.Resp.(*jute.Create2Response).Path != e.p("c") {
				t.Fatalf("createContainer result %+v; want type 15 with the path", res)
			}
		}},
	})
}

func TestMultiRead(t *testing.T) {
	mGetChildren := func(path string) jute.MultiOp {
		return jute.MultiOp{Type: jute.OpGetChildren, Req: &jute.GetChildrenRequest{Path: path}}
	}
	mGetData := func(path string, watch bool) jute.MultiOp {
		return jute.MultiOp{Type: jute.OpGetData, Req: &jute.GetDataRequest{Path: path, Watch: watch}}
	}
	runChecks(t, "multiread", []check{
		{"results_per_op_with_errors_in_place", func(t *testing.T, e *env) {
			e.mk(e.p("a"), []byte("data"))
			e.mk(e.p("a", "k"), nil)
			r := e.raw()
			h, resp := rawMulti(t, r, jute.OpMultiRead,
				mGetChildren(e.p("a")), mGetData(e.p("a"), false), mGetData(e.p("nope"), false), mGetChildren(e.p("nope")))
			want := []resultShape{{jute.OpGetChildren, 0}, {jute.OpGetData, 0}, {jute.OpError, jute.CodeNoNode}, {jute.OpError, jute.CodeNoNode}}
			if got := shapes(resp); h.Err != 0 || !equalShapes(got, want) {
				t.Fatalf("header err %d results %+v; want 0 and %+v", h.Err, got, want)
			}
			kids := resp.Results[0].Resp.(*jute.GetChildrenResponse).Children
			gd := resp.Results[1].Resp.(*jute.GetDataResponse)
			if len(kids) != 1 || kids[0] != "k" || string(gd.Data) != "data" || gd.Stat.NumChildren != 1 {
				t.Fatalf("children %v data %q stat %+v", kids, gd.Data, gd.Stat)
			}
		}},
		{"watch_flag_is_ignored", func(t *testing.T, e *env) {
			e.mk(e.p("a"), nil)
			r := e.raw()
			rawMulti(t, r, jute.OpMultiRead, mGetData(e.p("a"), true))
			_, err := e.zk.Set(e.p("a"), []byte("x"), -1)
			must(t, "set", err)
			e.watchBarrier(r)
		}},
		{"write_op_fails_MarshallingError", func(t *testing.T, e *env) {
			r := e.raw()
			rep, err := r.Call(jute.OpMultiRead, &jute.MultiRequest{Ops: []jute.MultiOp{mCreate(e.p("c"), 0)}})
			must(t, "multiRead", err)
			if rep.Header.Err != jute.CodeMarshallingError {
				t.Fatalf("multiRead with a create: %+v; want MarshallingError", rep.Header)
			}
			if len(rep.Body) == 0 {
				e.seen("multiRead error reply has no body")
			} else {
				var resp jute.MultiResponse
				if err := rep.Decode(&resp); err != nil || len(resp.Results) != 0 {
					t.Fatalf("multiRead error body %x: %v; want an empty MultiResponse", rep.Body, err)
				}
				e.seen("multiRead error reply carries an empty MultiResponse (ZooKeeper 3.8/3.9 quirk)")
			}
		}},
		{"empty_multiRead_succeeds", func(t *testing.T, e *env) {
			r := e.raw()
			_, resp := rawMulti(t, r, jute.OpMultiRead)
			if len(resp.Results) != 0 {
				t.Fatalf("%d results", len(resp.Results))
			}
		}},
		{"acl_is_checked_per_op", func(t *testing.T, e *env) {
			e.mk(e.p("open"), nil)
			c := e.conn()
			must(t, "addauth", c.AddAuth("digest", []byte("o:pw")))
			_, err := c.Create(e.p("locked"), nil, 0, digestACL("o", "pw"))
			must(t, "create locked", err)
			r := e.raw()
			_, resp := rawMulti(t, r, jute.OpMultiRead, mGetData(e.p("locked"), false), mGetData(e.p("open"), false))
			want := []resultShape{{jute.OpError, jute.CodeNoAuth}, {jute.OpGetData, 0}}
			if got := shapes(resp); !equalShapes(got, want) {
				t.Fatalf("results %+v; want %+v", got, want)
			}
		}},
	})
}

func TestGetAllChildrenNumber(t *testing.T) {
	runChecks(t, "allchildren", []check{
		{"counts_all_descendants", func(t *testing.T, e *env) {
			for _, p := range []string{"a", "a/b", "a/b/c", "a/d", "e"} {
				e.mk(e.base+"/"+p, nil)
			}
			r := e.raw()
			var resp jute.GetAllChildrenNumberResponse
			_, err := r.Do(jute.OpGetAllChildrenNumber, &jute.GetAllChildrenNumberRequest{Path: e.base}, &resp)
			must(t, "getAllChildrenNumber", err)
			if resp.TotalNumber != 5 {
				t.Fatalf("total %d; want 5", resp.TotalNumber)
			}
		}},
		{"leaf_has_zero", func(t *testing.T, e *env) {
			r := e.raw()
			var resp jute.GetAllChildrenNumberResponse
			_, err := r.Do(jute.OpGetAllChildrenNumber, &jute.GetAllChildrenNumberRequest{Path: e.base}, &resp)
			must(t, "getAllChildrenNumber", err)
			if resp.TotalNumber != 0 {
				t.Fatalf("total %d; want 0", resp.TotalNumber)
			}
		}},
		{"missing_node_fails_NoNode", func(t *testing.T, e *env) {
			r := e.raw()
			_, err := r.Do(jute.OpGetAllChildrenNumber, &jute.GetAllChildrenNumberRequest{Path: e.p("missing")}, &jute.GetAllChildrenNumberResponse{})
			wantCode(t, "getAllChildrenNumber missing", err, jute.CodeNoNode)
		}},
		{"needs_READ", func(t *testing.T, e *env) {
			c := e.conn()
			must(t, "addauth", c.AddAuth("digest", []byte("o:pw")))
			_, err := c.Create(e.p("locked"), nil, 0, digestACL("o", "pw"))
			must(t, "create", err)
			r := e.raw()
			_, err = r.Do(jute.OpGetAllChildrenNumber, &jute.GetAllChildrenNumberRequest{Path: e.p("locked")}, &jute.GetAllChildrenNumberResponse{})
			wantCode(t, "getAllChildrenNumber without READ", err, jute.CodeNoAuth)
		}},
		{"root_counts_the_system_nodes", func(t *testing.T, e *env) {
			r := e.raw()
			var resp jute.GetAllChildrenNumberResponse
			_, err := r.Do(jute.OpGetAllChildrenNumber, &jute.GetAllChildrenNumberRequest{Path: "/"}, &resp)
			must(t, "getAllChildrenNumber /", err)
			// /zookeeper, /zookeeper/quota, /zookeeper/config, the suite root and this check's node.
			if resp.TotalNumber < 5 {
				t.Fatalf("total under / %d; want at least 5", resp.TotalNumber)
			}
		}},
	})
}
