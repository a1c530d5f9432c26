package sasl

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// rfcExample is RFC 2831's section 4 example exchange, with the server's nonce and names fixed to
// the example's.
func rfcExchange(t *testing.T, cfg *Config) *digestExchange {
	t.Helper()
	d, err := newDigestExchange(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d.nonce, d.realm, d.service = "OA6MG9tEQGm2hh", "elwood.innosoft.com", "imap"
	if _, done, err := d.Next(nil); err != nil || done {
		t.Fatalf("first step = %v, %v; want a challenge", done, err)
	}
	return d
}

const rfcResponse = `charset=utf-8,username="chris",realm="elwood.innosoft.com",nonce="OA6MG9tEQGm2hh",nc=00000001,cnonce="OA6MHXh6VqTrRk",digest-uri="imap/elwood.innosoft.com",response=d388dad90d4bbd760a152321f2143af7,qop=auth`

func TestDigestRFC2831Example(t *testing.T) {
	d := rfcExchange(t, &Config{Users: map[string]string{"chris": "secret"}})
	rsp, done, err := d.Next([]byte(rfcResponse))
	if err != nil || !done {
		t.Fatalf("Next(response) = %q, %v, %v; want rspauth, done", rsp, done, err)
	}
	if got, want := string(rsp), "rspauth=ea40f60335c427b5527b84dbabcdfffd"; got != want {
		t.Errorf("server response = %q; want %q", got, want)
	}
	if d.ID() != "chris" {
		t.Errorf("ID() = %q; want chris", d.ID())
	}
	if _, _, err := d.Next(nil); !errors.Is(err, ErrAuthFailed) {
		t.Errorf("a step after the end = %v; want ErrAuthFailed", err)
	}
}

func TestDigestRefusals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		users map[string]string
		resp  string
	}{
		{"wrong password", map[string]string{"chris": "Secret"}, rfcResponse},
		{"unknown user", map[string]string{"bob": "secret"}, rfcResponse},
		{"other nonce", map[string]string{"chris": "secret"}, strings.Replace(rfcResponse, `nonce="OA6MG9tEQGm2hh"`, `nonce="OA6MG9tEQGm2hX"`, 1)},
		{"replayed nc", map[string]string{"chris": "secret"}, strings.Replace(rfcResponse, "nc=00000001", "nc=00000002", 1)},
		{"other uri", map[string]string{"chris": "secret"}, strings.Replace(rfcResponse, `imap/elwood`, `smtp/elwood`, 1)},
		{"other realm", map[string]string{"chris": "secret"}, strings.Replace(rfcResponse, `realm="elwood.innosoft.com"`, `realm="x"`, 1)},
		{"qop auth-int", map[string]string{"chris": "secret"}, strings.Replace(rfcResponse, "qop=auth", "qop=auth-int", 1)},
		{"duplicate directive", map[string]string{"chris": "secret"}, rfcResponse + `,username="chris"`},
		{"not a directive list", map[string]string{"chris": "secret"}, `username`},
		{"empty", map[string]string{"chris": "secret"}, ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := rfcExchange(t, &Config{Users: tc.users})
			rsp, done, err := d.Next([]byte(tc.resp))
			if !errors.Is(err, ErrAuthFailed) || done || rsp != nil {
				t.Fatalf("Next = %q, %v, %v; want ErrAuthFailed", rsp, done, err)
			}
			if d.ID() != "" {
				t.Errorf("ID() = %q after a failure", d.ID())
			}
		})
	}
}

func TestDigestInitialResponseRefused(t *testing.T) {
	d, err := newDigestExchange(&Config{Users: map[string]string{"a": "b"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Next([]byte("x")); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("Next(initial response) = %v; want ErrAuthFailed", err)
	}
}

func TestParseDirectives(t *testing.T) {
	got, err := ParseDirectives(` , realm="a\"b" ,, nonce = "n,1",qop=auth, ALGORITHM=md5-sess ,`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"realm": `a"b`, "nonce": "n,1", "qop": "auth", "algorithm": "md5-sess"}
	if len(got) != len(want) {
		t.Fatalf("ParseDirectives = %q; want %q", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("ParseDirectives[%s] = %q; want %q", k, got[k], v)
		}
	}
	for _, bad := range []string{`a`, `a=`[:1], `a="x`, `a="x"b`, `=x`, `a=1,a=2`, `a b=1`} {
		if m, err := ParseDirectives(bad); err == nil {
			t.Errorf("ParseDirectives(%q) = %q; want an error", bad, m)
		}
	}
}

func TestCanonical(t *testing.T) {
	for _, tc := range []struct {
		name               string
		removeHost, remove bool
		realm              string
		want               string
		bad                bool
	}{
		{name: "bob", want: "bob"},
		{name: "bob@EXAMPLE.COM", realm: "EXAMPLE.COM", want: "bob@EXAMPLE.COM"},
		{name: "bob@EXAMPLE.COM", realm: "EXAMPLE.COM", remove: true, want: "bob"},
		{name: "zk/host.x@EXAMPLE.COM", realm: "EXAMPLE.COM", want: "zk/host.x@EXAMPLE.COM"},
		{name: "zk/host.x@EXAMPLE.COM", realm: "EXAMPLE.COM", removeHost: true, want: "zk@EXAMPLE.COM"},
		{name: "zk/host.x@EXAMPLE.COM", realm: "EXAMPLE.COM", removeHost: true, remove: true, want: "zk"},
		{name: "bob@OTHER.ORG", realm: "EXAMPLE.COM", remove: true, want: "bob@OTHER.ORG"},
		{name: "a@b@c", bad: true},
	} {
		c := &Config{DefaultRealm: tc.realm, RemoveHostFromPrincipal: tc.removeHost, RemoveRealmFromPrincipal: tc.remove}
		got, err := c.canonical(tc.name)
		if tc.bad {
			if err == nil {
				t.Errorf("canonical(%q) = %q; want an error", tc.name, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("canonical(%q, host=%v realm=%v) = %q, %v; want %q", tc.name, tc.removeHost, tc.remove, got, err, tc.want)
		}
	}
}

func FuzzParseDirectives(f *testing.F) {
	f.Add(rfcResponse)
	f.Add(`realm="zk-sasl-md5",nonce="abc",qop="auth",charset=utf-8,algorithm=md5-sess`)
	f.Add(`a="\\\"",,b=c`)
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseDirectives(s)
		if err != nil {
			return
		}
		// What parses must parse again the same once written back in canonical form.
		var b strings.Builder
		for k, v := range m {
			b.WriteString(k + `="` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `",`)
		}
		m2, err := ParseDirectives(b.String())
		if err != nil {
			t.Fatalf("re-parse of %q: %v", b.String(), err)
		}
		if len(m2) != len(m) {
			t.Fatalf("re-parse of %q = %q; want %q", b.String(), m2, m)
		}
		for k, v := range m {
			if m2[k] != v {
				t.Fatalf("re-parse[%s] = %q; want %q", k, m2[k], v)
			}
		}
	})
}

func TestReplayCache(t *testing.T) {
	var r replayCache
	now := time.Unix(1_700_000_000, 0)
	if !r.fresh("bob@R", now, 5, now) {
		t.Fatal("a first authenticator was taken for a replay")
	}
	if r.fresh("bob@R", now, 5, now.Add(time.Second)) {
		t.Error("a replayed authenticator was accepted")
	}
	if !r.fresh("bob@R", now, 6, now) || !r.fresh("alice@R", now, 5, now) {
		t.Error("another authenticator was taken for a replay")
	}
	later := now.Add(2*maxClockSkew + time.Second)
	if !r.fresh("carol@R", later, 0, later) || len(r.seen) != 1 {
		t.Errorf("entries past the skew were not dropped: %d left", len(r.seen))
	}
}

// FuzzDigestResponse feeds arbitrary digest-responses to a DIGEST-MD5 exchange: none may panic,
// and none may authenticate (the user's password is not the one the seeds were made with).
func FuzzDigestResponse(f *testing.F) {
	f.Add([]byte(rfcResponse))
	f.Add([]byte(strings.Replace(rfcResponse, "qop=auth", "", 1)))
	f.Add([]byte(`username="chris",authzid="x",response=00000000000000000000000000000000`))
	f.Fuzz(func(t *testing.T, token []byte) {
		d, err := newDigestExchange(&Config{Users: map[string]string{"chris": "not-secret"}})
		if err != nil {
			t.Fatal(err)
		}
		d.nonce, d.realm, d.service = "OA6MG9tEQGm2hh", "elwood.innosoft.com", "imap"
		if _, _, err := d.Next(nil); err != nil {
			t.Fatal(err)
		}
		if rsp, done, err := d.Next(token); done || err == nil || d.ID() != "" {
			t.Fatalf("Next(%q) = %q, %v, %v; want a refusal", token, rsp, done, err)
		}
	})
}
