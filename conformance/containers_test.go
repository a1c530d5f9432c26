package conformance

import (
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkd-io/zkd/jute"
)

func TestContainers(t *testing.T) {
	runChecks(t, "containers", []check{
		{"createContainer_returns_path_and_stat", func(t *testing.T, e *env) {
			r := e.raw()
			var resp jute.Create2Response
			h, err := r.Do(jute.OpCreateContainer, &jute.CreateRequest{Path: e.p("c"), ACL: openACL(), Flags: jute.ModeContainer}, &resp)
			must(t, "createContainer", err)
			if resp.Path != e.p("c") || resp.Stat.Czxid != h.Zxid {
				t.Fatalf("createContainer gave %+v (zxid 0x%x)", resp, h.Zxid)
			}
		}},
		{"container_reports_ephemeral_owner_zero", func(t *testing.T, e *env) {
			r := e.raw()
			var resp jute.Create2Response
			_, err := r.Do(jute.OpCreateContainer, &jute.CreateRequest{Path: e.p("c"), ACL: openACL(), Flags: jute.ModeContainer}, &resp)
			must(t, "createContainer", err)
			if resp.Stat.EphemeralOwner != 0 || e.stat(e.p("c")).EphemeralOwner != 0 {
				t.Fatalf("container ephemeralOwner 0x%x; want 0", resp.Stat.EphemeralOwner)
			}
		}},
		{"go_client_CreateContainer_works", func(t *testing.T, e *env) {
			p, err := e.zk.CreateContainer(e.p("c"), []byte("d"), zk.FlagContainer, zk.WorldACL(zk.PermAll))
			must(t, "CreateContainer", err)
			if p != e.p("c") {
				t.Fatalf("created %q", p)
			}
		}},
		{"container_may_have_children", func(t *testing.T, e *env) {
			r := e.raw()
			_, err := r.Do(jute.OpCreateContainer, &jute.CreateRequest{Path: e.p("c"), ACL: openACL(), Flags: jute.ModeContainer}, &jute.Create2Response{})
			must(t, "createContainer", err)
			e.mk(e.p("c", "kid"), nil)
			_, err = e.zk.Create(e.p("c", "eph"), nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
			must(t, "create ephemeral in container", err)
		}},
		{"container_opcode_with_invalid_flags_fails_BadArguments", func(t *testing.T, e *env) {
			r := e.raw()
			_, err := r.Do(jute.OpCreateContainer, &jute.CreateRequest{Path: e.p("c"), ACL: openACL(), Flags: 9}, &jute.Create2Response{})
			wantCode(t, "createContainer flags 9", err, jute.CodeBadArguments)
		}},
		{"container_create_of_existing_fails_NodeExists", func(t *testing.T, e *env) {
			e.mk(e.p("c"), nil)
			r := e.raw()
			_, err := r.Do(jute.OpCreateContainer, &jute.CreateRequest{Path: e.p("c"), ACL: openACL(), Flags: jute.ModeContainer}, &jute.Create2Response{})
			wantCode(t, "createContainer existing", err, jute.CodeNodeExists)
		}},
		{"containers_are_not_ephemerals", func(t *testing.T, e *env) {
			r := e.raw()
			_, err := r.Do(jute.OpCreateContainer, &jute.CreateRequest{Path: e.p("c"), ACL: openACL(), Flags: jute.ModeContainer}, &jute.Create2Response{})
			must(t, "createContainer", err)
			var resp jute.GetEphemeralsResponse
			_, err = r.Do(jute.OpGetEphemerals, &jute.GetEphemeralsRequest{PrefixPath: "/"}, &resp)
			must(t, "getEphemerals", err)
			if len(resp.Ephemerals) != 0 {
				t.Fatalf("getEphemerals lists %v; containers are not ephemeral", resp.Ephemerals)
			}
		}},
		{"container_can_be_deleted_by_the_client", func(t *testing.T, e *env) {
			r := e.raw()
			_, err := r.Do(jute.OpCreateContainer, &jute.CreateRequest{Path: e.p("c"), ACL: openACL(), Flags: jute.ModeContainer}, &jute.Create2Response{})
			must(t, "createContainer", err)
			must(t, "delete container", e.zk.Delete(e.p("c"), -1))
		}},
	})
}

func TestTTL(t *testing.T) {
	createTTL := func(r *Raw, path string, flags jute.CreateMode, ttl int64) (jute.Create2Response, error) {
		var resp jute.Create2Response
		_, err := r.Do(jute.OpCreateTTL, &jute.CreateTTLRequest{Path: path, ACL: openACL(), Flags: flags, TTL: ttl}, &resp)
		return resp, err
	}
	needTTL := func(t *testing.T, e *env) {
		t.Helper()
		if !e.tg.Caps.TTL {
			t.Skip("target does not enable TTL nodes (extendedTypesEnabled); CONFORMANCE_CAPS=ttl declares it")
		}
	}
	runChecks(t, "ttl", []check{
		{"createTTL_without_extended_types_fails_Unimplemented", func(t *testing.T, e *env) {
			if e.tg.Caps.TTL {
				t.Skip("target enables TTL nodes")
			}
			_, err := createTTL(e.raw(), e.p("t"), jute.ModePersistentWithTTL, 1000)
			wantCode(t, "createTTL with TTL off", err, jute.CodeUnimplemented)
		}},
		{"create_with_ttl_flag_without_extended_types_fails", func(t *testing.T, e *env) {
			if e.tg.Caps.TTL {
				t.Skip("target enables TTL nodes")
			}
			r := e.raw()
			_, err := r.Do(jute.OpCreate, &jute.CreateRequest{Path: e.p("t"), ACL: openACL(), Flags: jute.ModePersistentWithTTL}, &jute.CreateResponse{})
			got := wantOneOf(t, "create flag 5 with TTL off", err, jute.CodeUnimplemented, jute.CodeBadArguments)
			e.seen("create with flag 5 and TTL off gave %v", got)
		}},
		{"createTTL_returns_path_and_stat", func(t *testing.T, e *env) {
			needTTL(t, e)
			resp, err := createTTL(e.raw(), e.p("t"), jute.ModePersistentWithTTL, 60000)
			must(t, "createTTL", err)
			if resp.Path != e.p("t") || resp.Stat.EphemeralOwner != 0 {
				t.Fatalf("createTTL %+v; want the path and ephemeralOwner 0", resp)
			}
		}},
		{"createTTL_sequential_gets_a_suffix", func(t *testing.T, e *env) {
			needTTL(t, e)
			resp, err := createTTL(e.raw(), e.p("t-"), jute.ModePersistentSequentialWithTTL, 60000)
			must(t, "createTTL", err)
			if !strings.HasPrefix(resp.Path, e.p("t-")) || len(resp.Path) != len(e.p("t-"))+10 {
				t.Fatalf("createTTL sequential path %q", resp.Path)
			}
		}},
		{"createTTL_with_ttl_zero_or_too_large_fails_BadArguments", func(t *testing.T, e *env) {
			needTTL(t, e)
			r := e.raw()
			for _, ttl := range []int64{0, -1, 1 << 40} {
				_, err := createTTL(r, e.p("t"), jute.ModePersistentWithTTL, ttl)
				wantCode(t, "createTTL ttl "+itoa(int(ttl)), err, jute.CodeBadArguments)
			}
		}},
		{"createTTL_with_non_ttl_flags_fails_BadArguments", func(t *testing.T, e *env) {
			needTTL(t, e)
			r := e.raw()
			for _, f := range []jute.CreateMode{jute.ModePersistent, jute.ModeEphemeral} {
				_, err := createTTL(r, e.p("t"), f, 1000)
				wantCode(t, "createTTL flags "+f.String(), err, jute.CodeBadArguments)
			}
		}},
		{"create2_with_ttl_flag_fails_BadArguments", func(t *testing.T, e *env) {
			needTTL(t, e)
			r := e.raw()
			_, err := r.Do(jute.OpCreate2, &jute.CreateRequest{Path: e.p("t"), ACL: openACL(), Flags: jute.ModePersistentWithTTL}, &jute.Create2Response{})
			wantCode(t, "create2 flag 5", err, jute.CodeBadArguments)
		}},
		{"create_with_ttl_flag_fails_BadArguments", func(t *testing.T, e *env) {
			needTTL(t, e)
			r := e.raw()
			_, err := r.Do(jute.OpCreate, &jute.CreateRequest{Path: e.p("t"), ACL: openACL(), Flags: jute.ModePersistentWithTTL}, &jute.CreateResponse{})
			wantCode(t, "create flag 5", err, jute.CodeBadArguments)
		}},
		{"ttl_node_may_have_children", func(t *testing.T, e *env) {
			needTTL(t, e)
			_, err := createTTL(e.raw(), e.p("t"), jute.ModePersistentWithTTL, 60000)
			must(t, "createTTL", err)
			e.mk(e.p("t", "kid"), nil)
		}},
		{"go_client_CreateTTL_works", func(t *testing.T, e *env) {
			needTTL(t, e)
			p, err := e.zk.CreateTTL(e.p("t"), nil, zk.FlagTTL, zk.WorldACL(zk.PermAll), time.Minute)
			must(t, "CreateTTL", err)
			if p != e.p("t") {
				t.Fatalf("created %q", p)
			}
		}},
	})
}
