package conformance

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/zkd-io/zkd/jute"
)

func TestCRUD(t *testing.T) {
	runChecks(t, "crud", []check{
		{"create_returns_the_path", func(t *testing.T, e *env) {
			got, err := e.zk.Create(e.p("a"), []byte("v"), 0, zk.WorldACL(zk.PermAll))
			must(t, "create", err)
			if got != e.p("a") {
				t.Fatalf("create returned %q; want %q", got, e.p("a"))
			}
		}},
		{"create_op_1_reply_body_is_the_path_only", func(t *testing.T, e *env) {
			r := e.raw()
			var resp jute.CreateResponse
			_, err := r.Do(jute.OpCreate, &jute.CreateRequest{Path: e.p("a"), ACL: openACL()}, &resp)
			must(t, "create", err)
			if resp.Path != e.p("a") {
				t.Fatalf("path %q; want %q", resp.Path, e.p("a"))
			}
		}},
		{"create2_reply_body_is_path_and_stat", func(t *testing.T, e *env) {
			r := e.raw()
			h, resp := rawCreate(t, r, e.p("a"), []byte("abc"), jute.ModePersistent)
			if resp.Path != e.p("a") || resp.Stat.Czxid != h.Zxid || resp.Stat.DataLength != 3 {
				t.Fatalf("create2 gave %+v with reply zxid 0x%x; want the path and a stat with czxid = reply zxid, dataLength 3", resp, h.Zxid)
			}
		}},
		{"create_existing_node_fails_NodeExists", func(t *testing.T, e *env) {
			e.mk(e.p("a"), nil)
			_, err := e.zk.Create(e.p("a"), nil, 0, zk.WorldACL(zk.PermAll))
			if !errors.Is(err, zk.ErrNodeExists) {
				t.Fatalf("second create: %v; want ErrNodeExists", err)
			}
		}},
		{"create_without_parent_fails_NoNode", func(t *testing.T, e *env) {
			_, err := e.zk.Create(e.p("missing", "child"), nil, 0, zk.WorldACL(zk.PermAll))
			if !errors.Is(err, zk.ErrNoNode) {
				t.Fatalf("create under a missing parent: %v; want ErrNoNode", err)
			}
		}},
		{"create_with_unknown_flags_fails_BadArguments", func(t *testing.T, e *env) {
			r := e.raw()
			_, err := r.Do(jute.OpCreate, &jute.CreateRequest{Path: e.p("f"), ACL: openACL(), Flags: 7}, &jute.CreateResponse{})
			wantCode(t, "create with flags 7", err, jute.CodeBadArguments)
		}},
		{"create_with_container_flag_through_op_create_succeeds", func(t *testing.T, e *env) {
			r := e.raw()
			_, err := r.Do(jute.OpCreate, &jute.CreateRequest{Path: e.p("c"), ACL: openACL(), Flags: jute.ModeContainer}, &jute.CreateResponse{})
			wantCode(t, "create with flag 4 through op 1", err, jute.CodeOK)
		}},
		{"get_returns_data_and_stat", func(t *testing.T, e *env) {
			e.mk(e.p("a"), []byte("hello"))
			data, st, err := e.zk.Get(e.p("a"))
			must(t, "get", err)
			if string(data) != "hello" || st.DataLength != 5 {
				t.Fatalf("get = %q dataLength %d; want hello, 5", data, st.DataLength)
			}
		}},
		{"get_missing_node_fails_NoNode", func(t *testing.T, e *env) {
			_, _, err := e.zk.Get(e.p("missing"))
			if !errors.Is(err, zk.ErrNoNode) {
				t.Fatalf("get missing: %v; want ErrNoNode", err)
			}
		}},
		{"exists_missing_node_is_NoNode_header_only", func(t *testing.T, e *env) {
			r := e.raw()
			rep, err := r.Call(jute.OpExists, &jute.ExistsRequest{Path: e.p("missing")})
			must(t, "exists", err)
			if rep.Header.Err != jute.CodeNoNode || len(rep.Body) != 0 {
				t.Fatalf("exists missing: %+v body %d bytes; want -101 with no body", rep.Header, len(rep.Body))
			}
		}},
		{"exists_returns_the_stat", func(t *testing.T, e *env) {
			e.mk(e.p("a"), []byte("xy"))
			ok, st, err := e.zk.Exists(e.p("a"))
			if err != nil || !ok || st.DataLength != 2 {
				t.Fatalf("exists = %v %+v %v; want true with dataLength 2", ok, st, err)
			}
		}},
		{"set_replaces_data_and_returns_stat", func(t *testing.T, e *env) {
			e.mk(e.p("a"), []byte("one"))
			st, err := e.zk.Set(e.p("a"), []byte("three"), 0)
			must(t, "set", err)
			data, _, err := e.zk.Get(e.p("a"))
			must(t, "get", err)
			if string(data) != "three" || st.Version != 1 || st.DataLength != 5 {
				t.Fatalf("after set: data %q stat %+v; want three, version 1, dataLength 5", data, st)
			}
		}},
		{"set_with_wrong_version_fails_BadVersion", func(t *testing.T, e *env) {
			e.mk(e.p("a"), nil)
			_, err := e.zk.Set(e.p("a"), []byte("x"), 5)
			if !errors.Is(err, zk.ErrBadVersion) {
				t.Fatalf("set version 5: %v; want ErrBadVersion", err)
			}
		}},
		{"set_with_version_minus_1_always_succeeds", func(t *testing.T, e *env) {
			e.mk(e.p("a"), nil)
			for i := range 3 {
				if _, err := e.zk.Set(e.p("a"), []byte{byte(i)}, -1); err != nil {
					t.Fatalf("set #%d with version -1: %v", i, err)
				}
			}
		}},
		{"set_missing_node_fails_NoNode", func(t *testing.T, e *env) {
			_, err := e.zk.Set(e.p("missing"), nil, -1)
			if !errors.Is(err, zk.ErrNoNode) {
				t.Fatalf("set missing: %v; want ErrNoNode", err)
			}
		}},
		{"null_data_round_trips_as_null", func(t *testing.T, e *env) {
			e.mk(e.p("a"), []byte("x"))
			r := e.raw()
			_, err := r.Do(jute.OpSetData, &jute.SetDataRequest{Path: e.p("a"), Data: nil, Version: -1}, &jute.SetDataResponse{})
			must(t, "setData null", err)
			rep, err := r.Call(jute.OpGetData, &jute.GetDataRequest{Path: e.p("a")})
			must(t, "getData", err)
			if len(rep.Body) < 4 || !bytes.Equal(rep.Body[:4], []byte{0xff, 0xff, 0xff, 0xff}) {
				t.Fatalf("getData body starts % x; want a null buffer (length -1)", rep.Body[:min(4, len(rep.Body))])
			}
		}},
		{"empty_data_round_trips_as_empty", func(t *testing.T, e *env) {
			r := e.raw()
			rawCreate(t, r, e.p("a"), []byte{}, jute.ModePersistent)
			rep, err := r.Call(jute.OpGetData, &jute.GetDataRequest{Path: e.p("a")})
			must(t, "getData", err)
			if len(rep.Body) < 4 || !bytes.Equal(rep.Body[:4], []byte{0, 0, 0, 0}) {
				t.Fatalf("getData body starts % x; want an empty buffer (length 0)", rep.Body[:min(4, len(rep.Body))])
			}
		}},
		{"binary_data_round_trips", func(t *testing.T, e *env) {
			data := make([]byte, 256)
			for i := range data {
				data[i] = byte(i)
			}
			e.mk(e.p("a"), data)
			got, _, err := e.zk.Get(e.p("a"))
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("get: %v, equal %v", err, bytes.Equal(got, data))
			}
		}},
		{"delete_removes_the_node", func(t *testing.T, e *env) {
			e.mk(e.p("a"), nil)
			must(t, "delete", e.zk.Delete(e.p("a"), 0))
			if e.exists(e.p("a")) {
				t.Fatalf("node still exists after delete")
			}
		}},
		{"delete_reply_has_no_body", func(t *testing.T, e *env) {
			e.mk(e.p("a"), nil)
			r := e.raw()
			_, err := r.Do(jute.OpDelete, &jute.DeleteRequest{Path: e.p("a"), Version: -1}, nil)
			must(t, "delete", err)
		}},
		{"delete_with_wrong_version_fails_BadVersion", func(t *testing.T, e *env) {
			e.mk(e.p("a"), nil)
			if err := e.zk.Delete(e.p("a"), 3); !errors.Is(err, zk.ErrBadVersion) {
				t.Fatalf("delete version 3: %v; want ErrBadVersion", err)
			}
		}},
		{"delete_missing_node_fails_NoNode", func(t *testing.T, e *env) {
			if err := e.zk.Delete(e.p("missing"), -1); !errors.Is(err, zk.ErrNoNode) {
				t.Fatalf("delete missing: %v; want ErrNoNode", err)
			}
		}},
		{"delete_node_with_children_fails_NotEmpty", func(t *testing.T, e *env) {
			e.mk(e.p("a"), nil)
			e.mk(e.p("a", "b"), nil)
			if err := e.zk.Delete(e.p("a"), -1); !errors.Is(err, zk.ErrNotEmpty) {
				t.Fatalf("delete with a child: %v; want ErrNotEmpty", err)
			}
		}},
		{"children_lists_names_without_parent_prefix", func(t *testing.T, e *env) {
			for _, n := range []string{"x", "y", "z"} {
				e.mk(e.p(n), nil)
			}
			kids, st, err := e.zk.Children(e.base)
			must(t, "children", err)
			slices.Sort(kids)
			if !slices.Equal(kids, []string{"x", "y", "z"}) || st.NumChildren != 3 {
				t.Fatalf("children %v numChildren %d; want [x y z], 3", kids, st.NumChildren)
			}
		}},
		{"children_of_leaf_is_empty", func(t *testing.T, e *env) {
			kids, _, err := e.zk.Children(e.base)
			if err != nil || len(kids) != 0 {
				t.Fatalf("children = %v, %v; want none", kids, err)
			}
		}},
		{"children_of_missing_node_fails_NoNode", func(t *testing.T, e *env) {
			if _, _, err := e.zk.Children(e.p("missing")); !errors.Is(err, zk.ErrNoNode) {
				t.Fatalf("children missing: %v; want ErrNoNode", err)
			}
		}},
		{"getChildren_op_8_returns_names_only", func(t *testing.T, e *env) {
			e.mk(e.p("k"), nil)
			r := e.raw()
			var resp jute.GetChildrenResponse
			_, err := r.Do(jute.OpGetChildren, &jute.GetChildrenRequest{Path: e.base}, &resp)
			must(t, "getChildren", err)
			if !slices.Equal(resp.Children, []string{"k"}) {
				t.Fatalf("children %v; want [k]", resp.Children)
			}
		}},
		{"getChildren2_stat_is_the_parents", func(t *testing.T, e *env) {
			e.mk(e.p("k"), []byte("abc"))
			r := e.raw()
			var resp jute.GetChildren2Response
			_, err := r.Do(jute.OpGetChildren2, &jute.GetChildren2Request{Path: e.base}, &resp)
			must(t, "getChildren2", err)
			if resp.Stat.NumChildren != 1 || resp.Stat.DataLength != 0 {
				t.Fatalf("stat %+v; want the parent's (numChildren 1, dataLength 0)", resp.Stat)
			}
		}},
		{"sync_echoes_the_path", func(t *testing.T, e *env) {
			got, err := e.zk.Sync(e.base)
			if err != nil || got != e.base {
				t.Fatalf("sync = %q, %v; want %q", got, err, e.base)
			}
		}},
		{"sync_on_missing_path_succeeds", func(t *testing.T, e *env) {
			r := e.raw()
			var resp jute.SyncResponse
			_, err := r.Do(jute.OpSync, &jute.SyncRequest{Path: e.p("nope")}, &resp)
			must(t, "sync missing", err)
			if resp.Path != e.p("nope") {
				t.Fatalf("sync echoed %q", resp.Path)
			}
		}},
		{"large_data_near_the_limit_is_accepted", func(t *testing.T, e *env) {
			data := bytes.Repeat([]byte{'z'}, 1_000_000)
			e.mk(e.p("big"), data)
			got, _, err := e.zk.Get(e.p("big"))
			if err != nil || len(got) != len(data) {
				t.Fatalf("get big: %d bytes, %v", len(got), err)
			}
		}},
		{"many_children_are_listed", func(t *testing.T, e *env) {
			var ops []any
			for i := range 300 {
				ops = append(ops, &zk.CreateRequest{Path: e.p("c" + itoa(i)), Acl: zk.WorldACL(zk.PermAll)})
			}
			_, err := e.zk.Multi(ops...)
			must(t, "multi create 300", err)
			kids, _, err := e.zk.Children(e.base)
			if err != nil || len(kids) != 300 {
				t.Fatalf("children: %d, %v; want 300", len(kids), err)
			}
		}},
	})
}
