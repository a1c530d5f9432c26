package tlsconf_test

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/asn1"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkd-io/zkd/internal/testkit/tlstest"
	"github.com/zkd-io/zkd/internal/tlsconf"
)

// stores writes the server's key store and the CA's trust store in the given format and
// returns the ssl.* properties naming them.
func stores(t *testing.T, dir, format string, srv *tlstest.Leaf) map[string]string {
	t.Helper()
	const pw = "s3cret"
	props := map[string]string{}
	switch format {
	case "PEM":
		srv.WritePEM(t, filepath.Join(dir, "key.pem"))
		srv.CA.WritePEM(t, filepath.Join(dir, "trust.pem"))
		props["ssl.keyStore.location"] = filepath.Join(dir, "key.pem")
		props["ssl.trustStore.location"] = filepath.Join(dir, "trust.pem")
	case "PKCS12":
		srv.WritePKCS12(t, filepath.Join(dir, "key.p12"), pw)
		srv.CA.WritePKCS12(t, filepath.Join(dir, "trust.p12"), pw)
		props["ssl.keyStore.location"] = filepath.Join(dir, "key.p12")
		props["ssl.trustStore.location"] = filepath.Join(dir, "trust.p12")
	case "JKS":
		srv.WriteJKS(t, filepath.Join(dir, "key.jks"), pw)
		srv.CA.WriteJKS(t, filepath.Join(dir, "trust.jks"), pw)
		props["ssl.keyStore.location"] = filepath.Join(dir, "key.jks")
		props["ssl.trustStore.location"] = filepath.Join(dir, "trust.jks")
	}
	if format != "PEM" {
		props["ssl.keyStore.password"] = pw
		props["ssl.trustStore.password"] = pw
	}
	return props
}

func source(t *testing.T, props map[string]string, prefix string) *tlsconf.Source {
	t.Helper()
	set, err := tlsconf.Parse(props, prefix)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	src, err := tlsconf.New(set, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = src.Close() })
	return src
}

// handshake runs a TLS handshake over a real loopback connection between the two configs and
// returns the server's view of it.
func handshake(t *testing.T, server, client *tls.Config) (tls.ConnectionState, error, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type result struct {
		cs  tls.ConnectionState
		err error
	}
	done := make(chan result, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer nc.Close()
		tc := tls.Server(nc, server)
		_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
		err = tc.Handshake()
		if err != nil {
			err = fmt.Errorf("handshake: %w", err)
		}
		if err == nil {
			// Wait for the client's check of our certificate (TLS 1.3 finishes the client
			// side first): a rejected server sees the alert on its next read.
			var n int
			n, err = tc.Read(make([]byte, 1))
			if n == 1 {
				err = nil // the byte may come with the close_notify that follows it
			} else if err != nil {
				err = fmt.Errorf("read after handshake: %w", err)
			}
		}
		done <- result{tc.ConnectionState(), err}
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	tc := tls.Client(nc, client)
	_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
	cerr := tc.Handshake()
	if cerr == nil {
		_, cerr = tc.Write([]byte{1})
	}
	_ = tc.Close()
	r := <-done
	return r.cs, r.err, cerr
}

func TestStoresOfEachType(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	srv := ca.Issue(t, tlstest.Localhost("server"))
	cli := ca.Issue(t, tlstest.Options{Subject: pkix.Name{CommonName: "client", Organization: []string{"Acme, Inc."}}})
	for _, format := range []string{"PEM", "PKCS12", "JKS"} {
		t.Run(format, func(t *testing.T) {
			dir := t.TempDir()
			server := source(t, stores(t, dir, format, srv), "ssl.")
			cdir := t.TempDir()
			client := source(t, stores(t, cdir, format, cli), "ssl.")
			cs, serr, cerr := handshake(t, server.ServerConfig(), client.ClientConfig("localhost"))
			if serr != nil || cerr != nil {
				t.Fatalf("handshake: server %v, client %v", serr, cerr)
			}
			if len(cs.VerifiedChains) == 0 {
				t.Fatal("the server verified no client chain with clientAuth need")
			}
			dn, err := tlsconf.SubjectDN(cs.PeerCertificates[0])
			if want := `CN=client,O=Acme\, Inc.`; err != nil || dn != want {
				t.Fatalf("SubjectDN = %q, %v; want %q", dn, err, want)
			}
		})
	}
}

func TestTypeFromExtensionAndExplicit(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	srv := ca.Issue(t, tlstest.Localhost("server"))
	dir := t.TempDir()
	srv.WritePKCS12(t, filepath.Join(dir, "store.bin"), "pw")
	props := map[string]string{"ssl.keyStore.location": filepath.Join(dir, "store.bin"), "ssl.keyStore.password": "pw"}
	set, err := tlsconf.Parse(props, "ssl.")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tlsconf.New(set, nil); err == nil || !strings.Contains(err.Error(), "ssl.keyStore.location") {
		t.Fatalf("New with an unguessable store type = %v; want an error naming ssl.keyStore.location", err)
	}
	props["zookeeper.ssl.keyStore.type"] = "pkcs12" // the system property spelling, any case
	source(t, props, "ssl.")
}

func TestBadStores(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	srv := ca.Issue(t, tlstest.Localhost("server"))
	dir := t.TempDir()
	srv.WritePKCS12(t, filepath.Join(dir, "key.p12"), "right")
	srv.WriteJKS(t, filepath.Join(dir, "key.jks"), "right")
	srv.CA.WritePKCS12(t, filepath.Join(dir, "trust.p12"), "right")
	if err := os.WriteFile(filepath.Join(dir, "junk.pem"), []byte("not a store"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		props map[string]string
		want  []string // substrings of the error
	}{
		{"missing file", map[string]string{"ssl.keyStore.location": filepath.Join(dir, "nope.pem")}, []string{"ssl.keyStore.location", "no such file"}},
		{"wrong PKCS12 password", map[string]string{"ssl.keyStore.location": filepath.Join(dir, "key.p12"), "ssl.keyStore.password": "wrong"}, []string{"ssl.keyStore.password"}},
		{"wrong JKS password", map[string]string{"ssl.keyStore.location": filepath.Join(dir, "key.jks"), "ssl.keyStore.password": "wrong"}, []string{"ssl.keyStore.password"}},
		{"wrong trust store password", map[string]string{"ssl.trustStore.location": filepath.Join(dir, "trust.p12"), "ssl.trustStore.password": "wrong"}, []string{"ssl.trustStore.password"}},
		{"PEM without a key", map[string]string{"ssl.keyStore.location": filepath.Join(dir, "junk.pem")}, []string{"ssl.keyStore.location", "no private key"}},
		{"PEM trust store without certificates", map[string]string{"ssl.trustStore.location": filepath.Join(dir, "junk.pem")}, []string{"ssl.trustStore.location", "no certificate"}},
	} {
		set, err := tlsconf.Parse(tt.props, "ssl.")
		if err == nil {
			_, err = tlsconf.New(set, nil)
		}
		if err == nil {
			t.Errorf("%s: no error", tt.name)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", tt.name, err, w)
			}
		}
	}
}

func TestParse(t *testing.T) {
	set, err := tlsconf.Parse(map[string]string{
		"ssl.clientAuth":               "WANT",
		"ssl.enabledProtocols":         "TLSv1.2",
		"ssl.ciphersuites":             "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
		"ssl.hostnameVerification":     "false",
		"ssl.quorum.keyStore.location": "/ignored/for/the/client/prefix",
		"ssl.crl":                      "false",
	}, "ssl.")
	if err != nil {
		t.Fatal(err)
	}
	if set.ClientAuth != tlsconf.ClientAuthWant || set.MinVersion != tls.VersionTLS12 || set.MaxVersion != tls.VersionTLS12 ||
		set.HostnameVerification || set.KeyStore.Location != "" {
		t.Fatalf("Parse = %+v", set)
	}
	want := []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384}
	if len(set.CipherSuites) != 2 || set.CipherSuites[0] != want[0] || set.CipherSuites[1] != want[1] {
		t.Fatalf("CipherSuites = %v; want %v", set.CipherSuites, want)
	}
	def, err := tlsconf.Parse(nil, "ssl.quorum.")
	if err != nil {
		t.Fatal(err)
	}
	if def.ClientAuth != tlsconf.ClientAuthNeed || def.MinVersion != tls.VersionTLS12 || def.MaxVersion != tls.VersionTLS13 ||
		!def.HostnameVerification || !def.ClientHostnameVerification || def.CipherSuites != nil {
		t.Fatalf("defaults = %+v", def)
	}
	for _, bad := range []map[string]string{
		{"ssl.ciphersuites": "TLS_NO_SUCH_CIPHER"},
		{"ssl.ciphersuites": "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384"}, // Java has it, Go does not
		{"ssl.clientAuth": "maybe"},
		{"ssl.protocol": "SSLv3"},
		{"ssl.enabledProtocols": "TLSv1.2,TLSv9"},
		{"ssl.crl": "true"},
		{"ssl.ocsp": "true"},
		{"ssl.keyStore.type": "BCFKS"},
		{"ssl.hostnameVerification": "perhaps"},
		{"ssl.noSuchKey": "x"},
	} {
		if _, err := tlsconf.Parse(bad, "ssl."); err == nil {
			t.Errorf("Parse(%v) succeeded; want an error", bad)
		} else {
			for k := range bad {
				if !strings.Contains(err.Error(), k) {
					t.Errorf("Parse(%v) = %q; want the key named", bad, err)
				}
			}
		}
	}
}

func TestCipherSuitesLimitTLS12(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	srv := ca.Issue(t, tlstest.Localhost("server"))
	dir := t.TempDir()
	props := stores(t, dir, "PEM", srv)
	props["ssl.clientAuth"] = "none"
	props["ssl.protocol"] = "TLSv1.2"
	props["ssl.ciphersuites"] = "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"
	server := source(t, props, "ssl.")
	client := source(t, map[string]string{"ssl.trustStore.location": props["ssl.trustStore.location"]}, "ssl.")
	cs, serr, cerr := handshake(t, server.ServerConfig(), client.ClientConfig("localhost"))
	if serr != nil || cerr != nil {
		t.Fatalf("handshake: %v, %v", serr, cerr)
	}
	if cs.Version != tls.VersionTLS12 || cs.CipherSuite != tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 {
		t.Fatalf("negotiated version %x suite %s", cs.Version, tls.CipherSuiteName(cs.CipherSuite))
	}
	other := client.ClientConfig("localhost")
	other.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}
	if _, serr, cerr := handshake(t, server.ServerConfig(), other); serr == nil && cerr == nil {
		t.Fatal("a client offering only other cipher suites was served")
	}
}

func TestClientVerification(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	srv := ca.Issue(t, tlstest.Localhost("server"))
	dir := t.TempDir()
	props := stores(t, dir, "PEM", srv)
	server := source(t, props, "ssl.")
	// A client of another CA, and an expired one of the right CA.
	stranger := tlstest.NewCA(t, "other CA").Issue(t, tlstest.Options{Subject: pkix.Name{CommonName: "stranger"}})
	expired := ca.Issue(t, tlstest.Options{Subject: pkix.Name{CommonName: "old"},
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})
	for name, leaf := range map[string]*tlstest.Leaf{"unknown CA": stranger, "expired": expired} {
		cdir := t.TempDir()
		leaf.WritePEM(t, filepath.Join(cdir, "key.pem"))
		client := source(t, map[string]string{"ssl.keyStore.location": filepath.Join(cdir, "key.pem"),
			"ssl.trustStore.location": props["ssl.trustStore.location"]}, "ssl.")
		if _, serr, _ := handshake(t, server.ServerConfig(), client.ClientConfig("localhost")); serr == nil {
			t.Errorf("%s client certificate accepted", name)
		}
	}
	// No certificate: refused with need, served with want and none.
	anon := source(t, map[string]string{"ssl.trustStore.location": props["ssl.trustStore.location"]}, "ssl.")
	for auth, ok := range map[string]bool{"need": false, "want": true, "none": true} {
		p := stores(t, t.TempDir(), "PEM", srv)
		p["ssl.clientAuth"] = auth
		s := source(t, p, "ssl.")
		_, serr, _ := handshake(t, s.ServerConfig(), anon.ClientConfig("localhost"))
		if (serr == nil) != ok {
			t.Errorf("clientAuth=%s, no client certificate: server error %v", auth, serr)
		}
	}
}

func TestServerVerification(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	dir := t.TempDir()
	wrong := ca.Issue(t, tlstest.Options{Subject: pkix.Name{CommonName: "wrong"}, DNSNames: []string{"wrong.example"}})
	props := stores(t, dir, "PEM", wrong)
	props["ssl.clientAuth"] = "none"
	server := source(t, props, "ssl.")
	check := source(t, map[string]string{"ssl.trustStore.location": props["ssl.trustStore.location"]}, "ssl.")
	if _, _, cerr := handshake(t, server.ServerConfig(), check.ClientConfig("localhost")); cerr == nil {
		t.Error("a client with hostname verification accepted a certificate for another name")
	}
	lax := source(t, map[string]string{"ssl.trustStore.location": props["ssl.trustStore.location"], "ssl.hostnameVerification": "false"}, "ssl.")
	if _, _, cerr := handshake(t, server.ServerConfig(), lax.ClientConfig("localhost")); cerr != nil {
		t.Errorf("without hostname verification: %v", cerr)
	}
	other := tlstest.NewCA(t, "other CA")
	other.WritePEM(t, filepath.Join(dir, "other.pem"))
	stranger := source(t, map[string]string{"ssl.trustStore.location": filepath.Join(dir, "other.pem"), "ssl.hostnameVerification": "false"}, "ssl.")
	if _, _, cerr := handshake(t, server.ServerConfig(), stranger.ClientConfig("localhost")); cerr == nil {
		t.Error("a client trusting another CA accepted the server")
	}
}

// fakeClock is a Source's clock that only the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

// useFakeClock makes s measure its reload interval on a fake clock, starting at the real time
// (when s made its first check).
func useFakeClock(s *tlsconf.Source) *fakeClock {
	c := &fakeClock{now: time.Now()}
	tlsconf.UseClock(s, func() time.Time {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.now
	})
	return c
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestReload(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	dir := t.TempDir()
	first := ca.Issue(t, tlstest.Localhost("first"))
	props := stores(t, dir, "PEM", first)
	props["ssl.clientAuth"] = "none"
	set, err := tlsconf.Parse(props, "ssl.")
	if err != nil {
		t.Fatal(err)
	}
	set.ReloadInterval = time.Minute // on the fake clock: the test moves it past the interval
	server, err := tlsconf.New(set, nil)
	if err != nil {
		t.Fatal(err)
	}
	clock := useFakeClock(server)
	client := source(t, map[string]string{"ssl.trustStore.location": props["ssl.trustStore.location"]}, "ssl.")
	seen := func() string {
		t.Helper()
		var cn string
		cfg := client.ClientConfig("localhost")
		verify := cfg.VerifyConnection
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			cn = cs.PeerCertificates[0].Subject.CommonName
			return verify(cs)
		}
		if _, serr, cerr := handshake(t, server.ServerConfig(), cfg); serr != nil || cerr != nil {
			t.Fatalf("handshake: %v, %v", serr, cerr)
		}
		return cn
	}
	if cn := seen(); cn != "first" {
		t.Fatalf("served %q; want first", cn)
	}
	// A broken file keeps the old certificate.
	if err := os.WriteFile(props["ssl.keyStore.location"], []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	clock.advance(set.ReloadInterval) // the reload interval, which is the thing under test
	if cn := seen(); cn != "first" {
		t.Fatalf("after a broken write, served %q; want first", cn)
	}
	ca.Issue(t, tlstest.Localhost("second")).WritePEM(t, props["ssl.keyStore.location"])
	clock.advance(set.ReloadInterval - time.Nanosecond)
	if cn := seen(); cn != "first" {
		t.Fatalf("before the reload interval passed, served %q; want first", cn)
	}
	clock.advance(time.Nanosecond)
	if cn := seen(); cn != "second" {
		t.Fatalf("after replacing the key store, served %q; want second", cn)
	}
}

// TestSubjectDN checks the formatting of names against what Java's X500Principal.getName()
// prints for them (the values below were printed by ZooKeeper 3.8 on Java 17 as x509 ids).
func TestSubjectDN(t *testing.T) {
	oid := func(s ...int) asn1.ObjectIdentifier { return asn1.ObjectIdentifier(s) }
	cn, ou, l, o, c, email := oid(2, 5, 4, 3), oid(2, 5, 4, 11), oid(2, 5, 4, 7), oid(2, 5, 4, 10), oid(2, 5, 4, 6), oid(1, 2, 840, 113549, 1, 9, 1)
	av := func(t asn1.ObjectIdentifier, v string) pkix.AttributeTypeAndValue {
		return pkix.AttributeTypeAndValue{Type: t, Value: v}
	}
	for _, tt := range []struct {
		name pkix.RDNSequence
		want string
	}{
		{pkix.RDNSequence{{av(c, "US")}, {av(o, "Acme, Inc.")}, {av(ou, "Eng"), av(l, "Here")}, {av(cn, "client one")}},
			`CN=client one,OU=Eng+L=Here,O=Acme\, Inc.,C=US`},
		{pkix.RDNSequence{{av(cn, " a=b;c+d<e>f#g\"h\\i ")}}, `CN=\ a\=b\;c\+d\<e\>f\#g\"h\\i\ `},
		{pkix.RDNSequence{{av(cn, "x")}, {av(email, "a@b")}}, `1.2.840.113549.1.9.1=#0c03614062,CN=x`},
		{pkix.RDNSequence{}, ``},
	} {
		der, err := asn1.Marshal(tt.name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tlsconf.FormatDN(der)
		if err != nil || got != tt.want {
			t.Errorf("FormatDN(%v) = %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
}

// TestSystemRootsWithoutTrustStore checks that a client without a trust store trusts the
// system's roots only.
func TestSystemRootsWithoutTrustStore(t *testing.T) {
	set, err := tlsconf.Parse(map[string]string{}, "ssl.")
	if err != nil {
		t.Fatal(err)
	}
	src, err := tlsconf.New(set, nil)
	if err != nil {
		t.Fatal(err)
	}
	if src.Certificate() != nil {
		t.Fatal("a source without a key store has a certificate")
	}
	ca := tlstest.NewCA(t, "test CA")
	srv := ca.Issue(t, tlstest.Localhost("server"))
	props := stores(t, t.TempDir(), "PEM", srv)
	props["ssl.clientAuth"] = "none"
	server := source(t, props, "ssl.")
	// The test CA is not among the system's roots.
	if _, _, cerr := handshake(t, server.ServerConfig(), src.ClientConfig("localhost")); cerr == nil {
		t.Fatal("a client with the system's roots trusted a test CA")
	}
}

// TestClientHostnameVerification checks the quorum-style check of a client's certificate
// against the address it connects from (ssl.quorum.hostnameVerification, or
// ssl.clientHostnameVerification on the client port).
func TestClientHostnameVerification(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	srv := ca.Issue(t, tlstest.Localhost("server"))
	dir := t.TempDir()
	srv.WritePEM(t, filepath.Join(dir, "key.pem"))
	ca.WritePEM(t, filepath.Join(dir, "trust.pem"))
	props := map[string]string{
		"ssl.quorum.keyStore.location":   filepath.Join(dir, "key.pem"),
		"ssl.quorum.trustStore.location": filepath.Join(dir, "trust.pem"),
	}
	server := source(t, props, "ssl.quorum.")
	named := ca.Issue(t, tlstest.Options{Subject: pkix.Name{CommonName: "peer"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	elsewhere := ca.Issue(t, tlstest.Options{Subject: pkix.Name{CommonName: "peer"}, DNSNames: []string{"elsewhere.example"}})
	for name, tt := range map[string]struct {
		leaf *tlstest.Leaf
		ok   bool
	}{"naming 127.0.0.1": {named, true}, "naming elsewhere.example": {elsewhere, false}} {
		cdir := t.TempDir()
		tt.leaf.WritePEM(t, filepath.Join(cdir, "key.pem"))
		client := source(t, map[string]string{"ssl.quorum.keyStore.location": filepath.Join(cdir, "key.pem"),
			"ssl.quorum.trustStore.location": filepath.Join(dir, "trust.pem")}, "ssl.quorum.")
		_, serr, _ := handshake(t, server.ServerConfig(), client.ClientConfig("localhost"))
		if (serr == nil) != tt.ok {
			t.Errorf("client certificate %s: server error %v", name, serr)
		}
	}
	// The client port checks no client names unless asked to.
	p := map[string]string{"ssl.keyStore.location": props["ssl.quorum.keyStore.location"], "ssl.trustStore.location": props["ssl.quorum.trustStore.location"]}
	if set, err := tlsconf.Parse(p, "ssl."); err != nil || set.ClientHostnameVerification {
		t.Errorf("ssl. prefix: ClientHostnameVerification %v, %v; want false", set.ClientHostnameVerification, err)
	}
	p["ssl.clientHostnameVerification"] = "true"
	if set, err := tlsconf.Parse(p, "ssl."); err != nil || !set.ClientHostnameVerification {
		t.Errorf("ssl.clientHostnameVerification=true: %v, %v", set.ClientHostnameVerification, err)
	}
}

// TestReloadTrustStore rotates the CA a server trusts: clients of the new CA are served from the
// next handshake on, clients of the old one no longer.
func TestReloadTrustStore(t *testing.T) {
	oldCA, newCA := tlstest.NewCA(t, "old CA"), tlstest.NewCA(t, "new CA")
	dir := t.TempDir()
	oldCA.Issue(t, tlstest.Localhost("server")).WritePEM(t, filepath.Join(dir, "key.pem"))
	oldCA.WritePEM(t, filepath.Join(dir, "trust.pem"))
	set, err := tlsconf.Parse(map[string]string{"ssl.keyStore.location": filepath.Join(dir, "key.pem"),
		"ssl.trustStore.location": filepath.Join(dir, "trust.pem"), "ssl.hostnameVerification": "false"}, "ssl.")
	if err != nil {
		t.Fatal(err)
	}
	set.ReloadInterval = time.Minute // on the fake clock: the test moves it past the interval
	server, err := tlsconf.New(set, nil)
	if err != nil {
		t.Fatal(err)
	}
	clock := useFakeClock(server)
	client := func(ca *tlstest.CA) *tls.Config {
		cdir := t.TempDir()
		ca.Issue(t, tlstest.Options{Subject: pkix.Name{CommonName: "client"}}).WritePEM(t, filepath.Join(cdir, "key.pem"))
		oldCA.WritePEM(t, filepath.Join(cdir, "trust.pem")) // the server keeps its old certificate
		return source(t, map[string]string{"ssl.keyStore.location": filepath.Join(cdir, "key.pem"),
			"ssl.trustStore.location": filepath.Join(cdir, "trust.pem")}, "ssl.").ClientConfig("localhost")
	}
	oldClient, newClient := client(oldCA), client(newCA)
	if _, serr, _ := handshake(t, server.ServerConfig(), newClient); serr == nil {
		t.Fatal("a client of the new CA was served before the trust store changed")
	}
	newCA.WritePEM(t, filepath.Join(dir, "trust.pem"))
	clock.advance(set.ReloadInterval) // the reload interval, which is the thing under test
	if _, serr, _ := handshake(t, server.ServerConfig(), newClient); serr != nil {
		t.Fatalf("a client of the new CA after the trust store changed: %v", serr)
	}
	if _, serr, _ := handshake(t, server.ServerConfig(), oldClient); serr == nil {
		t.Fatal("a client of the old CA was still served after the trust store changed")
	}
}

func TestProtocolsAndPasswordPath(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	dir := t.TempDir()
	ca.Issue(t, tlstest.Localhost("server")).WritePKCS12(t, filepath.Join(dir, "key.p12"), "from a file")
	ca.WritePEM(t, filepath.Join(dir, "trust.pem"))
	if err := os.WriteFile(filepath.Join(dir, "pass"), []byte("from a file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	server := source(t, map[string]string{
		"ssl.keyStore.location": filepath.Join(dir, "key.p12"), "ssl.keyStore.passwordPath": filepath.Join(dir, "pass"),
		"ssl.clientAuth": "none", "ssl.enabledProtocols": "TLSv1.3",
	}, "ssl.")
	client := source(t, map[string]string{"ssl.trustStore.location": filepath.Join(dir, "trust.pem")}, "ssl.")
	cs, serr, cerr := handshake(t, server.ServerConfig(), client.ClientConfig("localhost"))
	if serr != nil || cerr != nil || cs.Version != tls.VersionTLS13 {
		t.Fatalf("TLS 1.3 client: version %x, %v, %v", cs.Version, serr, cerr)
	}
	old := client.ClientConfig("localhost")
	old.MaxVersion = tls.VersionTLS12
	if _, serr, _ := handshake(t, server.ServerConfig(), old); serr == nil {
		t.Fatal("enabledProtocols=TLSv1.3 served a TLS 1.2 client")
	}
}
