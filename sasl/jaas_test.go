package sasl

import (
	"strings"
	"testing"
)

const serverJAAS = `
/* ZooKeeper's server section, as operators write it */
Server {
   org.apache.zookeeper.server.auth.DigestLoginModule required
   user_super="adminsecret"   // the super user
   user_bob="bob\"pw"
   # another comment
   user_alice=alicepw;
};
Client {
  org.apache.zookeeper.server.auth.DigestLoginModule required username="bob" password="pw";
};
KerberosServer {
  com.sun.security.auth.module.Krb5LoginModule required
  useKeyTab=true keyTab="/etc/zk/zk.keytab" storeKey=true useTicketCache=false
  principal="zookeeper/host.example.com@EXAMPLE.COM";
};
`

func TestParseJAAS(t *testing.T) {
	j, err := ParseJAAS(serverJAAS)
	if err != nil {
		t.Fatal(err)
	}
	if len(j) != 3 {
		t.Fatalf("sections = %d; want 3", len(j))
	}
	c, err := FromJAAS(j, "Server")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"super": "adminsecret", "bob": `bob"pw`, "alice": "alicepw"}
	if len(c.Users) != len(want) {
		t.Fatalf("users = %q; want %q", c.Users, want)
	}
	for u, p := range want {
		if c.Users[u] != p {
			t.Errorf("user %s password = %q; want %q", u, c.Users[u], p)
		}
	}
	if c.Mechanism() != "DIGEST-MD5" {
		t.Errorf("mechanism = %s; want DIGEST-MD5", c.Mechanism())
	}
	k, err := FromJAAS(j, "KerberosServer")
	if err != nil {
		t.Fatal(err)
	}
	if k.Kerberos == nil || k.Kerberos.KeyTab != "/etc/zk/zk.keytab" || k.Kerberos.Principal != "zookeeper/host.example.com@EXAMPLE.COM" || k.Mechanism() != "GSSAPI" {
		t.Errorf("kerberos section = %+v", k.Kerberos)
	}
	if _, err := FromJAAS(j, "Nope"); err == nil || !strings.Contains(err.Error(), "Client, KerberosServer, Server") {
		t.Errorf("missing section: %v", err)
	}
	if _, err := FromJAAS(j, "Client"); err == nil {
		t.Errorf("a section with no users and no Kerberos login was accepted")
	}
}

func TestParseJAASErrors(t *testing.T) {
	for _, bad := range []string{
		`Server { a required x="1" };`,                    // module without ';'
		`Server { a required x="1"; }`,                    // section without ';'
		`Server { a mandatory; };`,                        // unknown flag
		`Server { a required x; };`,                       // option without value
		`Server { a required x="1; };`,                    // unterminated string
		`Server { };`,                                     // no module
		`Server { a required; }; Server { a required; };`, // twice
		`/* never closed`,
		`Server`,
	} {
		if j, err := ParseJAAS(bad); err == nil {
			t.Errorf("ParseJAAS(%q) = %v; want an error", bad, j)
		}
	}
}

func FuzzParseJAAS(f *testing.F) {
	f.Add(serverJAAS)
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = ParseJAAS(s) // no panic, no hang
	})
}
