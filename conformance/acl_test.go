package conformance

import (
	"cmp"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkd-io/zkd/jute"
)

// digestID is the stored form of a digest identity: user:base64(sha1("user:password")).
func digestID(user, password string) string {
	sum := sha1.Sum([]byte(user + ":" + password))
	return user + ":" + base64.StdEncoding.EncodeToString(sum[:])
}

// rawAuth sends a digest auth packet on r.
func rawAuth(t *testing.T, r *Raw, cred string) {
	t.Helper()
	_, err := r.Do(jute.OpAuth, &jute.AuthPacket{Scheme: "digest", Auth: []byte(cred)}, nil)
	must(t, "auth "+cred, err)
}

// rawCreateACL creates path with acl through r and returns the error code as an error.
func rawCreateACL(r *Raw, path string, acl []jute.ACL) error {
	_, err := r.Do(jute.OpCreate, &jute.CreateRequest{Path: path, ACL: acl}, &jute.CreateResponse{})
	return err
}

func TestACL(t *testing.T) {
	world := func(perms int32) jute.ACL { return jute.ACL{Perms: perms, ID: jute.Id{Scheme: "world", ID: "anyone"}} }
	// lockedNode creates path readable and writable only by digest user "owner" (pw "pw").
	lockedNode := func(t *testing.T, e *env, path string, acl []zk.ACL) {
		t.Helper()
		c := e.conn()
		must(t, "addauth", c.AddAuth("digest", []byte("owner:pw")))
		_, err := c.Create(path, nil, 0, acl)
		must(t, "create "+path, err)
	}
	runChecks(t, "acl", []check{
		{"default_acl_is_world_anyone_all", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			acl, _, err := e.zk.GetACL(e.p("n"))
			must(t, "getACL", err)
			if !slices.Equal(acl, zk.WorldACL(zk.PermAll)) {
				t.Fatalf("ACL %+v; want world:anyone ALL", acl)
			}
		}},
		{"empty_acl_fails_InvalidACL", func(t *testing.T, e *env) {
			r := e.raw()
			wantCode(t, "create with an empty ACL", rawCreateACL(r, e.p("n"), []jute.ACL{}), jute.CodeInvalidACL)
		}},
		{"world_id_other_than_anyone_fails_InvalidACL", func(t *testing.T, e *env) {
			r := e.raw()
			err := rawCreateACL(r, e.p("n"), []jute.ACL{{Perms: 31, ID: jute.Id{Scheme: "world", ID: "someone"}}})
			wantCode(t, "world:someone", err, jute.CodeInvalidACL)
		}},
		{"invalid_ids_fail_InvalidACL", func(t *testing.T, e *env) {
			r := e.raw()
			for _, id := range []jute.Id{
				{Scheme: "digest", ID: "nocolon"},
				{Scheme: "ip", ID: "notanip"},
				{Scheme: "nosuchscheme", ID: "x"},
				{Scheme: "super", ID: "x"},
				{Scheme: "sasl", ID: "x"},
			} {
				err := rawCreateACL(r, e.p("n"), []jute.ACL{{Perms: 31, ID: id}})
				wantCode(t, "ACL "+id.Scheme+":"+id.ID, err, jute.CodeInvalidACL)
			}
		}},
		{"auth_scheme_without_identity_fails_InvalidACL", func(t *testing.T, e *env) {
			r := e.raw()
			err := rawCreateACL(r, e.p("n"), []jute.ACL{{Perms: 31, ID: jute.Id{Scheme: "auth", ID: ""}}})
			wantCode(t, "auth ACL without an authenticated id", err, jute.CodeInvalidACL)
		}},
		{"auth_scheme_expands_to_the_digest_identity", func(t *testing.T, e *env) {
			r := e.raw()
			rawAuth(t, r, "alice:secret")
			must(t, "create", rawCreateACL(r, e.p("n"), []jute.ACL{{Perms: 31, ID: jute.Id{Scheme: "auth", ID: "ignored"}}}))
			var resp jute.GetACLResponse
			_, err := r.Do(jute.OpGetACL, &jute.GetACLRequest{Path: e.p("n")}, &resp)
			must(t, "getACL", err)
			want := []jute.ACL{{Perms: 31, ID: jute.Id{Scheme: "digest", ID: digestID("alice", "secret")}}}
			if !slices.Equal(resp.ACL, want) {
				t.Fatalf("ACL %+v; want %+v", resp.ACL, want)
			}
		}},
		{"duplicate_entries_are_stored_once", func(t *testing.T, e *env) {
			r := e.raw()
			must(t, "create", rawCreateACL(r, e.p("n"), []jute.ACL{world(31), world(31)}))
			var resp jute.GetACLResponse
			_, err := r.Do(jute.OpGetACL, &jute.GetACLRequest{Path: e.p("n")}, &resp)
			must(t, "getACL", err)
			if len(resp.ACL) != 1 {
				t.Fatalf("ACL %+v; want one entry", resp.ACL)
			}
		}},
		{"permission_bits_are_stored_as_given", func(t *testing.T, e *env) {
			r := e.raw()
			for i, perms := range []int32{255, 0} {
				p := e.p("n" + itoa(i))
				must(t, "create", rawCreateACL(r, p, []jute.ACL{world(perms)}))
				var resp jute.GetACLResponse
				_, err := r.Do(jute.OpGetACL, &jute.GetACLRequest{Path: p}, &resp)
				if perms == 0 {
					// No READ and no ADMIN: getACL itself is refused.
					wantCode(t, "getACL with perms 0", err, jute.CodeNoAuth)
					continue
				}
				must(t, "getACL", err)
				if len(resp.ACL) != 1 || resp.ACL[0].Perms != perms {
					t.Fatalf("ACL %+v; want perms %d", resp.ACL, perms)
				}
			}
		}},
		{"getData_needs_READ", func(t *testing.T, e *env) {
			lockedNode(t, e, e.p("n"), digestACL("owner", "pw"))
			if _, _, err := e.zk.Get(e.p("n")); !errors.Is(err, zk.ErrNoAuth) {
				t.Fatalf("get without READ: %v; want ErrNoAuth", err)
			}
		}},
		{"getChildren_needs_READ", func(t *testing.T, e *env) {
			lockedNode(t, e, e.p("n"), digestACL("owner", "pw"))
			if _, _, err := e.zk.Children(e.p("n")); !errors.Is(err, zk.ErrNoAuth) {
				t.Fatalf("children without READ: %v; want ErrNoAuth", err)
			}
		}},
		{"setData_needs_WRITE", func(t *testing.T, e *env) {
			lockedNode(t, e, e.p("n"), append(digestACL("owner", "pw"), zk.WorldACL(zk.PermAll&^zk.PermWrite)...))
			if _, err := e.zk.Set(e.p("n"), []byte("x"), -1); !errors.Is(err, zk.ErrNoAuth) {
				t.Fatalf("set without WRITE: %v; want ErrNoAuth", err)
			}
		}},
		{"create_needs_CREATE_on_the_parent", func(t *testing.T, e *env) {
			lockedNode(t, e, e.p("n"), append(digestACL("owner", "pw"), zk.WorldACL(zk.PermAll&^zk.PermCreate)...))
			if _, err := e.zk.Create(e.p("n", "c"), nil, 0, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrNoAuth) {
				t.Fatalf("create without CREATE on the parent: %v; want ErrNoAuth", err)
			}
		}},
		{"delete_needs_DELETE_on_the_parent", func(t *testing.T, e *env) {
			lockedNode(t, e, e.p("n"), append(digestACL("owner", "pw"), zk.WorldACL(zk.PermAll&^zk.PermDelete)...))
			e.mk(e.p("n", "c"), nil)
			if err := e.zk.Delete(e.p("n", "c"), -1); !errors.Is(err, zk.ErrNoAuth) {
				t.Fatalf("delete without DELETE on the parent: %v; want ErrNoAuth", err)
			}
		}},
		{"delete_ignores_the_nodes_own_acl", func(t *testing.T, e *env) {
			lockedNode(t, e, e.p("n"), digestACL("owner", "pw"))
			must(t, "delete a node with no rights on it", e.zk.Delete(e.p("n"), -1))
		}},
		{"setACL_needs_ADMIN", func(t *testing.T, e *env) {
			lockedNode(t, e, e.p("n"), append(digestACL("owner", "pw"), zk.WorldACL(zk.PermAll&^zk.PermAdmin)...))
			if _, err := e.zk.SetACL(e.p("n"), zk.WorldACL(zk.PermAll), -1); !errors.Is(err, zk.ErrNoAuth) {
				t.Fatalf("setACL without ADMIN: %v; want ErrNoAuth", err)
			}
		}},
		{"getACL_with_READ_only_masks_digest_hashes", func(t *testing.T, e *env) {
			lockedNode(t, e, e.p("n"), append(zk.DigestACL(zk.PermAll, "owner", "pw"), zk.WorldACL(zk.PermRead)...))
			acl, _, err := e.zk.GetACL(e.p("n"))
			must(t, "getACL", err)
			for _, a := range acl {
				if a.Scheme == "digest" && a.ID != "owner:x" {
					t.Fatalf("digest id shown as %q without ADMIN; want owner:x", a.ID)
				}
			}
			if len(acl) != 2 {
				t.Fatalf("ACL %+v; want 2 entries", acl)
			}
		}},
		{"getACL_with_ADMIN_shows_digest_hashes", func(t *testing.T, e *env) {
			lockedNode(t, e, e.p("n"), append(zk.DigestACL(zk.PermAll, "owner", "pw"), zk.WorldACL(zk.PermAdmin)...))
			acl, _, err := e.zk.GetACL(e.p("n"))
			must(t, "getACL", err)
			for _, a := range acl {
				if a.Scheme == "digest" && a.ID != digestID("owner", "pw") {
					t.Fatalf("digest id shown as %q with ADMIN; want %q", a.ID, digestID("owner", "pw"))
				}
			}
		}},
		{"getACL_without_READ_or_ADMIN_fails_NoAuth", func(t *testing.T, e *env) {
			lockedNode(t, e, e.p("n"), append(zk.DigestACL(zk.PermAll, "owner", "pw"), zk.WorldACL(zk.PermWrite)...))
			if _, _, err := e.zk.GetACL(e.p("n")); !errors.Is(err, zk.ErrNoAuth) {
				t.Fatalf("getACL: %v; want ErrNoAuth", err)
			}
		}},
		{"digest_auth_grants_access", func(t *testing.T, e *env) {
			lockedNode(t, e, e.p("n"), digestACL("owner", "pw"))
			c := e.conn()
			must(t, "addauth", c.AddAuth("digest", []byte("owner:pw")))
			if _, _, err := c.Get(e.p("n")); err != nil {
				t.Fatalf("get after addauth: %v", err)
			}
		}},
		{"wrong_digest_password_grants_nothing", func(t *testing.T, e *env) {
			lockedNode(t, e, e.p("n"), digestACL("owner", "pw"))
			c := e.conn()
			must(t, "addauth", c.AddAuth("digest", []byte("owner:wrong")))
			if _, _, err := c.Get(e.p("n")); !errors.Is(err, zk.ErrNoAuth) {
				t.Fatalf("get with a wrong password: %v; want ErrNoAuth", err)
			}
		}},
		{"several_auth_ids_add_up", func(t *testing.T, e *env) {
			lockedNode(t, e, e.p("a"), digestACL("owner", "pw"))
			e.mk(e.p("b"), nil)
			_, err := e.zk.SetACL(e.p("b"), digestACL("other", "pw2"), -1)
			must(t, "setACL b", err)
			r := e.raw()
			rawAuth(t, r, "owner:pw")
			rawAuth(t, r, "other:pw2")
			for _, p := range []string{e.p("a"), e.p("b")} {
				_, err := r.Do(jute.OpGetData, &jute.GetDataRequest{Path: p}, &jute.GetDataResponse{})
				must(t, "getData "+p, err)
			}
		}},
		{"ip_acl_matches_the_loopback_client", func(t *testing.T, e *env) {
			r := e.raw()
			must(t, "create", rawCreateACL(r, e.p("n"), []jute.ACL{{Perms: 31, ID: jute.Id{Scheme: "ip", ID: "127.0.0.1"}}}))
			_, err := r.Do(jute.OpGetData, &jute.GetDataRequest{Path: e.p("n")}, &jute.GetDataResponse{})
			must(t, "getData from 127.0.0.1", err)
		}},
		{"ip_acl_with_mask_matches", func(t *testing.T, e *env) {
			r := e.raw()
			must(t, "create", rawCreateACL(r, e.p("n"), []jute.ACL{{Perms: 31, ID: jute.Id{Scheme: "ip", ID: "127.0.0.0/8"}}}))
			_, err := r.Do(jute.OpGetData, &jute.GetDataRequest{Path: e.p("n")}, &jute.GetDataResponse{})
			must(t, "getData from 127.0.0.1", err)
		}},
		{"ip_acl_for_another_network_refuses", func(t *testing.T, e *env) {
			r := e.raw()
			must(t, "create", rawCreateACL(r, e.p("n"), []jute.ACL{{Perms: 31, ID: jute.Id{Scheme: "ip", ID: "10.0.0.0/8"}}}))
			_, err := r.Do(jute.OpGetData, &jute.GetDataRequest{Path: e.p("n")}, &jute.GetDataResponse{})
			wantCode(t, "getData from outside 10/8", err, jute.CodeNoAuth)
		}},
		{"setACL_version_is_checked_against_aversion", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			_, err := e.zk.Set(e.p("n"), []byte("x"), -1) // version 1, aversion still 0
			must(t, "set", err)
			_, err = e.zk.SetACL(e.p("n"), zk.WorldACL(zk.PermAll), 1)
			if !errors.Is(err, zk.ErrBadVersion) {
				t.Fatalf("setACL with the data version: %v; want ErrBadVersion", err)
			}
			_, err = e.zk.SetACL(e.p("n"), zk.WorldACL(zk.PermAll), 0)
			must(t, "setACL with aversion 0", err)
		}},
		{"setACL_on_missing_node_fails_NoNode", func(t *testing.T, e *env) {
			if _, err := e.zk.SetACL(e.p("missing"), zk.WorldACL(zk.PermAll), -1); !errors.Is(err, zk.ErrNoNode) {
				t.Fatalf("setACL missing: %v; want ErrNoNode", err)
			}
		}},
		{"setACL_with_invalid_acl_fails_InvalidACL", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			r := e.raw()
			_, err := r.Do(jute.OpSetACL, &jute.SetACLRequest{Path: e.p("n"), ACL: []jute.ACL{}, Version: -1}, &jute.SetACLResponse{})
			wantCode(t, "setACL empty", err, jute.CodeInvalidACL)
		}},
		{"getACL_on_missing_node_fails_NoNode", func(t *testing.T, e *env) {
			if _, _, err := e.zk.GetACL(e.p("missing")); !errors.Is(err, zk.ErrNoNode) {
				t.Fatalf("getACL missing: %v; want ErrNoNode", err)
			}
		}},
		{"missing_node_gives_NoNode_before_NoAuth", func(t *testing.T, e *env) {
			lockedNode(t, e, e.p("n"), digestACL("owner", "pw"))
			if _, _, err := e.zk.Get(e.p("n", "missing")); !errors.Is(err, zk.ErrNoNode) {
				t.Fatalf("get of a missing child of a locked node: %v; want ErrNoNode", err)
			}
		}},
		{"exists_READ_check_3_8_or_3_9", func(t *testing.T, e *env) {
			lockedNode(t, e, e.p("n"), digestACL("owner", "pw"))
			r := e.raw()
			_, err := r.Do(jute.OpExists, &jute.ExistsRequest{Path: e.p("n")}, &jute.ExistsResponse{})
			switch wantOneOf(t, "exists without READ", err, jute.CodeOK, jute.CodeNoAuth) {
			case jute.CodeOK:
				e.seen("exists does not check READ (ZooKeeper before 3.8.4 / 3.9.2)")
			default:
				e.seen("exists checks READ (ZooKeeper 3.8.4+ / 3.9.2+)")
			}
		}},
		{"sync_needs_no_permission", func(t *testing.T, e *env) {
			lockedNode(t, e, e.p("n"), digestACL("owner", "pw"))
			if _, err := e.zk.Sync(e.p("n")); err != nil {
				t.Fatalf("sync on a locked node: %v", err)
			}
		}},
		{"ip_auth_packet_is_accepted", func(t *testing.T, e *env) {
			r := e.raw()
			_, err := r.Do(jute.OpAuth, &jute.AuthPacket{Scheme: "ip", Auth: []byte("127.0.0.1")}, nil)
			must(t, "auth ip", err)
		}},
		{"unknown_auth_scheme_fails_AuthFailed_and_closes", func(t *testing.T, e *env) {
			r := e.raw()
			rep, err := r.Call(jute.OpAuth, &jute.AuthPacket{Scheme: "nosuchscheme", Auth: []byte("x")})
			must(t, "auth", err)
			if rep.Header.Err != jute.CodeAuthFailed {
				t.Fatalf("auth reply %+v; want AuthFailed", rep.Header)
			}
			if err := r.ExpectClosed(waitTimeout); err != nil {
				t.Fatalf("after AuthFailed: %v", err)
			}
		}},
		{"whoAmI_lists_digest_and_ip_ids", func(t *testing.T, e *env) {
			r := e.raw()
			rawAuth(t, r, "alice:secret")
			var resp jute.WhoAmIResponse
			_, err := r.Do(jute.OpWhoAmI, nil, &resp)
			must(t, "whoAmI", err)
			want := []jute.ClientInfo{{AuthScheme: "digest", User: "alice"}, {AuthScheme: "ip", User: "127.0.0.1"}}
			got := slices.Clone(resp.ClientInfo)
			slices.SortFunc(got, func(a, b jute.ClientInfo) int { return cmp.Compare(a.AuthScheme, b.AuthScheme) })
			if !slices.Equal(got, want) {
				t.Fatalf("whoAmI %+v; want %+v", resp.ClientInfo, want)
			}
		}},
		{"whoAmI_without_auth_lists_the_ip", func(t *testing.T, e *env) {
			r := e.raw()
			var resp jute.WhoAmIResponse
			_, err := r.Do(jute.OpWhoAmI, nil, &resp)
			must(t, "whoAmI", err)
			if !slices.Equal(resp.ClientInfo, []jute.ClientInfo{{AuthScheme: "ip", User: "127.0.0.1"}}) {
				t.Fatalf("whoAmI %+v; want [ip 127.0.0.1]", resp.ClientInfo)
			}
		}},
		{"multi_check_op_needs_READ", func(t *testing.T, e *env) {
			lockedNode(t, e, e.p("n"), digestACL("owner", "pw"))
			res, err := e.zk.Multi(&zk.CheckVersionRequest{Path: e.p("n"), Version: 0})
			if err == nil || len(res) != 1 || !errors.Is(res[0].Error, zk.ErrNoAuth) {
				t.Fatalf("multi check without READ: %v %+v; want ErrNoAuth", err, res)
			}
		}},
		{"super_digest_bypasses_acls", func(t *testing.T, e *env) {
			if e.tg.Caps.SuperAuth == "" {
				t.Skip("target has no super digest configured (CONFORMANCE_CAPS=super=user:password)")
			}
			lockedNode(t, e, e.p("n"), digestACL("owner", "pw"))
			c := e.conn()
			must(t, "addauth super", c.AddAuth("digest", []byte(e.tg.Caps.SuperAuth)))
			if _, _, err := c.Get(e.p("n")); err != nil {
				t.Fatalf("get as super: %v", err)
			}
		}},
		{"acl_is_checked_at_request_time", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			c := e.conn()
			_, _, err := c.Get(e.p("n"))
			must(t, "get while open", err)
			owner := e.conn()
			must(t, "addauth", owner.AddAuth("digest", []byte("owner:pw")))
			_, err = owner.SetACL(e.p("n"), digestACL("owner", "pw"), -1)
			must(t, "setACL", err)
			deadline := time.Now().Add(waitTimeout)
			for {
				_, err := c.Sync(e.p("n"))
				must(t, "sync", err)
				if _, _, err = c.Get(e.p("n")); errors.Is(err, zk.ErrNoAuth) {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("get after the ACL was narrowed: %v; want ErrNoAuth", err)
				}
			}
		}},
	})
}
