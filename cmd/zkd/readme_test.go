package main

import (
	"encoding/pem"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/zkd-io/zkd/internal/testkit/tlstest"
)

// The zoo.cfg examples in the README's Security section are valid: each, with its files made
// real, is accepted by the parser a server starts from.
func TestReadmeSecurityExamples(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	// The section runs from its heading (## or ###) to the next heading of either level.
	sec := string(readme)
	m := regexp.MustCompile("\n#{2,3} Security\n").FindStringIndex(sec)
	if m == nil {
		t.Fatal("README has no Security section")
	}
	sec = sec[m[1]:]
	if j := regexp.MustCompile("\n#{2,3} ").FindStringIndex(sec); j != nil {
		sec = sec[:j[0]]
	}
	blocks := regexp.MustCompile("(?s)```properties\n(.*?)```").FindAllStringSubmatch(sec, -1)
	if len(blocks) < 3 {
		t.Fatalf("found %d zoo.cfg examples in the Security section, want 3 (client TLS, SASL, quorum TLS)", len(blocks))
	}
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "readme CA")
	leaf := ca.Issue(t, tlstest.Localhost("zk1"))
	files := map[string]func(string){
		"/etc/zkd/server.p12": func(p string) { leaf.WritePKCS12(t, p, "changeit") },
		"/etc/zkd/member.pem": func(p string) { leaf.WritePEM(t, p) },
		"/etc/zkd/ca.pem": func(p string) {
			if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw}), 0o600); err != nil {
				t.Fatal(err)
			}
		},
		"/etc/zkd/jaas.conf": func(p string) {
			if err := os.WriteFile(p, []byte("Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required user_app=\"secret\";\n};\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		},
	}
	for n, b := range blocks {
		cfg := b[1]
		for name, make := range files {
			if strings.Contains(cfg, name) {
				p := filepath.Join(dir, filepath.Base(name))
				make(p)
				cfg = strings.ReplaceAll(cfg, name, p)
			}
		}
		data := filepath.Join(dir, "data")
		extra := "dataDir=" + data + "\nclientPort=2181\n"
		if strings.Contains(cfg, "sslQuorum") {
			if err := os.MkdirAll(data, 0o750); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(data, "myid"), []byte("1"), 0o600); err != nil {
				t.Fatal(err)
			}
			extra += "server.1=127.0.0.1:2888:3888\nserver.2=127.0.0.2:2888:3888\nserver.3=127.0.0.3:2888:3888\n"
		}
		st, err := parseZooCfg(strings.NewReader(extra+cfg), slog.New(slog.DiscardHandler))
		if err != nil {
			t.Errorf("README example %d does not parse: %v\n%s", n+1, err, b[1])
			continue
		}
		if err := st.sasl.apply(&st.cfg, ""); err != nil {
			t.Errorf("README example %d: %v", n+1, err)
		}
		if err := st.cfg.Validate(); err != nil {
			t.Errorf("README example %d: server configuration: %v", n+1, err)
		}
	}
}
