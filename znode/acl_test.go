package znode

import (
	"errors"
	"slices"
	"testing"

	"github.com/zkd-io/zkd/jute"
)

func TestDigestID(t *testing.T) {
	// The value ZooKeeper stored for addauth digest alice:secret (reference §10.2).
	if got, want := DigestID("alice", "secret"), "alice:aYXlLOpEooaV1cRAvUL1fp9Qt7E="; got != want {
		t.Fatalf("DigestID = %q; want %q", got, want)
	}
}

func TestCheckACL(t *testing.T) {
	acl := func(perms int32, scheme, id string) []jute.ACL {
		return []jute.ACL{{Perms: perms, ID: jute.Id{Scheme: scheme, ID: id}}}
	}
	ip := func(a string) []jute.Id { return []jute.Id{{Scheme: "ip", ID: a}} }
	alice := []jute.Id{{Scheme: "ip", ID: "127.0.0.1"}, {Scheme: "digest", ID: DigestID("alice", "pw")}}
	tests := []struct {
		name string
		acl  []jute.ACL
		auth []jute.Id
		perm int32
		want bool
	}{
		{"empty acl allows", nil, nil, jute.PermAdmin, true},
		{"world", acl(jute.PermRead, "world", "anyone"), nil, jute.PermRead, true},
		{"world lacks bit", acl(jute.PermRead, "world", "anyone"), nil, jute.PermWrite, false},
		{"any bit of perm", acl(jute.PermRead, "world", "anyone"), nil, jute.PermRead | jute.PermAdmin, true},
		{"digest match", acl(jute.PermAll, "digest", DigestID("alice", "pw")), alice, jute.PermWrite, true},
		{"digest other user", acl(jute.PermAll, "digest", DigestID("bob", "pw")), alice, jute.PermWrite, false},
		{"super bypasses", acl(0, "digest", "x:y"), []jute.Id{{Scheme: "super", ID: ""}}, jute.PermAdmin, true},
		{"ip exact", acl(jute.PermAll, "ip", "10.1.2.3"), ip("10.1.2.3"), jute.PermRead, true},
		{"ip exact miss", acl(jute.PermAll, "ip", "10.1.2.3"), ip("10.1.2.4"), jute.PermRead, false},
		{"ip cidr /8", acl(jute.PermAll, "ip", "127.0.0.0/8"), ip("127.9.9.9"), jute.PermRead, true},
		{"ip cidr /8 miss", acl(jute.PermAll, "ip", "127.0.0.0/8"), ip("128.0.0.1"), jute.PermRead, false},
		{"ip cidr /20", acl(jute.PermAll, "ip", "10.0.16.0/20"), ip("10.0.31.255"), jute.PermRead, true},
		{"ip cidr /20 miss", acl(jute.PermAll, "ip", "10.0.16.0/20"), ip("10.0.32.0"), jute.PermRead, false},
		{"ip /0", acl(jute.PermAll, "ip", "0.0.0.0/0"), ip("8.8.8.8"), jute.PermRead, true},
		{"ipv6 cidr", acl(jute.PermAll, "ip", "2001:db8::/32"), ip("2001:db8:1::5"), jute.PermRead, true},
		{"ipv6 cidr miss", acl(jute.PermAll, "ip", "2001:db8::/32"), ip("2001:db9::5"), jute.PermRead, false},
		{"ipv6 vs ipv4", acl(jute.PermAll, "ip", "::/0"), ip("1.2.3.4"), jute.PermRead, false},
		{"ip scheme mismatch", acl(jute.PermAll, "ip", "1.2.3.4"), []jute.Id{{Scheme: "digest", ID: "1.2.3.4"}}, jute.PermRead, false},
	}
	for _, tt := range tests {
		if got := CheckACL(tt.acl, tt.auth, tt.perm); got != tt.want {
			t.Errorf("%s: CheckACL = %v; want %v", tt.name, got, tt.want)
		}
	}
}

func TestFixupACL(t *testing.T) {
	e := func(perms int32, scheme, id string) jute.ACL {
		return jute.ACL{Perms: perms, ID: jute.Id{Scheme: scheme, ID: id}}
	}
	aliceID := jute.Id{Scheme: "digest", ID: DigestID("alice", "secret")}
	auth := []jute.Id{{Scheme: "ip", ID: "127.0.0.1"}, aliceID, {Scheme: "super", ID: ""}}
	tests := []struct {
		name string
		in   []jute.ACL
		auth []jute.Id
		want []jute.ACL // nil: InvalidACL
	}{
		{"empty", []jute.ACL{}, nil, nil},
		{"null", nil, nil, nil},
		{"world anyone", []jute.ACL{e(31, "world", "anyone")}, nil, []jute.ACL{e(31, "world", "anyone")}},
		{"world other", []jute.ACL{e(31, "world", "someone")}, nil, nil},
		{"duplicates dropped", []jute.ACL{e(1, "world", "anyone"), e(1, "world", "anyone")}, nil, []jute.ACL{e(1, "world", "anyone")}},
		{"perms kept as is", []jute.ACL{e(255, "world", "anyone")}, nil, []jute.ACL{e(255, "world", "anyone")}},
		{"auth expands to digest, not ip or super", []jute.ACL{e(31, "auth", "ignored")}, auth, []jute.ACL{{Perms: 31, ID: aliceID}}},
		{"auth with only ip", []jute.ACL{e(31, "auth", "")}, auth[:1], nil},
		{"digest ok", []jute.ACL{e(31, "digest", "u:h")}, nil, []jute.ACL{e(31, "digest", "u:h")}},
		{"digest empty user", []jute.ACL{e(31, "digest", ":h")}, nil, []jute.ACL{e(31, "digest", ":h")}},
		{"digest no colon", []jute.ACL{e(31, "digest", "nocolon")}, nil, nil},
		{"digest trailing colon", []jute.ACL{e(31, "digest", "u:")}, nil, nil},
		{"digest two colons", []jute.ACL{e(31, "digest", "u:h:x")}, nil, nil},
		{"ip v4", []jute.ACL{e(31, "ip", "10.0.0.1")}, nil, []jute.ACL{e(31, "ip", "10.0.0.1")}},
		{"ip v4 cidr", []jute.ACL{e(31, "ip", "10.0.0.0/8")}, nil, []jute.ACL{e(31, "ip", "10.0.0.0/8")}},
		{"ip v4 bits too big", []jute.ACL{e(31, "ip", "10.0.0.0/33")}, nil, nil},
		{"ip v4 octet too big", []jute.ACL{e(31, "ip", "10.0.0.256")}, nil, nil},
		{"ip v4 three parts", []jute.ACL{e(31, "ip", "10.0.0")}, nil, nil},
		{"ip v6", []jute.ACL{e(31, "ip", "fe80::1/64")}, nil, []jute.ACL{e(31, "ip", "fe80::1/64")}},
		{"ip v6 bits too big", []jute.ACL{e(31, "ip", "fe80::1/129")}, nil, nil},
		{"ip garbage", []jute.ACL{e(31, "ip", "notanip")}, nil, nil},
		{"sasl unregistered", []jute.ACL{e(31, "sasl", "x")}, nil, nil},
		{"x509 name", []jute.ACL{e(31, "x509", `CN=client one,OU=Eng+L=Here,O=Acme\, Inc.,C=US`)}, nil, []jute.ACL{e(31, "x509", `CN=client one,OU=Eng+L=Here,O=Acme\, Inc.,C=US`)}},
		{"x509 empty name", []jute.ACL{e(31, "x509", "")}, nil, []jute.ACL{e(31, "x509", "")}},
		{"x509 OID and hex", []jute.ACL{e(31, "x509", "1.2.840.113549.1.9.1=#0c03614062,CN=x")}, nil, []jute.ACL{e(31, "x509", "1.2.840.113549.1.9.1=#0c03614062,CN=x")}},
		{"x509 not a name", []jute.ACL{e(31, "x509", "foo")}, nil, nil},
		// Checked against ZooKeeper 3.8 with TLS on (its x509 provider loaded).
		{"x509 blank", []jute.ACL{e(31, "x509", " ")}, nil, nil},
		{"x509 less than", []jute.ACL{e(31, "x509", "CN=a<b")}, nil, nil},
		{"x509 bad hex", []jute.ACL{e(31, "x509", "CN=#zz")}, nil, nil},
		{"x509 equals in value", []jute.ACL{e(31, "x509", "CN=a=b")}, nil, []jute.ACL{e(31, "x509", "CN=a=b")}},
		{"x509 quoted, semicolons, lower case", []jute.ACL{e(31, "x509", `cn="a,b";o=y`)}, nil, []jute.ACL{e(31, "x509", `cn="a,b";o=y`)}},
		{"x509 OID. prefix and hex escape", []jute.ACL{e(31, "x509", `OID.2.5.4.3=a\41`)}, nil, []jute.ACL{e(31, "x509", `OID.2.5.4.3=a\41`)}},
		{"x509 unknown keyword", []jute.ACL{e(31, "x509", "XX=foo")}, nil, nil},
		{"x509 bad escape", []jute.ACL{e(31, "x509", `CN=a\`)}, nil, nil},
		{"super invalid", []jute.ACL{e(31, "super", "x")}, nil, nil},
		{"one bad entry spoils all", []jute.ACL{e(31, "world", "anyone"), e(31, "ip", "x")}, nil, nil},
	}
	for _, tt := range tests {
		got, err := fixupACL(tt.in, tt.auth, false)
		if tt.want == nil {
			wantCode(t, tt.name, err, jute.CodeInvalidACL)
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("%s: fixupACL = %v, %v; want %v", tt.name, got, err, tt.want)
		}
	}
}

func TestFixupACLWithSASL(t *testing.T) {
	e := func(perms int32, scheme, id string) jute.ACL {
		return jute.ACL{Perms: perms, ID: jute.Id{Scheme: scheme, ID: id}}
	}
	bob := jute.Id{Scheme: "sasl", ID: "bob@EXAMPLE.COM"}
	auth := []jute.Id{{Scheme: "ip", ID: "127.0.0.1"}, bob}
	for _, tt := range []struct {
		name string
		in   []jute.ACL
		auth []jute.Id
		want []jute.ACL // nil: InvalidACL
	}{
		{"plain name", []jute.ACL{e(31, "sasl", "bob")}, nil, []jute.ACL{e(31, "sasl", "bob")}},
		{"principal", []jute.ACL{e(31, "sasl", "zk/host@R")}, nil, []jute.ACL{e(31, "sasl", "zk/host@R")}},
		{"two realms", []jute.ACL{e(31, "sasl", "a@b@c")}, nil, nil},
		{"two hosts", []jute.ACL{e(31, "sasl", "a/b/c@R")}, nil, nil},
		{"auth expands to sasl", []jute.ACL{e(31, "auth", "")}, auth, []jute.ACL{{Perms: 31, ID: bob}}},
	} {
		got, err := fixupACL(tt.in, tt.auth, true)
		if tt.want == nil {
			wantCode(t, tt.name, err, jute.CodeInvalidACL)
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("%s: fixupACL = %v, %v; want %v", tt.name, got, err, tt.want)
		}
	}
	// Without the sasl provider, a sasl identity does not expand auth.
	if _, err := fixupACL([]jute.ACL{e(31, "auth", "")}, auth, false); !errors.Is(err, jute.CodeInvalidACL) {
		t.Errorf("auth with only a sasl id and no provider: %v; want InvalidACL", err)
	}
	acl := []jute.ACL{e(jute.PermRead, "sasl", "bob@EXAMPLE.COM")}
	for _, tt := range []struct {
		id   string
		want bool
	}{{"bob@EXAMPLE.COM", true}, {"bob", false}, {"super", true}} {
		if got := CheckACL(acl, []jute.Id{{Scheme: "sasl", ID: tt.id}}, jute.PermRead); got != tt.want {
			t.Errorf("CheckACL(sasl:bob@EXAMPLE.COM, sasl:%s) = %v; want %v", tt.id, got, tt.want)
		}
	}
}

func TestACLPerOp(t *testing.T) {
	h := newHarness(t)
	only := func(perms int32) []jute.ACL {
		return []jute.ACL{
			{Perms: perms, ID: jute.Id{Scheme: "world", ID: "anyone"}},
			{Perms: jute.PermAll, ID: jute.Id{Scheme: "digest", ID: DigestID("admin", "pw")}},
		}
	}
	for _, p := range []struct {
		path  string
		perms int32
	}{{"/r", jute.PermRead}, {"/w", jute.PermWrite}, {"/c", jute.PermCreate}, {"/d", jute.PermDelete}, {"/a", jute.PermAdmin}, {"/none", 0}} {
		h.apply(jute.OpCreate, &jute.CreateRequest{Path: p.path, Data: []byte("x"), ACL: only(p.perms)})
		h.auth = []jute.Id{{Scheme: "digest", ID: DigestID("admin", "pw")}}
		h.mustCreate(p.path+"/kid", 0)
		h.auth = nil
	}
	type check struct {
		path string
		ok   bool
	}
	writes := []struct {
		name string
		mk   func(path string) (jute.Op, any)
		want []check
	}{
		{"create needs CREATE on parent", func(p string) (jute.Op, any) {
			return jute.OpCreate, &jute.CreateRequest{Path: p + "/new", ACL: worldAll}
		}, []check{{"/c", true}, {"/r", false}, {"/w", false}, {"/a", false}, {"/none", false}}},
		{"delete needs DELETE on parent", func(p string) (jute.Op, any) {
			return jute.OpDelete, &jute.DeleteRequest{Path: p + "/kid", Version: -1}
		}, []check{{"/d", true}, {"/r", false}, {"/c", false}, {"/none", false}}},
		{"setData needs WRITE", func(p string) (jute.Op, any) {
			return jute.OpSetData, &jute.SetDataRequest{Path: p, Version: -1}
		}, []check{{"/w", true}, {"/r", false}, {"/a", false}}},
		{"setACL needs ADMIN", func(p string) (jute.Op, any) {
			return jute.OpSetACL, &jute.SetACLRequest{Path: p, ACL: only(jute.PermAdmin), Version: -1}
		}, []check{{"/a", true}, {"/r", false}, {"/w", false}}},
		{"check needs READ", func(p string) (jute.Op, any) {
			return jute.OpMulti, &jute.MultiRequest{Ops: []jute.MultiOp{{Type: jute.OpCheck, Req: &jute.CheckVersionRequest{Path: p, Version: -1}}}}
		}, []check{{"/r", true}, {"/w", false}}},
	}
	for _, w := range writes {
		for _, c := range w.want {
			op, req := w.mk(c.path)
			res := h.apply(op, req)
			err := res.Err
			if mr, ok := res.Resp.(*jute.MultiResponse); ok && mr.Results[0].Err != 0 {
				err = mr.Results[0].Err
			}
			if c.ok {
				wantCode(t, w.name+" "+c.path, err, jute.CodeOK)
			} else {
				wantCode(t, w.name+" "+c.path, err, jute.CodeNoAuth)
			}
		}
	}

	v := h.tree.View()
	reads := []struct {
		op  jute.Op
		req func(string) jute.Record
		ok  []string
		no  []string
	}{
		{jute.OpExists, func(p string) jute.Record { return &jute.ExistsRequest{Path: p} }, []string{"/r"}, []string{"/w", "/a", "/none"}},
		{jute.OpGetData, func(p string) jute.Record { return &jute.GetDataRequest{Path: p} }, []string{"/r"}, []string{"/w", "/a"}},
		{jute.OpGetChildren, func(p string) jute.Record { return &jute.GetChildrenRequest{Path: p} }, []string{"/r"}, []string{"/c"}},
		{jute.OpGetChildren2, func(p string) jute.Record { return &jute.GetChildren2Request{Path: p} }, []string{"/r"}, []string{"/d"}},
		{jute.OpGetAllChildrenNumber, func(p string) jute.Record { return &jute.GetAllChildrenNumberRequest{Path: p} }, []string{"/r"}, []string{"/w"}},
		{jute.OpGetACL, func(p string) jute.Record { return &jute.GetACLRequest{Path: p} }, []string{"/r", "/a"}, []string{"/w", "/c", "/none"}},
	}
	for _, r := range reads {
		for _, p := range r.ok {
			_, err := v.Read(0, nil, r.op, r.req(p))
			wantCode(t, r.op.String()+" "+p, err, jute.CodeOK)
		}
		for _, p := range r.no {
			_, err := v.Read(0, nil, r.op, r.req(p))
			wantCode(t, r.op.String()+" "+p, err, jute.CodeNoAuth)
		}
		_, err := v.Read(0, nil, r.op, r.req("/missing"))
		wantCode(t, r.op.String()+" /missing", err, jute.CodeNoNode)
		// super reads everything
		_, err = v.Read(0, []jute.Id{{Scheme: "super"}}, r.op, r.req("/none"))
		wantCode(t, r.op.String()+" as super", err, jute.CodeOK)
	}

	// getACL hides digests from callers without ADMIN.
	resp, _ := v.Read(0, nil, jute.OpGetACL, &jute.GetACLRequest{Path: "/r"})
	got := resp.(*jute.GetACLResponse).ACL
	if got[1].ID.ID != "admin:x" || got[0].ID.ID != "anyone" {
		t.Fatalf("getACL without ADMIN = %v", got)
	}
	resp, _ = v.Read(0, []jute.Id{{Scheme: "digest", ID: DigestID("admin", "pw")}}, jute.OpGetACL, &jute.GetACLRequest{Path: "/r"})
	if got := resp.(*jute.GetACLResponse).ACL; got[1].ID.ID != DigestID("admin", "pw") {
		t.Fatalf("getACL with ADMIN = %v", got)
	}
	if acl, _ := v.ACL("/r"); acl[1].ID.ID != DigestID("admin", "pw") {
		t.Fatalf("getACL modified the stored ACL: %v", acl)
	}
}

func TestACLInterning(t *testing.T) {
	h := newHarness(t)
	for _, p := range []string{"/a", "/b", "/c"} {
		h.apply(jute.OpCreate, &jute.CreateRequest{Path: p, ACL: []jute.ACL{{Perms: 31, ID: jute.Id{Scheme: "world", ID: "anyone"}}}})
	}
	v := h.tree.View()
	a, b := v.lookup("/a"), v.lookup("/c")
	if a.acl != b.acl || a.acl != v.root.acl {
		t.Fatalf("equal ACLs are not shared")
	}
}
