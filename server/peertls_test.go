package server_test

import (
	"crypto/tls"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkd-io/zkd/consensus"
	"github.com/zkd-io/zkd/internal/testkit/zktest"
	"github.com/zkd-io/zkd/server"
	"github.com/zkd-io/zkd/server/zkdtest"
)

// peerTLS returns a PeerTLS with one loopback member certificate from a CA made for the test.
func peerTLS(t *testing.T) *consensus.PeerTLS {
	ca := zktest.NewCA(t, "zkd server test CA")
	cert := ca.Issue(t, zktest.CertSpec{CommonName: "member", IPs: zktest.LoopbackIPs()})
	return &consensus.PeerTLS{
		Server: &tls.Config{Certificates: []tls.Certificate{cert.TLS}, ClientCAs: ca.Pool(), MinVersion: tls.VersionTLS12},
		Client: &tls.Config{Certificates: []tls.Certificate{cert.TLS}, RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12},
	}
}

// TestClusterPeerTLSFailover runs a 3-server cluster whose peer port is under mutual TLS: it
// forms, forwards writes from every member, and fails over when the leader stops.
func TestClusterPeerTLSFailover(t *testing.T) {
	pt := peerTLS(t)
	cl := zkdtest.StartCluster(t, 3, zkdtest.WithConfig(func(c *server.Config) { c.PeerTLS = pt }))
	for i, addr := range cl.Addrs() {
		c, _ := connect(t, addr)
		p := fmt.Sprintf("/from-%d", i)
		if _, err := c.Create(p, []byte(p), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatalf("create via server %d: %v", i+1, err)
		}
	}
	leader := cl.Leader()
	if leader == nil {
		t.Fatal("no leader")
	}
	var others []string
	for _, s := range cl.Servers {
		if s != leader {
			others = append(others, s.Addr())
		}
	}
	c, _ := connect(t, others...)
	if err := leader.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err := c.Create("/after", nil, 0, zk.WorldACL(zk.PermAll))
		if err == nil {
			break
		}
		if !errors.Is(err, zk.ErrConnectionClosed) && !errors.Is(err, zk.ErrNoServer) && !errors.Is(err, zk.ErrSessionMoved) {
			t.Fatalf("create after the leader stopped: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("writes did not resume after the leader stopped")
		}
	}
	for i := range 3 {
		if ok, _, err := c.Exists(fmt.Sprintf("/from-%d", i)); err != nil || !ok {
			t.Errorf("/from-%d after failover: %v, %v", i, ok, err)
		}
	}
}

func TestConfigPeerTLSValidate(t *testing.T) {
	pt := peerTLS(t)
	if _, err := zkdtest.StartServer(zkdtest.WithoutRaft(), zkdtest.WithConfig(func(c *server.Config) { c.PeerTLS = pt })); err == nil {
		t.Error("a server without Raft accepted PeerTLS")
	}
	broken := *pt
	broken.Server = pt.Server.Clone()
	broken.Server.ClientCAs = nil // would trust the system roots
	if err := (server.Config{PeerTLS: &broken}).Validate(); err == nil {
		t.Error("PeerTLS without a trust store for peers was accepted")
	}
	if err := (server.Config{PeerTLS: pt}).Validate(); err != nil {
		t.Errorf("valid PeerTLS: %v", err)
	}
}
