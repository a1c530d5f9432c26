package conformance

import (
	"testing"

	"github.com/zkd-io/zkd/jute"
)

func TestPaths(t *testing.T) {
	bad := []struct{ name, suffix string }{
		{"trailing_slash", "/"},
		{"dot_segment", "/."},
		{"dotdot_segment", "/.."},
		{"control_character", "/a\x01"},
		{"nul_character", "/a\x00b"},
		{"delete_character", "/a\x7f"},
		{"non_BMP_character", "/a\U0001F600"},
		{"private_use_character", "/a\ue000"},
		{"U_FFFF", "/a\uffff"},
	}
	var checks []check
	for _, b := range bad {
		checks = append(checks, check{"create_rejects_" + b.name + "_with_BadArguments", func(t *testing.T, e *env) {
			r := e.raw()
			_, err := r.Do(jute.OpCreate, &jute.CreateRequest{Path: e.base + b.suffix, ACL: openACL()}, &jute.CreateResponse{})
			wantCode(t, "create "+b.suffix, err, jute.CodeBadArguments)
		}})
	}
	good := []struct{ name, suffix string }{
		{"dots_inside_a_name", "/a..b"},
		{"leading_dot", "/.hidden"},
		{"three_dots", "/..."},
		{"latin_accents", "/ünï-çødé"},
		{"spaces", "/with space"},
	}
	for _, g := range good {
		checks = append(checks, check{"create_accepts_" + g.name, func(t *testing.T, e *env) {
			r := e.raw()
			var resp jute.CreateResponse
			_, err := r.Do(jute.OpCreate, &jute.CreateRequest{Path: e.base + g.suffix, ACL: openACL()}, &resp)
			must(t, "create "+g.suffix, err)
			if resp.Path != e.base+g.suffix {
				t.Fatalf("created %q; want %q", resp.Path, e.base+g.suffix)
			}
		}})
	}
	checks = append(checks,
		check{"create_with_empty_segment_fails", func(t *testing.T, e *env) {
			// ZooKeeper looks up the parent (base + "/") before it validates the whole path, so it
			// answers NoNode; rejecting the path first is as good for clients.
			r := e.raw()
			_, err := r.Do(jute.OpCreate, &jute.CreateRequest{Path: e.base + "//b", ACL: openACL()}, &jute.CreateResponse{})
			got := wantOneOf(t, "create //b", err, jute.CodeNoNode, jute.CodeBadArguments)
			e.seen("create with an empty segment gave %v", got)
		}},
		check{"create_rejects_relative_path", func(t *testing.T, e *env) {
			r := e.raw()
			_, err := r.Do(jute.OpCreate, &jute.CreateRequest{Path: "relative", ACL: openACL()}, &jute.CreateResponse{})
			wantCode(t, "create relative", err, jute.CodeBadArguments)
		}},
		check{"create_rejects_empty_path", func(t *testing.T, e *env) {
			r := e.raw()
			_, err := r.Do(jute.OpCreate, &jute.CreateRequest{Path: "", ACL: openACL()}, &jute.CreateResponse{})
			wantCode(t, "create empty", err, jute.CodeBadArguments)
		}},
		check{"create_root_fails_NodeExists", func(t *testing.T, e *env) {
			r := e.raw()
			_, err := r.Do(jute.OpCreate, &jute.CreateRequest{Path: "/", ACL: openACL()}, &jute.CreateResponse{})
			wantOneOf(t, "create /", err, jute.CodeNodeExists, jute.CodeBadArguments)
		}},
		check{"setData_rejects_invalid_path_with_BadArguments", func(t *testing.T, e *env) {
			r := e.raw()
			_, err := r.Do(jute.OpSetData, &jute.SetDataRequest{Path: e.base + "/a//b", Version: -1}, &jute.SetDataResponse{})
			wantCode(t, "setData /a//b", err, jute.CodeBadArguments)
		}},
		check{"setACL_rejects_invalid_path_with_BadArguments", func(t *testing.T, e *env) {
			r := e.raw()
			_, err := r.Do(jute.OpSetACL, &jute.SetACLRequest{Path: e.base + "/", ACL: openACL(), Version: -1}, &jute.SetACLResponse{})
			wantCode(t, "setACL trailing slash", err, jute.CodeBadArguments)
		}},
		check{"delete_with_trailing_slash_is_NoNode", func(t *testing.T, e *env) {
			r := e.raw()
			_, err := r.Do(jute.OpDelete, &jute.DeleteRequest{Path: e.base + "/", Version: -1}, nil)
			wantCode(t, "delete trailing slash", err, jute.CodeNoNode)
		}},
		check{"delete_of_relative_path_is_BadArguments", func(t *testing.T, e *env) {
			r := e.raw()
			_, err := r.Do(jute.OpDelete, &jute.DeleteRequest{Path: "relative", Version: -1}, nil)
			wantCode(t, "delete relative", err, jute.CodeBadArguments)
		}},
		check{"reads_of_invalid_paths_fail", func(t *testing.T, e *env) {
			r := e.raw()
			for _, p := range []string{"relative", e.base + "//x", e.base + "/x/"} {
				_, err := r.Do(jute.OpGetData, &jute.GetDataRequest{Path: p}, &jute.GetDataResponse{})
				wantOneOf(t, "getData "+p, err, jute.CodeNoNode, jute.CodeBadArguments)
			}
		}},
		check{"sequential_create_on_trailing_slash_appends_the_counter", func(t *testing.T, e *env) {
			r := e.raw()
			var resp jute.CreateResponse
			_, err := r.Do(jute.OpCreate, &jute.CreateRequest{Path: e.base + "/", ACL: openACL(), Flags: jute.ModePersistentSequential}, &resp)
			must(t, "create sequential with trailing slash", err)
			if resp.Path != e.base+"/0000000000" {
				t.Fatalf("created %q; want %q", resp.Path, e.base+"/0000000000")
			}
		}},
	)
	runChecks(t, "paths", checks)
}

func TestSpecialNodes(t *testing.T) {
	runChecks(t, "special", []check{
		{"zookeeper_quota_and_config_exist", func(t *testing.T, e *env) {
			for _, p := range []string{"/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"} {
				if !e.exists(p) {
					t.Fatalf("%s does not exist", p)
				}
			}
		}},
		{"system_nodes_have_zero_zxids_and_times", func(t *testing.T, e *env) {
			paths := []string{"/", "/zookeeper/quota"}
			if e.tg.Standalone() {
				// In a quorum /zookeeper/config holds the dynamic configuration (version -1, an mtime).
				paths = append(paths, "/zookeeper/config")
			}
			for _, p := range paths {
				st := e.stat(p)
				if st.Czxid != 0 || st.Ctime != 0 || st.Version != 0 {
					t.Fatalf("%s stat %+v; want czxid 0, ctime 0, version 0", p, st)
				}
			}
		}},
		{"zookeeper_config_has_aversion_minus_1", func(t *testing.T, e *env) {
			if st := e.stat("/zookeeper/config"); st.Aversion != -1 {
				t.Fatalf("/zookeeper/config aversion %d; want -1", st.Aversion)
			}
		}},
		{"zookeeper_config_is_world_readable_only", func(t *testing.T, e *env) {
			acl, _, err := e.zk.GetACL("/zookeeper/config")
			must(t, "getACL", err)
			if len(acl) != 1 || acl[0].Perms != jute.PermRead || acl[0].Scheme != "world" || acl[0].ID != "anyone" {
				t.Fatalf("/zookeeper/config ACL %+v; want [world:anyone READ]", acl)
			}
		}},
		{"zookeeper_config_can_be_read", func(t *testing.T, e *env) {
			_, _, err := e.zk.Get("/zookeeper/config")
			must(t, "get /zookeeper/config", err)
		}},
		{"zookeeper_config_cannot_be_written_NoAuth", func(t *testing.T, e *env) {
			r := e.raw()
			_, err := r.Do(jute.OpSetData, &jute.SetDataRequest{Path: "/zookeeper/config", Data: []byte("x"), Version: -1}, &jute.SetDataResponse{})
			wantCode(t, "setData /zookeeper/config", err, jute.CodeNoAuth)
			_, err = r.Do(jute.OpCreate, &jute.CreateRequest{Path: "/zookeeper/config/x", ACL: openACL()}, &jute.CreateResponse{})
			wantCode(t, "create under /zookeeper/config", err, jute.CodeNoAuth)
		}},
		{"system_nodes_cannot_be_deleted_BadArguments", func(t *testing.T, e *env) {
			r := e.raw()
			for _, p := range []string{"/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"} {
				_, err := r.Do(jute.OpDelete, &jute.DeleteRequest{Path: p, Version: -1}, nil)
				wantCode(t, "delete "+p, err, jute.CodeBadArguments)
			}
		}},
		{"zookeeper_quota_has_no_children_initially_listed", func(t *testing.T, e *env) {
			kids, _, err := e.zk.Children("/zookeeper")
			must(t, "children /zookeeper", err)
			for _, want := range []string{"quota", "config"} {
				found := false
				for _, k := range kids {
					found = found || k == want
				}
				if !found {
					t.Fatalf("/zookeeper children %v lack %s", kids, want)
				}
			}
		}},
		{"create_under_zookeeper_is_allowed", func(t *testing.T, e *env) {
			p := "/zookeeper/conformance-" + theSuite.runID
			r := e.raw()
			_, err := r.Do(jute.OpCreate, &jute.CreateRequest{Path: p, ACL: openACL()}, &jute.CreateResponse{})
			must(t, "create "+p, err)
			_, err = r.Do(jute.OpDelete, &jute.DeleteRequest{Path: p, Version: -1}, nil)
			must(t, "delete "+p, err)
		}},
		{"exists_on_root_returns_a_stat", func(t *testing.T, e *env) {
			st := e.stat("/")
			if st.NumChildren < 2 {
				t.Fatalf("root numChildren %d; want at least /zookeeper and the suite root", st.NumChildren)
			}
		}},
	})
}
