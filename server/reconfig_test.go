package server_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkd-io/zkd/server"
	"github.com/zkd-io/zkd/server/zkdtest"
)

// superDigest is the super digest of "super:test".
const superDigest = "super:D/InIHSb7yEEbrWz8b9l71RjZJU="

func TestReconfigAddsAndRemovesAMember(t *testing.T) {
	cl := zkdtest.StartCluster(t, 3, zkdtest.WithConfig(func(c *server.Config) {
		c.ReconfigEnabled = true
		c.SuperDigest = superDigest
	}))
	c, _ := connect(t, cl.Addrs()...)
	if _, err := c.IncrementalReconfig(nil, []string{"3"}, -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("reconfig without WRITE on /zookeeper/config: %v; want ErrNoAuth", err)
	}
	if err := c.AddAuth("digest", []byte("super:test")); err != nil {
		t.Fatal(err)
	}

	// A fourth server waits to be added.
	peerLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	peers := []server.Peer{{ID: 4, PeerAddr: peerLn.Addr().String()}}
	cfg := server.Config{ServerID: 4, Join: true, Peers: peers, PeerListener: peerLn, TickTime: 200 * time.Millisecond}
	cfg.Consensus.HeartbeatTimeout = 500 * time.Millisecond
	s4, err := server.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s4.Close() })

	// A watcher of /zookeeper/config on another member hears about the change.
	var other string
	for _, a := range cl.Addrs() {
		if a != c.Server() {
			other = a
			break
		}
	}
	watcher, _ := connect(t, other)
	_, _, cfgEvents, err := watcher.GetW("/zookeeper/config")
	if err != nil {
		t.Fatal(err)
	}

	spec := fmt.Sprintf("server.4=%s:%s;%s", "127.0.0.1", strings.Split(peerLn.Addr().String(), ":")[1], s4.Addr())
	if _, err := c.IncrementalReconfig([]string{spec}, nil, -1); err != nil {
		t.Fatalf("reconfig joining server 4: %v", err)
	}
	data, _, err := c.Get("/zookeeper/config")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "server."); n != 4 {
		t.Fatalf("config after the join has %d members:\n%s", n, data)
	}
	select {
	case ev := <-cfgEvents:
		if ev.Type != zk.EventNodeDataChanged || ev.Path != "/zookeeper/config" {
			t.Errorf("config watcher got %+v", ev)
		}
	case <-time.After(10 * time.Second):
		t.Error("no NodeDataChanged on /zookeeper/config at another member")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := s4.WaitServing(ctx); err != nil {
		t.Fatal(err)
	}
	// The new member serves the replicated data.
	if _, err := c.Create("/after-join", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	c4, _ := connect(t, s4.Addr())
	if _, err := c4.Sync("/"); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := c4.Exists("/after-join"); err != nil || !ok {
		t.Fatalf("exists on the new member: %v %v", ok, err)
	}

	cfgData, _, err := c.Get("/zookeeper/config")
	if err != nil {
		t.Fatal(err)
	}
	version := cfgData[strings.LastIndex(string(cfgData), "version=")+len("version="):]
	var v int64
	if _, err := fmt.Sscanf(strings.TrimSpace(string(version)), "%x", &v); err != nil {
		t.Fatal(err)
	}
	if _, err := c.IncrementalReconfig(nil, []string{"4"}, v+1); !errors.Is(err, zk.ErrBadVersion) {
		t.Fatalf("reconfig with a stale config id: %v; want ErrBadVersion", err)
	}
	if _, err := c.IncrementalReconfig(nil, []string{"4"}, v); err != nil {
		t.Fatalf("reconfig removing server 4: %v", err)
	}
	if data, _, err = c.Get("/zookeeper/config"); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "server.4=") || strings.Count(string(data), "server.") != 3 {
		t.Fatalf("config after the removal:\n%s", data)
	}
}
