package server_test

import (
	"testing"
	"time"

	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/server"
	"github.com/zkd-io/zkd/server/zkdtest"
)

func TestSuperDigestPassesACLs(t *testing.T) {
	s := zkdtest.Start(t, zkdtest.WithoutRaft(), zkdtest.WithConfig(func(c *server.Config) { c.SuperDigest = superDigest }))
	owner := rawSession(t, s.Addr())
	if _, err := owner.Do(jute.OpAuth, &jute.AuthPacket{Scheme: "digest", Auth: []byte("bob:pw")}, nil); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, owner, "/private", []jute.ACL{{Perms: jute.PermAll, ID: jute.Id{Scheme: "auth"}}}, 0)
	other := rawSession(t, s.Addr())
	if _, err := other.Do(jute.OpGetData, &jute.GetDataRequest{Path: "/private"}, &jute.GetDataResponse{}); err != jute.CodeNoAuth {
		t.Fatalf("getData without rights: %v; want NoAuth", err)
	}
	if _, err := other.Do(jute.OpAuth, &jute.AuthPacket{Scheme: "digest", Auth: []byte("super:test")}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Do(jute.OpGetData, &jute.GetDataRequest{Path: "/private"}, &jute.GetDataResponse{}); err != nil {
		t.Errorf("getData as super: %v", err)
	}
	// An unknown auth scheme fails and closes the connection.
	bad := rawSession(t, s.Addr())
	if err := bad.Send(jute.XidAuth, jute.OpAuth, &jute.AuthPacket{Scheme: "kerberos", Auth: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	got, err := bad.ReadUntilClosed(3 * time.Second)
	if err != nil || len(got) != 1 || got[0].Header.Err != jute.CodeAuthFailed || got[0].Header.Xid != jute.XidAuth {
		t.Errorf("unknown scheme: %+v, %v; want AuthFailed echoing xid -4, then close", got, err)
	}
	// sasl without a SASL configuration: a clear AuthFailed, then close.
	sasl := rawSession(t, s.Addr())
	if err := sasl.Send(7, jute.OpSASL, &jute.GetSASLRequest{Token: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	got, err = sasl.ReadUntilClosed(3 * time.Second)
	if err != nil || len(got) != 1 || got[0].Header.Err != jute.CodeAuthFailed {
		t.Errorf("sasl: %+v, %v; want AuthFailed, then close", got, err)
	}
}

func TestTTLNeedsExtendedTypes(t *testing.T) {
	off := zkdtest.Start(t, zkdtest.WithoutRaft(), zkdtest.WithConfig(func(c *server.Config) { c.ExtendedTypesEnabled = false }))
	r := rawSession(t, off.Addr())
	ttl := &jute.CreateTTLRequest{Path: "/ttl", ACL: openACL, Flags: jute.ModePersistentWithTTL, TTL: 1000}
	if _, err := r.Do(jute.OpCreateTTL, ttl, &jute.Create2Response{}); err != jute.CodeUnimplemented {
		t.Errorf("createTTL with extended types off: %v; want Unimplemented", err)
	}
	var mr jute.MultiResponse
	multi := &jute.MultiRequest{Ops: []jute.MultiOp{
		{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: "/m1", ACL: openACL}},
		{Type: jute.OpCreateTTL, Req: ttl},
	}}
	if _, err := r.Do(jute.OpMulti, multi, &mr); err != nil {
		t.Fatal(err)
	}
	if len(mr.Results) != 2 || mr.Results[0].Err != 0 || mr.Results[1].Err != jute.CodeUnimplemented || mr.Results[0].Type != jute.OpError {
		t.Errorf("multi with a TTL create: %+v", mr.Results)
	}
	on := zkdtest.Start(t, zkdtest.WithoutRaft())
	r = rawSession(t, on.Addr())
	var cr jute.Create2Response
	if _, err := r.Do(jute.OpCreateTTL, ttl, &cr); err != nil || cr.Path != "/ttl" || cr.Stat.EphemeralOwner != 0 {
		t.Errorf("createTTL with extended types on: %+v, %v", cr, err)
	}
}

func TestMultiReadAndCounts(t *testing.T) {
	s := zkdtest.Start(t, zkdtest.WithoutRaft())
	r := rawSession(t, s.Addr())
	mustCreate(t, r, "/mr", openACL, 0)
	mustCreate(t, r, "/mr/a", openACL, 0)
	mustCreate(t, r, "/mr/a/b", openACL, 0)
	var mr jute.MultiResponse
	req := &jute.MultiRequest{Ops: []jute.MultiOp{
		{Type: jute.OpGetChildren, Req: &jute.GetChildrenRequest{Path: "/mr"}},
		{Type: jute.OpGetData, Req: &jute.GetDataRequest{Path: "/nope"}},
		{Type: jute.OpGetData, Req: &jute.GetDataRequest{Path: "/mr/a"}},
	}}
	if _, err := r.Do(jute.OpMultiRead, req, &mr); err != nil {
		t.Fatal(err)
	}
	if len(mr.Results) != 3 || mr.Results[0].Type != jute.OpGetChildren || mr.Results[1].Err != jute.CodeNoNode || mr.Results[2].Type != jute.OpGetData {
		t.Errorf("multiRead results %+v", mr.Results)
	}
	var n jute.GetAllChildrenNumberResponse
	if _, err := r.Do(jute.OpGetAllChildrenNumber, &jute.GetAllChildrenNumberRequest{Path: "/mr"}, &n); err != nil || n.TotalNumber != 2 {
		t.Errorf("getAllChildrenNumber(/mr) = %d, %v; want 2", n.TotalNumber, err)
	}
	var sr jute.SyncResponse
	if _, err := r.Do(jute.OpSync, &jute.SyncRequest{Path: "/not/validated"}, &sr); err != nil || sr.Path != "/not/validated" {
		t.Errorf("sync = %+v, %v; want the path echoed", sr, err)
	}
	if _, err := r.Do(jute.OpReconfig, &jute.ReconfigRequest{CurConfigID: -1}, &jute.GetDataResponse{}); err != jute.CodeReconfigDisabled {
		t.Errorf("reconfig when disabled: %v; want ReconfigDisabled", err)
	}
}
