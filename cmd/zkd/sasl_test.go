package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zkd-io/zkd/conformance"
	"github.com/zkd-io/zkd/internal/testkit/apachezk"
	"github.com/zkd-io/zkd/internal/testkit/pyclient"
	"github.com/zkd-io/zkd/internal/testkit/zktest"
	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/server"
)

// SASL on the client port, through real clients (the Java client in zkCli.sh, kazoo), against
// zkd started from a zoo.cfg and, with the same keys, against real Apache ZooKeeper.

const zkCliPath = "/usr/share/zookeeper/bin/zkCli.sh"

const serverJAASText = `// the file ZooKeeper operators keep for their servers
Server {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    user_bob="bob-secret"
    user_alice="alice-secret"
    user_admin="admin-secret";
};
`

// clientJAAS writes a JAAS file whose Client section logs in as user with password.
func clientJAAS(t *testing.T, user, password string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "client.jaas")
	text := fmt.Sprintf("Client {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  username=%q\n  password=%q;\n};\n", user, password)
	if err := os.WriteFile(f, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

type saslTarget struct {
	name string
	addr string
}

// saslTargets starts zkd from a zoo.cfg holding keys (and zkd.jaasConfig naming the server JAAS
// file) and, when it is installed, real ZooKeeper with the same keys and the JAAS file given to
// its JVM, as ZooKeeper operators do.
func saslTargets(t *testing.T, keys map[string]string) []saslTarget {
	t.Helper()
	return saslTargetsWith(t, keys, serverJAASText, nil)
}

// saslTargetsWith is saslTargets with the server JAAS file's text and more JVM flags for
// ZooKeeper (its krb5.conf, for Kerberos).
func saslTargetsWith(t *testing.T, keys map[string]string, jaasText string, jvmFlags []string) []saslTarget {
	t.Helper()
	dir := t.TempDir()
	jaas := filepath.Join(dir, "server.jaas")
	if err := os.WriteFile(jaas, []byte(jaasText), 0o600); err != nil {
		t.Fatal(err)
	}
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "dataDir=%s\nclientPortAddress=127.0.0.1\nclientPort=2181\nadmin.enableServer=false\nzkd.jaasConfig=%s\n", filepath.Join(dir, "zkd"), jaas)
	for _, k := range slices.Sorted(mapKeys(keys)) {
		fmt.Fprintf(&cfg, "%s=%s\n", k, keys[k])
	}
	st, err := parseZooCfg(strings.NewReader(cfg.String()), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("zoo.cfg:\n%s\n%v", cfg.String(), err)
	}
	if err := st.sasl.apply(&st.cfg, ""); err != nil {
		t.Fatal(err)
	}
	st.cfg.Addr = "127.0.0.1:0"
	st.cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	srv, err := server.Start(st.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	targets := []saslTarget{{"zkd", srv.Addr()}}

	if err := apachezk.Installed(); err != nil {
		t.Logf("real ZooKeeper not checked: %v", err)
		return targets
	}
	p := zktest.Launch(t, 1, func(ports []int) apachezk.ServerConfig {
		return apachezk.ServerConfig{
			Dir:        filepath.Join(dir, "zookeeper"),
			ClientAddr: fmt.Sprintf("127.0.0.1:%d", ports[0]),
			Extra:      keys,
			JVMFlags:   append([]string{"-Djava.security.auth.login.config=" + jaas}, jvmFlags...),
		}
	})
	return append(targets, saslTarget{"zookeeper", p.ClientAddr()})
}

func mapKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func needZkCli(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the Java client")
	}
	if _, err := os.Stat(zkCliPath); err != nil {
		t.Skip("zkCli.sh is not installed (Debian package zookeeper)")
	}
	if _, err := exec.LookPath("java"); err != nil {
		t.Skip("no java for zkCli.sh")
	}
}

// zkCli runs a zkCli.sh script against addr, logged in with the JAAS file jaas ("" for none).
func zkCli(t *testing.T, addr, jaas, script string) string {
	t.Helper()
	return zkCliFlags(t, addr, jaas, script, nil)
}

// zkCliFlags is zkCli with more JVM flags for the client.
func zkCliFlags(t *testing.T, addr, jaas, script string, jvmFlags []string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, zkCliPath, "-server", addr)
	cmd.Stdin = strings.NewReader(script + "\nquit\n")
	flags := "-Dzookeeper.sasl.client=false"
	if jaas != "" {
		flags = "-Djava.security.auth.login.config=" + jaas
	}
	flags = strings.Join(append([]string{flags}, jvmFlags...), " ")
	cmd.Env = append(os.Environ(), "CLIENT_JVMFLAGS="+flags)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("zkCli.sh against %s timed out:\n%s", addr, out)
	}
	_ = err // zkCli.sh's exit status says nothing about the commands'
	return string(out)
}

func TestSASLDigestZkCli(t *testing.T) {
	needZkCli(t)
	keys := map[string]string{
		"authProvider.1": "org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
		"superUser":      "admin",
	}
	bob := clientJAAS(t, "bob", "bob-secret")
	alice := clientJAAS(t, "alice", "alice-secret")
	admin := clientJAAS(t, "admin", "admin-secret")
	wrong := clientJAAS(t, "bob", "not-bobs")
	for _, tg := range saslTargets(t, keys) {
		t.Run(tg.name, func(t *testing.T) {
			out := zkCli(t, tg.addr, bob, "create /sasl-bob bobs-data\nsetAcl /sasl-bob sasl:bob:cdrwa\ngetAcl /sasl-bob\nget /sasl-bob\nwhoami")
			for _, want := range []string{"SaslAuthenticated", "Created /sasl-bob", "'sasl,'bob\n: cdrwa", "bobs-data\n", "sasl: bob\n"} {
				if !strings.Contains(out, want) {
					t.Errorf("bob's zkCli output lacks %q:\n%s", want, out)
				}
			}
			out = zkCli(t, tg.addr, alice, "get /sasl-bob")
			for _, want := range []string{"SaslAuthenticated", "Insufficient permission : /sasl-bob"} {
				if !strings.Contains(out, want) {
					t.Errorf("alice's zkCli output lacks %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, "bobs-data") {
				t.Errorf("alice read bob's node:\n%s", out)
			}
			out = zkCli(t, tg.addr, admin, "get /sasl-bob")
			if !strings.Contains(out, "bobs-data\n") {
				t.Errorf("the super user (zookeeper.superUser=admin) could not read bob's node:\n%s", out)
			}
			out = zkCli(t, tg.addr, wrong, "get /sasl-bob")
			t.Logf("wrong password:\n%s", out)
			if !strings.Contains(out, "state:AuthFailed") || strings.Contains(out, "bobs-data") {
				t.Errorf("a wrong password was not refused:\n%s", out)
			}
			// With no SASL login, the node stays closed, and a sasl ACL of a malformed name is
			// refused.
			out = zkCli(t, tg.addr, "", "get /sasl-bob\ncreate /sasl-bad x sasl:a@b@c:r")
			for _, want := range []string{"Insufficient permission : /sasl-bob", "InvalidACL"} {
				if !strings.Contains(out, want) {
					t.Errorf("unauthenticated zkCli output lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

// rawRequireAuthCode sends one request on a new unauthenticated session and returns the reply's
// code, checking that the server then closes the connection.
func rawRequireAuthCode(t *testing.T, addr string) jute.Code {
	t.Helper()
	r, err := conformance.DialRaw(addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.NewSession(30000); err != nil {
		t.Fatal(err)
	}
	rep, err := r.Call(jute.OpGetChildren, &jute.GetChildrenRequest{Path: "/"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadFrame(); err == nil {
		t.Errorf("the connection stayed open after %v", rep.Header.Err)
	}
	return rep.Header.Err
}

func TestSASLRequiredRefusesUnauthenticated(t *testing.T) {
	needZkCli(t)
	bob := clientJAAS(t, "bob", "bob-secret")
	wrong := clientJAAS(t, "bob", "wrong")
	for _, keys := range []map[string]string{
		{"authProvider.1": "org.apache.zookeeper.server.auth.SASLAuthenticationProvider", "sessionRequireClientSASLAuth": "true"},
		{"authProvider.1": "org.apache.zookeeper.server.auth.SASLAuthenticationProvider", "enforce.auth.enabled": "true", "enforce.auth.schemes": "sasl,digest"},
	} {
		for _, tg := range saslTargets(t, keys) {
			t.Run(tg.name, func(t *testing.T) {
				if code := rawRequireAuthCode(t, tg.addr); code != jute.CodeSessionClosedRequireSASLAuth {
					t.Errorf("unauthenticated getChildren = %v; want %v", code, jute.CodeSessionClosedRequireSASLAuth)
				}
				out := zkCli(t, tg.addr, "", "ls /")
				if !strings.Contains(out, "Session closed because client failed to authenticate") {
					t.Errorf("zkCli without SASL:\n%s", out)
				}
				out = zkCli(t, tg.addr, bob, "create /req x\nls /")
				if !strings.Contains(out, "Created /req") || !strings.Contains(out, "[req, zookeeper]") {
					t.Errorf("zkCli with SASL:\n%s", out)
				}
				// A failed login is answered SessionClosedRequireSASLAuth with a null token, which
				// the Java client turns into AuthFailed.
				out = zkCli(t, tg.addr, wrong, "ls /")
				if !strings.Contains(out, "state:AuthFailed") || strings.Contains(out, "[req, zookeeper]") {
					t.Errorf("zkCli with a wrong password:\n%s", out)
				}
			})
		}
	}
}

var refusedKazoo = regexp.MustCompile(`(?m)^wrong password saw (.* )?CONNECTED AUTH_FAILED( .*)? connected False$`)

func TestSASLDigestKazoo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs kazoo")
	}
	py := pyclient.KazooSASLPython(t)
	keys := map[string]string{"authProvider.1": "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"}
	for _, tg := range saslTargets(t, keys) {
		t.Run(tg.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, py, "testdata/kazoo_sasl.py", tg.addr).CombinedOutput()
			if err != nil {
				t.Fatalf("kazoo: %v\n%s", err, out)
			}
			for _, want := range []string{"bob read bobs\n", "acl sasl bob 31\n", "alice NoAuth\n", "AUTH_FAILED closing"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("kazoo output lacks %q:\n%s", want, out)
				}
			}
			// The refused client connects, is refused (AUTH_FAILED) and is no longer connected:
			// not left CONNECTED (accepted) or CONNECTING (retrying the refused login).
			if !refusedKazoo.Match(out) {
				t.Errorf("kazoo's wrong-password client did not end refused:\n%s", out)
			}
		})
	}
}

func TestSASLKerberosZkCli(t *testing.T) {
	needZkCli(t)
	kdc := startKDC(t)
	service := "zookeeper/localhost@" + kdc.realm
	serviceKT := kdc.keytab(t, service)
	bob := "bob@" + kdc.realm
	bobKT := kdc.keytab(t, bob)
	serverJAAS := fmt.Sprintf(`Server {
  com.sun.security.auth.module.Krb5LoginModule required
  useKeyTab=true keyTab=%q storeKey=true useTicketCache=false principal=%q;
};
`, serviceKT, service)
	loginJAAS := func(principal, keytab string) string {
		f := filepath.Join(t.TempDir(), "client.jaas")
		if err := os.WriteFile(f, []byte(fmt.Sprintf(`Client {
  com.sun.security.auth.module.Krb5LoginModule required
  useKeyTab=true keyTab=%q storeKey=true useTicketCache=false principal=%q;
};
`, keytab, principal)), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	clientJAAS := loginJAAS(bob, bobKT)
	// A client with a host in its principal, as services logging in from a keytab have.
	svc := "svc/client.example@" + kdc.realm
	svcJAAS := loginJAAS(svc, kdc.keytab(t, svc))
	krb5 := "-Djava.security.krb5.conf=" + kdc.krb5
	clientFlags := []string{krb5, "-Dzookeeper.server.principal=" + service}
	// A ticket for another service: the server's keytab cannot read it.
	other := "zookeeper/elsewhere@" + kdc.realm
	kdc.keytab(t, other)
	otherFlags := []string{krb5, "-Dzookeeper.server.principal=" + other}
	for _, tc := range []struct {
		name  string
		keys  map[string]string
		login string // the client's JAAS file
		id    string
	}{
		{"full principal", map[string]string{"authProvider.1": saslProviderClass}, clientJAAS, "bob@ZKD.TEST"},
		{"realm removed", map[string]string{"authProvider.1": saslProviderClass, "kerberos.removeRealmFromPrincipal": "true"}, clientJAAS, "bob"},
		{"host kept", map[string]string{"authProvider.1": saslProviderClass}, svcJAAS, "svc/client.example@ZKD.TEST"},
		{"host removed", map[string]string{"authProvider.1": saslProviderClass, "kerberos.removeHostFromPrincipal": "true"}, svcJAAS, "svc@ZKD.TEST"},
	} {
		for _, tg := range saslTargetsWith(t, tc.keys, serverJAAS, []string{krb5}) {
			t.Run(tc.name+"/"+tg.name, func(t *testing.T) {
				script := fmt.Sprintf("create /krb x\nsetAcl /krb sasl:%s:cdrwa\ngetAcl /krb\nget /krb\nwhoami", tc.id)
				out := zkCliFlags(t, tg.addr, tc.login, script, clientFlags)
				for _, want := range []string{"SaslAuthenticated", "Created /krb", "'sasl,'" + tc.id + "\n: cdrwa", "x\n", "sasl: " + tc.id + "\n"} {
					if !strings.Contains(out, want) {
						t.Errorf("zkCli output lacks %q:\n%s", want, out)
					}
				}
				out = zkCli(t, tg.addr, "", "get /krb")
				if !strings.Contains(out, "Insufficient permission : /krb") {
					t.Errorf("an unauthenticated client read the node:\n%s", out)
				}
				out = zkCliFlags(t, tg.addr, clientJAAS, "get /krb", otherFlags)
				if !strings.Contains(out, "state:AuthFailed") || strings.Contains(out, "x\n") {
					t.Errorf("a ticket for another service was not refused:\n%s", out)
				}
			})
		}
	}
}

func TestEnforceAuthDigest(t *testing.T) {
	needZkCli(t)
	keys := map[string]string{"enforce.auth.enabled": "true", "enforce.auth.schemes": "digest"}
	for _, tg := range saslTargets(t, keys) {
		t.Run(tg.name, func(t *testing.T) {
			if code := rawRequireAuthCode(t, tg.addr); code != jute.CodeSessionClosedRequireSASLAuth {
				t.Errorf("unauthenticated getChildren = %v; want %v", code, jute.CodeSessionClosedRequireSASLAuth)
			}
			// A SASL login is not a digest identity.
			out := zkCli(t, tg.addr, clientJAAS(t, "bob", "bob-secret"), "ls /")
			if !strings.Contains(out, "Session closed because client failed to authenticate") {
				t.Errorf("zkCli with SASL only:\n%s", out)
			}
			// Without authProvider.N naming SASLAuthenticationProvider, a sasl ACL is invalid.
			out = zkCli(t, tg.addr, "", "addauth digest carol:pw\ncreate /dg x\nls /\ncreate /dg-sasl x sasl:bob:cdrwa")
			if !strings.Contains(out, "Created /dg") || !strings.Contains(out, "[dg, zookeeper]") || !strings.Contains(out, "InvalidACL") {
				t.Errorf("zkCli with a digest identity:\n%s", out)
			}
		})
	}
}
