package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// saslCfg parses a zoo.cfg made of the required keys plus extra, and applies its SASL keys.
func saslCfg(t *testing.T, extra string, jaasFlag string) (settings, error) {
	t.Helper()
	text := "dataDir=" + t.TempDir() + "\nclientPort=2181\n" + extra
	st, err := parseZooCfg(strings.NewReader(text), slog.New(slog.DiscardHandler))
	if err != nil {
		return st, err
	}
	return st, st.sasl.apply(&st.cfg, jaasFlag)
}

func TestZooCfgSASLKeys(t *testing.T) {
	dir := t.TempDir()
	jaas := filepath.Join(dir, "jaas.conf")
	if err := os.WriteFile(jaas, []byte(serverJAASText+"Other {\n x.DigestLoginModule required user_carol=\"c\";\n};\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := saslCfg(t, "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n"+
		"authProvider.2=org.apache.zookeeper.server.auth.DigestAuthenticationProvider\n"+
		"zookeeper.superUser=admin\nsuperUser.2=bob\n"+
		"java.security.auth.login.config="+jaas+"\n"+
		"kerberos.removeRealmFromPrincipal=true\n"+
		"zookeeper.sessionRequireClientSASLAuth=true\nenforce.auth.enabled=true\nenforce.auth.schemes=digest\n", "")
	if err != nil {
		t.Fatal(err)
	}
	c := st.cfg
	if c.SASL == nil || c.SASL.Users["bob"] != "bob-secret" || !c.SASL.RemoveRealmFromPrincipal || !c.SASLACL {
		t.Errorf("SASL = %+v, SASLACL = %v", c.SASL, c.SASLACL)
	}
	if !slices.Equal(c.SASLSuperUsers, []string{"admin", "bob"}) {
		t.Errorf("SASLSuperUsers = %q", c.SASLSuperUsers)
	}
	if !slices.Equal(c.EnforceAuthSchemes, []string{"sasl"}) {
		t.Errorf("EnforceAuthSchemes = %q; sessionRequireClientSASLAuth means sasl alone", c.EnforceAuthSchemes)
	}
	if err := c.Validate(); err != nil {
		t.Error(err)
	}

	// Another section by zookeeper.sasl.serverconfig; the -jaas flag names the file.
	st, err = saslCfg(t, "zookeeper.sasl.serverconfig=Other\nenforce.auth.enabled=true\nenforce.auth.schemes=ip, digest\n", jaas)
	if err != nil {
		t.Fatal(err)
	}
	if st.cfg.SASL == nil || st.cfg.SASL.Users["carol"] != "c" || len(st.cfg.SASL.Users) != 1 {
		t.Errorf("section Other: %+v", st.cfg.SASL)
	}
	if !slices.Equal(st.cfg.EnforceAuthSchemes, []string{"ip", "digest"}) {
		t.Errorf("EnforceAuthSchemes = %q", st.cfg.EnforceAuthSchemes)
	}

	for _, bad := range []struct{ cfg, want string }{
		{"sessionRequireClientSASLAuth=yes\n", "must be true or false"},
		{"enforce.auth.enabled=true\n", "names no scheme"},
		{"sessionRequireClientSASLAuth=true\n", "authProvider"},
		{"enforce.auth.enabled=true\nenforce.auth.schemes=sasl\n", "authProvider"},
		{"authProvider.1=com.example.MyProvider\n", "does not implement"},
		{"zkd.jaasConfig=" + filepath.Join(dir, "missing") + "\n", "no such file"},
		{"zkd.jaasConfig=" + jaas + "\nsasl.serverconfig=Nope\n", "no such JAAS section"},
		{"sasl.serverconfig=Server\n", "no JAAS file"},
		{"kerberos.removeHostFromPrincipal=1\n", "must be true or false"},
		{"zookeeper.security.auth_to_local=RULE:[1:$1]\n", "only the DEFAULT rule"},
	} {
		if _, err := saslCfg(t, bad.cfg, ""); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("zoo.cfg %q: err = %v; want one saying %q", bad.cfg, err, bad.want)
		}
	}
}

// The -jaas flag names the JAAS file; a file without the section stops startup.
func TestJAASFlagStopsStartupOnABadFile(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "zoo.cfg")
	jaas := filepath.Join(dir, "jaas.conf")
	if err := os.WriteFile(cfg, []byte("dataDir="+dir+"\nclientPort=2181\nadmin.enableServer=false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(jaas, []byte("Client { x.DigestLoginModule required username=\"a\"; };\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if code := run([]string{"-config", cfg, "-jaas", jaas}, &out, &out); code != 1 || !strings.Contains(out.String(), `\"Server\"`) {
		t.Errorf("-jaas with no Server section: exit %d, output %q; want exit 1 naming the section", code, out.String())
	}
}
