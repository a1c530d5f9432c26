package server_test

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zkd-io/zkd/conformance"
	"github.com/zkd-io/zkd/internal/testkit"
	"github.com/zkd-io/zkd/internal/testkit/apachezk"
	"github.com/zkd-io/zkd/internal/testkit/tlstest"
	"github.com/zkd-io/zkd/internal/testkit/zktest"
	"github.com/zkd-io/zkd/internal/tlsconf"
	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/server"
	"github.com/zkd-io/zkd/server/zkdtest"
)

// TLS for clients and x509 identities, through real servers and real clients. Every check runs
// against zkd and against Apache ZooKeeper 3.8 configured with the same ssl.* keys (skipped when
// ZooKeeper is not installed), so that zkd answers as ZooKeeper does.

// pki is a test's certificate authority, the server's stores and client certificates, on disk.
type pki struct {
	dir    string
	ca     *tlstest.CA
	server *tlstest.Leaf
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir(), ca: tlstest.NewCA(t, "zkd test CA")}
	p.server = p.ca.Issue(t, tlstest.Localhost("zkd server"))
	p.server.WritePEM(t, p.path("server.pem"))
	p.ca.WritePEM(t, p.path("ca.pem"))
	return p
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

// props are the server's ssl.* keys over the PEM stores, plus extra.
func (p *pki) props(extra map[string]string) map[string]string {
	props := map[string]string{
		"ssl.keyStore.location":   p.path("server.pem"),
		"ssl.trustStore.location": p.path("ca.pem"),
	}
	for k, v := range extra {
		props[k] = v
	}
	return props
}

// client issues a client certificate with the given subject.
func (p *pki) client(t *testing.T, subject pkix.Name) *tlstest.Leaf {
	t.Helper()
	return p.ca.Issue(t, tlstest.Options{Subject: subject})
}

// tlsTarget is one server under test: its plain and TLS-only client addresses.
type tlsTarget struct {
	plain, secure string
}

// forTLSTargets runs check against zkd and against ZooKeeper 3.8, each configured with props
// (ssl.*, client.portUnification, X509AuthenticationProvider.superUser).
func forTLSTargets(t *testing.T, props map[string]string, check func(t *testing.T, tg tlsTarget)) {
	t.Helper()
	t.Run("zkd", func(t *testing.T) { check(t, startZkdTLS(t, props)) })
	t.Run("zookeeper", func(t *testing.T) {
		if testing.Short() {
			t.Skip("starts Apache ZooKeeper")
		}
		check(t, startZooKeeperTLS(t, props))
	})
}

func startZkdTLS(t *testing.T, props map[string]string) tlsTarget {
	t.Helper()
	set, err := tlsconf.Parse(props, "ssl.")
	if err != nil {
		t.Fatal(err)
	}
	set.ReloadInterval = 10 * time.Millisecond
	src, err := tlsconf.New(set, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := zkdtest.Start(t, zkdtest.WithoutRaft(), zkdtest.WithLogs(t), zkdtest.WithConfig(func(c *server.Config) {
		c.TLS = src.ServerConfig()
		c.SecureAddr = "127.0.0.1:0"
		c.PortUnification = props["client.portUnification"] == "true"
		c.X509SuperUser = props["X509AuthenticationProvider.superUser"]
		if props["enforce.auth.enabled"] == "true" {
			c.EnforceAuthSchemes = strings.Split(props["enforce.auth.schemes"], ",")
		}
	}))
	return tlsTarget{plain: s.Addr(), secure: s.SecureAddr()}
}

// startZooKeeperTLS starts ZooKeeper 3.8 with the Netty connection factory (which ZooKeeper
// needs for TLS), a plain and a secure client port, and props.
func startZooKeeperTLS(t *testing.T, props map[string]string) tlsTarget {
	t.Helper()
	var secure int
	p := zktest.Launch(t, 2, func(ports []int) apachezk.ServerConfig {
		secure = ports[1]
		extra := map[string]string{
			"serverCnxnFactory":       "org.apache.zookeeper.server.NettyServerCnxnFactory",
			"secureClientPort":        strconv.Itoa(ports[1]),
			"secureClientPortAddress": "127.0.0.1",
		}
		for k, v := range props {
			extra[k] = v
		}
		return apachezk.ServerConfig{
			Dir: t.TempDir(), ClientAddr: fmt.Sprintf("127.0.0.1:%d", ports[0]), HeapMB: 256, Extra: extra,
		}
	})
	return tlsTarget{plain: p.ClientAddr(), secure: fmt.Sprintf("127.0.0.1:%d", secure)}
}

// clientTLS is a Go client's TLS configuration: it trusts the test CA, checks the server's
// name, and presents leaf when not nil.
func (p *pki) clientTLS(t *testing.T, leaf *tlstest.Leaf) *tls.Config {
	t.Helper()
	props := map[string]string{"ssl.trustStore.location": p.path("ca.pem")}
	if leaf != nil {
		name := fmt.Sprintf("client-%d.pem", time.Now().UnixNano())
		leaf.WritePEM(t, p.path(name))
		props["ssl.keyStore.location"] = p.path(name)
	}
	set, err := tlsconf.Parse(props, "ssl.")
	if err != nil {
		t.Fatal(err)
	}
	src, err := tlsconf.New(set, nil)
	if err != nil {
		t.Fatal(err)
	}
	return src.ClientConfig("127.0.0.1")
}

// tlsSession opens a TLS connection and a session on it. The error is the handshake's or the
// session's: a server that refuses the client's certificate may only say so after the client's
// side of a TLS 1.3 handshake is done. A server that does not accept the TCP connection at all
// fails the test, so that a refusal is never mistaken for a port that is not listening.
func tlsSession(t *testing.T, addr string, cfg *tls.Config) (*conformance.Raw, error) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatalf("nothing listens on the secure port: %v", err)
	}
	if cfg.ServerName == "" {
		cfg = cfg.Clone()
		host, _, _ := net.SplitHostPort(addr)
		cfg.ServerName = host
	}
	tc := tls.Client(c, cfg)
	_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
	if err := tc.Handshake(); err != nil {
		_ = c.Close()
		return nil, err
	}
	_ = tc.SetDeadline(time.Time{})
	r := conformance.NewRaw(tc, 10*time.Second)
	if err := r.NewSession(10000); err != nil {
		_ = r.Close()
		return nil, err
	}
	return r, nil
}

func mustTLSSession(t *testing.T, addr string, cfg *tls.Config) *conformance.Raw {
	t.Helper()
	r, err := tlsSession(t, addr, cfg)
	if err != nil {
		t.Fatalf("TLS session on %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// whoAmI returns the session's identities as "scheme:user".
func whoAmI(t *testing.T, r *conformance.Raw) []string {
	t.Helper()
	var resp jute.WhoAmIResponse
	if _, err := r.Do(jute.OpWhoAmI, nil, &resp); err != nil {
		t.Fatalf("whoAmI: %v", err)
	}
	var ids []string
	for _, ci := range resp.ClientInfo {
		ids = append(ids, ci.AuthScheme+":"+ci.User)
	}
	return ids
}

func createACL(r *conformance.Raw, path string, acl []jute.ACL) error {
	var resp jute.CreateResponse
	hdr, err := r.Do(jute.OpCreate, &jute.CreateRequest{Path: path, Data: []byte("x"), ACL: acl}, &resp)
	if err != nil {
		return err
	}
	if hdr.Err != jute.CodeOK {
		return hdr.Err
	}
	return nil
}

func getData(r *conformance.Raw, path string) error {
	var resp jute.GetDataResponse
	hdr, err := r.Do(jute.OpGetData, &jute.GetDataRequest{Path: path}, &resp)
	if err != nil {
		return err
	}
	if hdr.Err != jute.CodeOK {
		return hdr.Err
	}
	return nil
}

func dnOf(t *testing.T, leaf *tlstest.Leaf) string {
	t.Helper()
	dn, err := tlsconf.SubjectDN(leaf.Cert)
	if err != nil {
		t.Fatal(err)
	}
	return dn
}

// acmeSubject has every part of a subject that RFC 2253 formatting must get right: commas to
// escape, several RDNs, in Go's order (C first).
var acmeSubject = pkix.Name{CommonName: "client one", Organization: []string{"Acme, Inc."},
	OrganizationalUnit: []string{"Eng"}, Country: []string{"US"}}

// TestTLSClientAuthModes checks ssl.clientAuth need, want and none with and without a client
// certificate, and the x509 id a verified certificate gives (whoAmI shows it).
func TestTLSClientAuthModes(t *testing.T) {
	p := newPKI(t)
	leaf := p.client(t, acmeSubject)
	withCert, noCert := p.clientTLS(t, leaf), p.clientTLS(t, nil)
	for _, mode := range []string{"need", "want", "none"} {
		t.Run(mode, func(t *testing.T) {
			forTLSTargets(t, p.props(map[string]string{"ssl.clientAuth": mode}), func(t *testing.T, tg tlsTarget) {
				r, err := tlsSession(t, tg.secure, noCert)
				switch {
				case mode == "need" && err == nil:
					_ = r.Close()
					t.Error("clientAuth=need served a client without a certificate")
				case mode != "need" && err != nil:
					t.Errorf("clientAuth=%s refused a client without a certificate: %v", mode, err)
				case err == nil:
					if ids := whoAmI(t, r); strings.Contains(strings.Join(ids, " "), "x509") {
						t.Errorf("a client without a certificate has ids %v", ids)
					}
					_ = r.Close()
				}
				r = mustTLSSession(t, tg.secure, withCert)
				ids := strings.Join(whoAmI(t, r), " ")
				want := "x509:" + dnOf(t, leaf)
				if mode == "none" {
					if strings.Contains(ids, "x509") {
						t.Errorf("clientAuth=none: ids %q; want no x509 id (no certificate was asked for)", ids)
					}
					return
				}
				if !strings.Contains(ids, want) {
					t.Errorf("ids %q; want %q among them", ids, want)
				}
				// The auth ACL scheme names the x509 identity.
				if err := createACL(r, "/auth", []jute.ACL{{Perms: jute.PermAll, ID: jute.Id{Scheme: "auth"}}}); err != nil {
					t.Fatalf("create with the auth ACL: %v", err)
				}
				var acl jute.GetACLResponse
				if _, err := r.Do(jute.OpGetACL, &jute.GetACLRequest{Path: "/auth"}, &acl); err != nil || len(acl.ACL) != 1 ||
					acl.ACL[0].ID != (jute.Id{Scheme: "x509", ID: dnOf(t, leaf)}) {
					t.Errorf("getACL(/auth) = %+v, %v; want the x509 id alone", acl.ACL, err)
				}
			})
		})
	}
}

// TestTLSRefusesBadCertificates checks that a client certificate of an unknown CA or an expired
// one is refused, and that a client checking host names refuses a server certificate for
// another name.
func TestTLSRefusesBadCertificates(t *testing.T) {
	p := newPKI(t)
	stranger := tlstest.NewCA(t, "stranger CA").Issue(t, tlstest.Options{Subject: pkix.Name{CommonName: "stranger"}})
	expired := p.ca.Issue(t, tlstest.Options{Subject: pkix.Name{CommonName: "expired"},
		NotBefore: time.Now().Add(-72 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})
	good := p.client(t, pkix.Name{CommonName: "good"})
	forTLSTargets(t, p.props(nil), func(t *testing.T, tg tlsTarget) {
		for name, leaf := range map[string]*tlstest.Leaf{"unknown CA": stranger, "expired": expired} {
			if r, err := tlsSession(t, tg.secure, p.clientTLS(t, leaf)); err == nil {
				_ = r.Close()
				t.Errorf("a client certificate of %s was accepted", name)
			}
		}
		mustTLSSession(t, tg.secure, p.clientTLS(t, good))
	})
	// clientAuth=want verifies a certificate that is given.
	forTLSTargets(t, p.props(map[string]string{"ssl.clientAuth": "want"}), func(t *testing.T, tg tlsTarget) {
		if r, err := tlsSession(t, tg.secure, p.clientTLS(t, stranger)); err == nil {
			_ = r.Close()
			t.Error("clientAuth=want accepted a client certificate of an unknown CA")
		}
	})

	// A server certificate for another name.
	wrong := newPKI(t)
	wrong.ca.Issue(t, tlstest.Options{Subject: pkix.Name{CommonName: "elsewhere"}, DNSNames: []string{"elsewhere.example"}}).
		WritePEM(t, wrong.path("server.pem"))
	forTLSTargets(t, wrong.props(map[string]string{"ssl.clientAuth": "none"}), func(t *testing.T, tg tlsTarget) {
		if r, err := tlsSession(t, tg.secure, wrong.clientTLS(t, nil)); err == nil {
			_ = r.Close()
			t.Error("a client verifying host names accepted a certificate for elsewhere.example")
		}
	})
}

// TestTLSPlaintextClientRefused sends a plain ConnectRequest and a four-letter word to the
// TLS-only port: both are refused, and the server goes on serving TLS clients.
func TestTLSPlaintextClientRefused(t *testing.T) {
	p := newPKI(t)
	leaf := p.client(t, pkix.Name{CommonName: "c"})
	forTLSTargets(t, p.props(nil), func(t *testing.T, tg tlsTarget) {
		for range 3 {
			r := dialRaw(t, tg.secure)
			if _, _, err := r.Handshake(jute.ConnectRequest{TimeOut: 5000, Passwd: make([]byte, 16)}); err == nil {
				t.Fatal("a plaintext ConnectRequest on the secure port was answered")
			}
			if out, err := apachezk.FourLetterWord(t.Context(), tg.secure, "ruok"); err == nil && out == "imok" {
				t.Fatal("a plaintext four-letter word on the secure port was answered")
			}
		}
		if out, err := apachezk.FourLetterWord(t.Context(), tg.plain, "mntr"); err != nil || !strings.Contains(out, "zk_unsuccessful_handshake\t") ||
			strings.Contains(out, "zk_unsuccessful_handshake\t0\n") {
			t.Errorf("mntr after refused handshakes: %v\n%s\nwant a non-zero zk_unsuccessful_handshake", err, out)
		}
		r := mustTLSSession(t, tg.secure, p.clientTLS(t, leaf))
		if err := createACL(r, "/after", []jute.ACL{{Perms: jute.PermAll, ID: jute.Id{Scheme: "world", ID: "anyone"}}}); err != nil {
			t.Fatalf("after refusing plaintext clients: %v", err)
		}
	})
}

// TestTLSPortUnification serves plain and TLS clients on one port (client.portUnification).
func TestTLSPortUnification(t *testing.T) {
	p := newPKI(t)
	leaf := p.client(t, pkix.Name{CommonName: "unified"})
	forTLSTargets(t, p.props(map[string]string{"client.portUnification": "true"}), func(t *testing.T, tg tlsTarget) {
		secure := mustTLSSession(t, tg.plain, p.clientTLS(t, leaf))
		if ids := strings.Join(whoAmI(t, secure), " "); !strings.Contains(ids, "x509:CN=unified") {
			t.Errorf("TLS on the unified port: ids %q; want x509:CN=unified", ids)
		}
		plain := rawSession(t, tg.plain)
		if ids := strings.Join(whoAmI(t, plain), " "); strings.Contains(ids, "x509") {
			t.Errorf("plain on the unified port: ids %q", ids)
		}
		if out, err := apachezk.FourLetterWord(t.Context(), tg.plain, "ruok"); err != nil || out != "imok" {
			t.Errorf("ruok on the unified port = %q, %v", out, err)
		}
	})
}

// TestTLSFourLetterWords sends mntr and srvr over TLS to the secure port.
func TestTLSFourLetterWords(t *testing.T) {
	p := newPKI(t)
	cfg := p.clientTLS(t, p.client(t, pkix.Name{CommonName: "monitor"}))
	forTLSTargets(t, p.props(map[string]string{"4lw.commands.whitelist": "*"}), func(t *testing.T, tg tlsTarget) {
		for word, want := range map[string]string{"mntr": "zk_version\t", "srvr": "Zookeeper version: "} {
			tc, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", tg.secure, cfg)
			if err != nil {
				t.Fatal(err)
			}
			_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := tc.Write([]byte(word)); err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			buf := make([]byte, 4096)
			for {
				n, err := tc.Read(buf)
				b.Write(buf[:n])
				if err != nil {
					break
				}
			}
			_ = tc.Close()
			if !strings.Contains(b.String(), want) {
				t.Errorf("%s over TLS = %q; want %q in it", word, b.String(), want)
			}
		}
	})
}

// TestX509ACL checks a node whose ACL names one certificate's x509 id: that client reads it, a
// client with another certificate of the same CA gets NoAuth, and the x509 super user reads it.
func TestX509ACL(t *testing.T) {
	p := newPKI(t)
	owner := p.client(t, acmeSubject)
	other := p.client(t, pkix.Name{CommonName: "client two", Organization: []string{"Acme, Inc."}})
	admin := p.client(t, pkix.Name{CommonName: "admin", OrganizationalUnit: []string{"ops"}})
	props := p.props(map[string]string{"X509AuthenticationProvider.superUser": dnOf(t, admin)})
	forTLSTargets(t, props, func(t *testing.T, tg tlsTarget) {
		r := mustTLSSession(t, tg.secure, p.clientTLS(t, owner))
		acl := []jute.ACL{{Perms: jute.PermAll, ID: jute.Id{Scheme: "x509", ID: dnOf(t, owner)}}}
		if err := createACL(r, "/owned", acl); err != nil {
			t.Fatalf("create with ACL %v: %v", acl, err)
		}
		if err := getData(r, "/owned"); err != nil {
			t.Errorf("the owner's read: %v", err)
		}
		if err := getData(mustTLSSession(t, tg.secure, p.clientTLS(t, other)), "/owned"); !errors.Is(err, jute.CodeNoAuth) {
			t.Errorf("another certificate's read = %v; want NoAuth", err)
		}
		if err := getData(rawSession(t, tg.plain), "/owned"); !errors.Is(err, jute.CodeNoAuth) {
			t.Errorf("a plain client's read = %v; want NoAuth", err)
		}
		su := mustTLSSession(t, tg.secure, p.clientTLS(t, admin))
		if err := getData(su, "/owned"); err != nil {
			t.Errorf("the x509 super user's read: %v", err)
		}
		// ZooKeeper's whoAmI names no user for super.
		if ids := whoAmI(t, su); !slices.Contains(ids, "super:") || !slices.Contains(ids, "x509:"+dnOf(t, admin)) {
			t.Errorf("the super user's ids %q; want super: and x509:%s", ids, dnOf(t, admin))
		}
	})
}

// TestTLSCertificateReload replaces the server's key store while zkd runs: new connections get
// the new certificate, with no restart. (ZooKeeper 3.8 reloads only quorum certificates, so this
// check runs on zkd alone; see docs/differences.md.)
func TestTLSCertificateReload(t *testing.T) {
	p := newPKI(t)
	tg := startZkdTLS(t, p.props(map[string]string{"ssl.clientAuth": "none"}))
	served := func() string {
		t.Helper()
		tc, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", tg.secure, p.clientTLS(t, nil))
		if err != nil {
			t.Fatal(err)
		}
		defer tc.Close()
		return tc.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if cn := served(); cn != "zkd server" {
		t.Fatalf("served %q at first", cn)
	}
	p.ca.Issue(t, tlstest.Localhost("renewed server")).WritePEM(t, p.path("server.pem"))
	testkit.Eventually(t, 10*time.Second, "the renewed certificate to be served", func() bool {
		return served() == "renewed server"
	})
}

func TestTLSConfigValidate(t *testing.T) {
	tlsCfg := &tls.Config{}
	for name, c := range map[string]server.Config{
		"SecureAddr without TLS":         {SecureAddr: "127.0.0.1:0"},
		"PortUnification without TLS":    {PortUnification: true},
		"NoPlainListener without secure": {NoPlainListener: true, TLS: tlsCfg},
		"NoPlainListener with Addr":      {NoPlainListener: true, Addr: "127.0.0.1:0", TLS: tlsCfg, SecureAddr: "127.0.0.1:0"},
		"PortUnification without a port": {NoPlainListener: true, PortUnification: true, TLS: tlsCfg, SecureAddr: "127.0.0.1:0"},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, c)
		}
	}
	ok := server.Config{NoPlainListener: true, TLS: tlsCfg, SecureAddr: "127.0.0.1:0"}
	if err := ok.Validate(); err != nil {
		t.Errorf("a TLS-only config: %v", err)
	}
}

// TestX509EnforcedAuth requires the x509 scheme (enforce.auth.schemes=x509): a client with a
// verified certificate is served, a plain client's requests are refused.
func TestX509EnforcedAuth(t *testing.T) {
	p := newPKI(t)
	leaf := p.client(t, pkix.Name{CommonName: "enforced"})
	props := p.props(map[string]string{"enforce.auth.enabled": "true", "enforce.auth.schemes": "x509"})
	forTLSTargets(t, props, func(t *testing.T, tg tlsTarget) {
		r := mustTLSSession(t, tg.secure, p.clientTLS(t, leaf))
		if err := createACL(r, "/enforced", []jute.ACL{{Perms: jute.PermAll, ID: jute.Id{Scheme: "world", ID: "anyone"}}}); err != nil {
			t.Fatalf("a client with an x509 id: %v", err)
		}
		plain := rawSession(t, tg.plain)
		if err := getData(plain, "/enforced"); !errors.Is(err, jute.CodeSessionClosedRequireSASLAuth) {
			t.Errorf("a plain client's read with enforce.auth.schemes=x509 = %v; want %v", err, jute.CodeSessionClosedRequireSASLAuth)
		}
	})
}

// serverTLS is a zkd server's TLS configuration over the PEM stores of props(nil).
func (p *pki) serverTLS(t *testing.T) *tls.Config {
	t.Helper()
	set, err := tlsconf.Parse(p.props(nil), "ssl.")
	if err != nil {
		t.Fatal(err)
	}
	src, err := tlsconf.New(set, nil)
	if err != nil {
		t.Fatal(err)
	}
	return src.ServerConfig()
}
