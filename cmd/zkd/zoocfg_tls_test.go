package main

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zkd-io/zkd/conformance"
	"github.com/zkd-io/zkd/internal/testkit"
	"github.com/zkd-io/zkd/internal/testkit/tlstest"
	"github.com/zkd-io/zkd/internal/tlsconf"
	"github.com/zkd-io/zkd/jute"
)

// tlsFiles writes a CA, the server's PEM key store and a client's PEM key store into dir.
func tlsFiles(t *testing.T, dir string) (clientKey string) {
	t.Helper()
	ca := tlstest.NewCA(t, "zkd test CA")
	ca.Issue(t, tlstest.Localhost("zkd")).WritePEM(t, filepath.Join(dir, "server.pem"))
	ca.WritePEM(t, filepath.Join(dir, "ca.pem"))
	ca.Issue(t, tlstest.Options{Subject: pkix.Name{CommonName: "admin", Organization: []string{"ops"}}}).
		WritePEM(t, filepath.Join(dir, "client.pem"))
	return filepath.Join(dir, "client.pem")
}

func TestParseZooCfgClientTLS(t *testing.T) {
	dir := t.TempDir()
	tlsFiles(t, dir)
	log := slog.New(slog.DiscardHandler)
	base := "dataDir=" + dir + "\n" +
		"zookeeper.ssl.keyStore.location=" + filepath.Join(dir, "server.pem") + "\n" + // the system property spelling
		"ssl.trustStore.location=" + filepath.Join(dir, "ca.pem") + "\n"

	// secureClientPort instead of clientPort: TLS only, on all interfaces unless given.
	st, err := parseZooCfg(strings.NewReader(base+
		"secureClientPort=2281\nserverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n"+
		"authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider\nssl.authProvider=x509\n"+
		"X509AuthenticationProvider.superUser=CN=admin,O=ops\nssl.clientAuth=want\nclient.certReload=true\n"), log)
	if err != nil {
		t.Fatal(err)
	}
	c := st.cfg
	if c.TLS == nil || c.SecureAddr != ":2281" || !c.NoPlainListener || c.Addr != "" || c.PortUnification ||
		c.X509SuperUser != "CN=admin,O=ops" || st.clientTLS.source == nil ||
		st.clientTLS.source.Settings().ClientAuth != tlsconf.ClientAuthWant {
		t.Fatalf("secure only: %+v", c)
	}

	// Both ports, and port unification on the plain one.
	st, err = parseZooCfg(strings.NewReader(base+"clientPort=2181\nsecureClientPort=2281\nsecureClientPortAddress=127.0.0.1\nclient.portUnification=true\n"), log)
	if err != nil {
		t.Fatal(err)
	}
	if c := st.cfg; c.Addr != ":2181" || c.SecureAddr != "127.0.0.1:2281" || c.NoPlainListener || !c.PortUnification || c.TLS == nil {
		t.Fatalf("both ports: %+v", c)
	}

	// ssl.* keys without a TLS port leave TLS off.
	st, err = parseZooCfg(strings.NewReader(base+"clientPort=2181\n"), log)
	if err != nil || st.cfg.TLS != nil {
		t.Fatalf("no TLS port: %v, TLS %v", err, st.cfg.TLS)
	}

	for _, tt := range []struct{ extra, want string }{
		{"secureClientPort=2281\nssl.keyStore.location=" + filepath.Join(dir, "nope.pem"), "ssl.keyStore.location"},
		{"secureClientPort=2281\nssl.keyStore.type=BCFKS", "ssl.keyStore.type"},
		{"secureClientPort=2281\nssl.ciphersuites=TLS_NOT_A_CIPHER", "ssl.ciphersuites"},
		{"secureClientPort=2281\nssl.clientAuth=sometimes", "ssl.clientAuth"},
		{"secureClientPort=2281\nssl.authProvider=custom", "ssl.authProvider"},
		{"secureClientPort=2281\nserverCnxnFactory=com.example.Factory", "serverCnxnFactory"},
		{"secureClientPort=2281\nssl.crl=true", "ssl.crl"},
		{"secureClientPort=2281\nssl.ocsp=true", "ssl.ocsp"},
		{"secureClientPort=2281\nssl.context.supplier.class=com.example.Supplier", "ssl.context.supplier.class"},
		{"secureClientPort=nope", "secureClientPort"},
		{"client.portUnification=maybe", "client.portUnification"},
	} {
		_, err := parseZooCfg(strings.NewReader(base+"clientPort=2181\n"+tt.extra+"\n"), log)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %v; want one naming %s", tt.extra, err, tt.want)
		}
	}
	if _, err := parseZooCfg(strings.NewReader("dataDir="+dir+"\nsecureClientPort=2281\n"), log); err == nil ||
		!strings.Contains(err.Error(), "ssl.keyStore.location") {
		t.Errorf("secureClientPort without a key store: %v; want an error naming ssl.keyStore.location", err)
	}
}

// The binary with secureClientPort and no clientPort serves TLS clients only, says so in its
// startup log, and gives a client certificate's x509 id its super user rights.
func TestBinaryServesTLS(t *testing.T) {
	dir := t.TempDir()
	clientKey := tlsFiles(t, dir)
	addr := freePort(t)
	cfg := filepath.Join(dir, "zoo.cfg")
	text := "dataDir=" + filepath.Join(dir, "data") + "\nsecureClientPort=" + portOf(t, addr) +
		"\nsecureClientPortAddress=127.0.0.1\nadmin.enableServer=false\n" +
		"ssl.keyStore.location=" + filepath.Join(dir, "server.pem") + "\nssl.trustStore.location=" + filepath.Join(dir, "ca.pem") +
		"\nX509AuthenticationProvider.superUser=CN=admin,O=ops\n"
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startZkd(t, "-config", cfg)
	set, err := tlsconf.Parse(map[string]string{"ssl.keyStore.location": clientKey, "ssl.trustStore.location": filepath.Join(dir, "ca.pem")}, "ssl.")
	if err != nil {
		t.Fatal(err)
	}
	src, err := tlsconf.New(set, nil)
	if err != nil {
		t.Fatal(err)
	}
	var r *conformance.Raw
	if err := error(nil); !testkit.Until(30*time.Second, func() bool {
		var tc *tls.Conn
		if tc, err = tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, src.ClientConfig("127.0.0.1")); err != nil {
			return false
		}
		r = conformance.NewRaw(tc, 10*time.Second)
		if err = r.NewSession(10000); err != nil {
			_ = r.Close()
			return false
		}
		return true
	}) {
		t.Fatalf("no TLS session with zkd on %s: %v\n%s", addr, err, p.out.String())
	}
	defer r.Close()
	var who jute.WhoAmIResponse
	if _, err := r.Do(jute.OpWhoAmI, nil, &who); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, ci := range who.ClientInfo {
		ids = append(ids, ci.AuthScheme+":"+ci.User)
	}
	if got := strings.Join(ids, " "); !strings.Contains(got, "super:") || !strings.Contains(got, "x509:CN=admin,O=ops") {
		t.Errorf("ids %q; want super and x509:CN=admin,O=ops", got)
	}
	out := p.out.String()
	if !strings.Contains(out, "serving clients over TLS") || !strings.Contains(out, "clientTLS=\"no plain port\"") {
		t.Errorf("the startup log does not say which ports are secure:\n%s", out)
	}
}

// enforce.auth.schemes=x509 needs TLS: with a secure port the configuration is valid, without
// one it is refused as ZooKeeper refuses a scheme with no provider.
func TestEnforceX509NeedsTLS(t *testing.T) {
	dir := t.TempDir()
	tlsFiles(t, dir)
	enforce := "dataDir=" + dir + "\nclientPort=2181\nenforce.auth.enabled=true\nenforce.auth.schemes=x509\n"
	withTLS := enforce + "secureClientPort=2281\nssl.keyStore.location=" + filepath.Join(dir, "server.pem") +
		"\nssl.trustStore.location=" + filepath.Join(dir, "ca.pem") + "\n"
	for text, ok := range map[string]bool{withTLS: true, enforce: false} {
		st, err := parseZooCfg(strings.NewReader(text), slog.New(slog.DiscardHandler))
		if err == nil {
			err = st.sasl.apply(&st.cfg, "")
		}
		if err == nil {
			err = st.cfg.Validate()
		}
		if (err == nil) != ok {
			t.Errorf("enforce x509, TLS %v: %v", ok, err)
		}
	}
}
