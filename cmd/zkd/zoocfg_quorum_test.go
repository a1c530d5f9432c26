package main

import (
	"crypto/tls"
	"encoding/pem"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zkd-io/zkd/internal/testkit/tlstest"
	"github.com/zkd-io/zkd/internal/testkit/zktest"
)

// quorumPEM writes a member's PEM key store (private key and certificate in one file, as
// ZooKeeper's PEM type reads it) for 127.0.0.1 and a PEM trust store (the CA) into dir.
func quorumPEM(t *testing.T, ca *zktest.CA, dir, name string) (keyStore, trustStore string) {
	t.Helper()
	return quorumPEMFor(t, ca, dir, zktest.CertSpec{CommonName: name, IPs: zktest.LoopbackIPs()})
}

// quorumPEMFor is quorumPEM for a certificate as spec says; the files are named after its
// common name.
func quorumPEMFor(t *testing.T, ca *zktest.CA, dir string, spec zktest.CertSpec) (keyStore, trustStore string) {
	t.Helper()
	cert := ca.Issue(t, spec)
	name := spec.CommonName
	keyStore, trustStore = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-ca.pem")
	if err := os.WriteFile(keyStore, append(append([]byte{}, cert.KeyPEM...), cert.CertPEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(trustStore, ca.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	return keyStore, trustStore
}

func TestParseZooCfgQuorumTLS(t *testing.T) {
	dir := t.TempDir()
	ks, ts := quorumPEM(t, zktest.NewCA(t, "zoo.cfg test CA"), dir, "member")
	// A PKCS12 key store and a PEM trust store, as many ZooKeeper ensembles keep them.
	ca12 := tlstest.NewCA(t, "PKCS12 test CA")
	p12, p12ca := filepath.Join(dir, "member.p12"), filepath.Join(dir, "p12-ca.pem")
	ca12.Issue(t, tlstest.Localhost("member")).WritePKCS12(t, p12, "pw")
	if err := os.WriteFile(p12ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca12.Cert.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	stores := "ssl.quorum.keyStore.location=" + ks + "\nssl.quorum.trustStore.location=" + ts + "\n"
	base := "dataDir=" + dir + "\nclientPort=2181\n"
	parse := func(t *testing.T, lines string) (settings, error) {
		t.Helper()
		return parseZooCfg(strings.NewReader(base+lines), slog.New(slog.DiscardHandler))
	}
	for _, tc := range []struct {
		name, lines                      string
		tls, accept, dialPlain, skipHost bool
	}{
		{name: "plaintext", lines: "sslQuorum=false\n" + stores},
		{name: "reload without TLS", lines: "sslQuorumReloadCertFiles=true\n"},
		{name: "sslQuorum", lines: "sslQuorum=true\n" + stores, tls: true},
		{name: "zookeeper. prefix", lines: "zookeeper.sslQuorum=true\n" + strings.ReplaceAll(stores, "ssl.", "zookeeper.ssl."), tls: true},
		{name: "rolling step 1", lines: "portUnification=true\n" + stores, tls: true, accept: true, dialPlain: true},
		{name: "rolling step 2", lines: "sslQuorum=true\nportUnification=true\n" + stores, tls: true, accept: true},
		{name: "protocol alone", lines: "sslQuorum=true\nssl.quorum.protocol=TLSv1.2\n" + stores, tls: true},
		{name: "no hostname verification", lines: "sslQuorum=true\nssl.quorum.hostnameVerification=false\n" + stores, tls: true, skipHost: true},
		{name: "quorum SASL off", lines: "quorum.auth.enableSasl=false\nquorum.auth.learnerRequireSasl=false\nquorum.auth.serverRequireSasl=false\n"},
		{name: "reload", lines: "sslQuorum=true\nsslQuorumReloadCertFiles=true\n" + stores, tls: true},
		{name: "PKCS12", lines: "sslQuorum=true\nssl.quorum.keyStore.location=" + p12 + "\nssl.quorum.keyStore.password=pw\nssl.quorum.trustStore.location=" + p12ca + "\n", tls: true},
		{name: "versions and suites", lines: "sslQuorum=true\nssl.quorum.enabledProtocols=TLSv1.3\nssl.quorum.ciphersuites=TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_AES_128_GCM_SHA256\nssl.quorum.clientAuth=need\n" + stores, tls: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := parse(t, tc.lines)
			if err != nil {
				t.Fatal(err)
			}
			pt := st.cfg.PeerTLS
			if (pt != nil) != tc.tls {
				t.Fatalf("PeerTLS = %+v; want set %v", pt, tc.tls)
			}
			if pt == nil {
				return
			}
			if pt.AcceptPlaintext != tc.accept || pt.DialPlaintext != tc.dialPlain || pt.SkipHostnameVerification != tc.skipHost {
				t.Errorf("PeerTLS accept=%v dialPlain=%v skipHost=%v; want %v %v %v",
					pt.AcceptPlaintext, pt.DialPlaintext, pt.SkipHostnameVerification, tc.accept, tc.dialPlain, tc.skipHost)
			}
			srv, err := pt.Server.GetConfigForClient(&tls.ClientHelloInfo{})
			if err != nil || len(srv.Certificates) != 1 || srv.ClientCAs == nil || pt.ClientFor == nil {
				t.Fatalf("stores not loaded: %+v %v", srv, err)
			}
			cli := pt.ClientFor("127.0.0.1")
			if cli.ServerName != "127.0.0.1" || cli.VerifyConnection == nil || cli.GetClientCertificate == nil {
				t.Errorf("client configuration for a member: %+v", cli)
			}
			if strings.Contains(tc.lines, "TLSv1.3") && pt.Server.MinVersion != tls.VersionTLS13 {
				t.Errorf("MinVersion = %#x; want TLS 1.3", pt.Server.MinVersion)
			}
			if strings.Contains(tc.lines, "protocol=TLSv1.2") && (cli.MinVersion != tls.VersionTLS12 || cli.MaxVersion != tls.VersionTLS12) {
				t.Errorf("versions = %#x..%#x; want TLS 1.2 only", cli.MinVersion, cli.MaxVersion)
			}
		})
	}
	for _, tc := range []struct{ name, lines, want string }{
		{"quorum SASL", "quorum.auth.enableSasl=true\n", "sslQuorum"},
		{"learner SASL", "quorum.auth.learnerRequireSasl=true\n", "quorum.auth.learnerRequireSasl"},
		{"server SASL", "quorum.auth.serverRequireSasl=true\n", "quorum.auth.serverRequireSasl"},
		{"no stores", "sslQuorum=true\n", "ssl.quorum.keyStore.location"},
		{"unreadable key store", "sslQuorum=true\nssl.quorum.keyStore.location=" + filepath.Join(dir, "none.pem") + "\nssl.quorum.trustStore.location=" + ts + "\n", "ssl.quorum.keyStore.location"},
		{"PEM read as PKCS12", "sslQuorum=true\nssl.quorum.keyStore.type=PKCS12\n" + stores, "ssl.quorum.keyStore"},
		{"missing JKS", "sslQuorum=true\nssl.quorum.keyStore.location=" + filepath.Join(dir, "k.jks") + "\nssl.quorum.trustStore.location=" + ts + "\n", "ssl.quorum.keyStore"},
		{"no trust store", "sslQuorum=true\nssl.quorum.keyStore.location=" + ks + "\n", "ssl.quorum.trustStore.location"},
		{"revocation", "sslQuorum=true\nssl.quorum.crl=true\n" + stores, "ssl.quorum.crl"},
		{"clientAuth want", "sslQuorum=true\nssl.quorum.clientAuth=want\n" + stores, "ssl.quorum.clientAuth"},
		{"unknown ssl.quorum key", "sslQuorum=true\nssl.quorum.someFutureKey=x\n" + stores, "ssl.quorum.someFutureKey"},
		{"bad bool", "sslQuorum=maybe\n", "sslQuorum"},
	} {
		if _, err := parse(t, tc.lines); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v; want an error naming %s", tc.name, err, tc.want)
		}
	}
}
