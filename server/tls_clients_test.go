package server_test

import (
	"context"
	"crypto/x509/pkix"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/zkd-io/zkd/internal/testkit/apachezk"
	"github.com/zkd-io/zkd/internal/testkit/pyclient"
	"github.com/zkd-io/zkd/internal/testkit/tlstest"
)

// The clients users have, over TLS: kazoo (python3-kazoo) with PEM files, and the Java client
// (zkCli.sh, with the Netty socket ZooKeeper needs for TLS) with PKCS12 and JKS stores. Each
// runs against zkd and ZooKeeper 3.8.

// kazooTLSScript connects over TLS, creates a node with the auth ACL and prints its ACL's ids.
const kazooTLSScript = `
import sys
from kazoo.client import KazooClient
from kazoo.security import ACL, Id
host, ca, cert, key = sys.argv[1:5]
zk = KazooClient(hosts=host, use_ssl=True, ca=ca, certfile=cert, keyfile=key, verify_certs=True, timeout=10)
zk.start(timeout=20)
zk.create("/kazoo-tls", b"v", acl=[ACL(31, Id("auth", ""))])
acl, _ = zk.get_acls("/kazoo-tls")
for a in acl:
    print("acl %s:%s" % (a.id.scheme, a.id.id))
print("data %s" % zk.get("/kazoo-tls")[0].decode())
zk.stop()
print("ok")
`

func TestKazooTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("runs an external client")
	}
	py := pyclient.KazooPython(t)
	p := newPKI(t)
	leaf := p.client(t, acmeSubject)
	leaf.WriteCertAndKey(t, p.path("kazoo.crt"), p.path("kazoo.key"))
	forTLSTargets(t, p.props(nil), func(t *testing.T, tg tlsTarget) {
		out := runClient(t, 90*time.Second, "", py, "-c", kazooTLSScript, tg.secure, p.path("ca.pem"), p.path("kazoo.crt"), p.path("kazoo.key"))
		for _, want := range []string{"acl x509:" + dnOf(t, leaf) + "\n", "data v\n", "ok\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("kazoo over TLS printed:\n%s\nwant %q in it", out, want)
			}
		}
	})
}

// javaTLSClient runs zkCli.sh over TLS with the given stores (system properties as ZooKeeper's
// docs give them) and the commands on stdin, and returns its output. mayFail accepts a non-zero
// exit (zkCli.sh exits 1 when a command failed).
func javaTLSClient(t *testing.T, addr string, props map[string]string, commands string, mayFail bool) string {
	t.Helper()
	if _, err := os.Stat(zkCli); err != nil {
		t.Skip("zkCli.sh is not installed (Debian package zookeeper)")
	}
	// zkEnv.sh fixes the classpath; the one given last wins, and it must hold the Netty jars
	// the Netty client socket needs.
	flags := []string{"-cp", strings.Join(append([]string{apachezk.Jar}, apachezk.NettyTLSJars()...), ":"),
		"-Dzookeeper.client.secure=true",
		"-Dzookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty"}
	for k, v := range props {
		flags = append(flags, fmt.Sprintf("-Dzookeeper.%s=%s", k, v))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, zkCli, "-server", addr)
	cmd.Env = append(os.Environ(), "CLIENT_JVMFLAGS="+strings.Join(flags, " "))
	cmd.Stdin = strings.NewReader(commands)
	out, err := cmd.CombinedOutput()
	if err != nil && (!mayFail || ctx.Err() != nil) {
		t.Fatalf("zkCli.sh over TLS: %v\n%s", err, out)
	}
	return string(out)
}

func TestJavaClientTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("runs an external client")
	}
	p := newPKI(t)
	leaf := p.client(t, pkix.Name{CommonName: "java client", OrganizationalUnit: []string{"Eng"}, Organization: []string{"Acme, Inc."}})
	const pw = "changeit"
	leaf.WritePKCS12(t, p.path("client.p12"), pw)
	p.ca.WritePKCS12(t, p.path("trust.p12"), pw)
	leaf.WriteJKS(t, p.path("client.jks"), pw)
	p.ca.WriteJKS(t, p.path("trust.jks"), pw)
	stores := map[string]map[string]string{
		"PKCS12": {"ssl.keyStore.location": p.path("client.p12"), "ssl.keyStore.password": pw,
			"ssl.trustStore.location": p.path("trust.p12"), "ssl.trustStore.password": pw},
		"JKS": {"ssl.keyStore.location": p.path("client.jks"), "ssl.keyStore.password": pw,
			"ssl.trustStore.location": p.path("trust.jks"), "ssl.trustStore.password": pw},
	}
	// The server's own stores are PKCS12 too: a Java trust store holds the CA.
	p.server.WritePKCS12(t, p.path("server.p12"), pw)
	serverProps := map[string]string{
		"ssl.keyStore.location": p.path("server.p12"), "ssl.keyStore.password": pw,
		"ssl.trustStore.location": p.path("trust.p12"), "ssl.trustStore.password": pw,
	}
	forTLSTargets(t, serverProps, func(t *testing.T, tg tlsTarget) {
		for name, props := range stores {
			out := javaTLSClient(t, tg.secure, props, "whoami\ncreate /java-"+name+" v\nget /java-"+name+"\nquit\n", false)
			if want := "x509: " + dnOf(t, leaf); !strings.Contains(out, want) {
				t.Errorf("%s: zkCli.sh whoami printed:\n%s\nwant %q", name, out, want)
			}
			if !strings.Contains(out, "Created /java-"+name) {
				t.Errorf("%s: zkCli.sh create printed:\n%s", name, out)
			}
		}
	})

	// A server certificate for another name: the Java client, which verifies host names by
	// default, never gets a session.
	wrong := newPKI(t)
	wrong.ca.Issue(t, tlstest.Options{Subject: pkix.Name{CommonName: "elsewhere"}, DNSNames: []string{"elsewhere.example"}}).
		WritePEM(t, wrong.path("server.pem"))
	wrong.ca.WritePKCS12(t, wrong.path("trust.p12"), pw)
	forTLSTargets(t, wrong.props(map[string]string{"ssl.clientAuth": "none"}), func(t *testing.T, tg tlsTarget) {
		out := javaTLSClient(t, tg.secure, map[string]string{"ssl.trustStore.location": wrong.path("trust.p12"),
			"ssl.trustStore.password": pw}, "create /wrong v\nquit\n", true)
		if strings.Contains(out, "Created /wrong") || !strings.Contains(out, "ConnectionLoss") {
			t.Errorf("the Java client accepted a certificate for elsewhere.example:\n%s", out)
		}
	})
}
