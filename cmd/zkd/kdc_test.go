package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/zkd-io/zkd/internal/testkit"
	"github.com/zkd-io/zkd/internal/testkit/apachezk"
	"github.com/zkd-io/zkd/internal/testkit/child"
)

// testKDC is a real MIT Kerberos KDC (Debian's krb5-kdc) on a loopback port, with its own realm,
// database, krb5.conf and keytabs in a temporary directory.
type testKDC struct {
	dir    string
	realm  string
	krb5   string // krb5.conf
	kdcCfg string // kdc.conf
}

const (
	krb5kdc   = "/usr/sbin/krb5kdc"
	kdb5Util  = "/usr/sbin/kdb5_util"
	kadminLoc = "/usr/sbin/kadmin.local"
)

// startKDC starts a KDC for realm ZKD.TEST, or skips the test when the KDC is not installed.
func startKDC(t *testing.T) *testKDC {
	t.Helper()
	for _, p := range []string{krb5kdc, kdb5Util, kadminLoc} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("%s is not installed (Debian packages krb5-kdc, krb5-admin-server)", p)
		}
	}
	dir := t.TempDir()
	ports, err := apachezk.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	k := &testKDC{dir: dir, realm: "ZKD.TEST", krb5: filepath.Join(dir, "krb5.conf"), kdcCfg: filepath.Join(dir, "kdc.conf")}
	enctypes := "aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96"
	krb5 := fmt.Sprintf(`[libdefaults]
 default_realm = %[1]s
 dns_lookup_kdc = false
 dns_lookup_realm = false
 rdns = false
 udp_preference_limit = 1
 default_tkt_enctypes = %[3]s
 default_tgs_enctypes = %[3]s
 permitted_enctypes = %[3]s
[realms]
 %[1]s = {
  kdc = 127.0.0.1:%[2]d
 }
[domain_realm]
 localhost = %[1]s
`, k.realm, ports[0], enctypes)
	kdc := fmt.Sprintf(`[kdcdefaults]
 kdc_ports = %[2]d
 kdc_tcp_ports = %[2]d
[realms]
 %[1]s = {
  database_name = %[3]s/principal
  key_stash_file = %[3]s/stash
  acl_file = %[3]s/kadm5.acl
  kdc_ports = %[2]d
  kdc_tcp_ports = %[2]d
  max_life = 10h 0m 0s
  supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
 }
[logging]
 kdc = FILE:%[3]s/kdc.log
`, k.realm, ports[0], dir)
	for name, text := range map[string]string{k.krb5: krb5, k.kdcCfg: kdc, filepath.Join(dir, "kadm5.acl"): ""} {
		if err := os.WriteFile(name, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	k.run(t, kdb5Util, "-r", k.realm, "-P", "master-pw", "create", "-s")
	p, err := child.Start(child.Config{
		Argv:   []string{"/usr/bin/env", "KRB5_CONFIG=" + k.krb5, "KRB5_KDC_PROFILE=" + k.kdcCfg, krb5kdc, "-n", "-r", k.realm},
		Dir:    dir,
		Output: filepath.Join(dir, "krb5kdc.out"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(5 * time.Second) })
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	listening := testkit.Until(30*time.Second, func() bool {
		var c net.Conn
		if c, err = net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return true
		}
		return !p.Running() // it exited: no use waiting
	})
	if !listening || err != nil {
		t.Fatalf("the KDC did not start listening on %s: %v\n%s", addr, err, child.Tail(filepath.Join(dir, "krb5kdc.out"), 20))
	}
	return k
}

// run runs a Kerberos administration command with the KDC's configuration.
func (k *testKDC) run(t *testing.T, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "KRB5_CONFIG="+k.krb5, "KRB5_KDC_PROFILE="+k.kdcCfg)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

// keytab creates principal with a random key and returns a keytab holding it.
func (k *testKDC) keytab(t *testing.T, principal string) string {
	t.Helper()
	kt := filepath.Join(k.dir, fmt.Sprintf("kt-%d.keytab", time.Now().UnixNano()))
	k.run(t, kadminLoc, "-r", k.realm, "-q", "addprinc -randkey "+principal)
	k.run(t, kadminLoc, "-r", k.realm, "-q", "ktadd -k "+kt+" "+principal)
	return kt
}
