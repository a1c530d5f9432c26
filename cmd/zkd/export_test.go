package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkd-io/zkd/internal/testkit/apachezk"
	"github.com/zkd-io/zkd/internal/testkit/zktest"
	"github.com/zkd-io/zkd/znode"
)

// The way back: zkd export of a stopped zkd server gives a ZooKeeper snapshot that Apache
// ZooKeeper loads as it is, and serves the very tree zkd served.
func TestExportLoadsInZooKeeper(t *testing.T) {
	zktest.Require(t)
	dir := t.TempDir()
	super := znode.DigestID("super", "pw")
	data := filepath.Join(dir, "zkd")
	cfg := filepath.Join(dir, "zoo.cfg")
	addr := freePort(t)
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("dataDir=%s\nclientPort=%s\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\nextendedTypesEnabled=true\nDigestAuthenticationProvider.superDigest=%s\n", data, portOf(t, addr), super)), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startZkd(t, "-config", cfg)
	waitRuok(t, addr, p)
	c, _ := sessionOf(t, addr, 30*time.Second)
	live, _ := sessionOf(t, addr, 30*time.Second)
	if err := c.AddAuth("digest", []byte("alice:secret")); err != nil {
		t.Fatal(err)
	}
	open := zk.WorldACL(zk.PermAll)
	acls := [][]zk.ACL{open, zk.WorldACL(zk.PermRead), zk.DigestACL(zk.PermAll, "bob", "pw"), {{Perms: zk.PermAll, Scheme: "auth", ID: ""}},
		{{Perms: zk.PermRead, Scheme: "ip", ID: "127.0.0.1"}, {Perms: zk.PermAll, Scheme: "digest", ID: "alice:abc"}}}
	for _, p := range []string{"/app", "/seq", "/eph"} {
		if _, err := c.Create(p, nil, 0, open); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.CreateContainer("/cont", []byte("c"), zk.FlagContainer, open); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		n := fmt.Sprintf("/app/n%02d", i)
		if _, err := c.Create(n, []byte(n), 0, acls[i%len(acls)]); err != nil {
			t.Fatal(err)
		}
		if i%5 == 0 || i%5 == 3 {
			if _, err := c.Set(n, []byte("changed"), -1); err != nil {
				t.Fatal(err)
			}
			if _, err := c.SetACL(n, acls[(i+1)%len(acls)], -1); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Create("/seq/s-", nil, zk.FlagSequence, open); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Create(fmt.Sprintf("/cont/k%02d", i), nil, 0, open); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			if err := c.Delete(fmt.Sprintf("/cont/k%02d", i), -1); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := live.Create(fmt.Sprintf("/eph/e%02d", i), nil, zk.FlagEphemeral, open); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.CreateTTL("/app/ttl", []byte("t"), zk.FlagTTL, open, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Multi(&zk.CreateRequest{Path: "/app/m", Acl: open}, &zk.SetDataRequest{Path: "/app/m", Data: []byte("m"), Version: 0}); err != nil {
		t.Fatal(err)
	}
	reader := superReader(t, addr)
	want := zktest.DumpTree(t, reader)
	reader.Close()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("zkd after SIGTERM: %v\n%s", err, p.out.String())
	}

	zkDir := filepath.Join(dir, "zookeeper")
	var out bytes.Buffer
	if code := run([]string{"export", "-data", data, "-out", filepath.Join(zkDir, "data")}, &out, &out); code != 0 {
		t.Fatalf("zkd export: exit %d\n%s", code, out.String())
	}
	t.Log(strings.TrimSpace(out.String()))
	ports, err := apachezk.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	zkp := zktest.LaunchAt(t, apachezk.ServerConfig{Dir: zkDir, ClientAddr: fmt.Sprintf("127.0.0.1:%d", ports[0]), Extra: map[string]string{
		"extendedTypesEnabled": "true", "DigestAuthenticationProvider.superDigest": super,
	}})[0]
	zr := superReader(t, zkp.ClientAddr())
	zktest.DiffTrees(t, "tree against ZooKeeper's", zktest.DumpTree(t, zr), want)
	zr.Close()
	if err := zkp.Stop(); err != nil {
		t.Fatal(err)
	}

	// A three-server ensemble, every member given the same export, serves the same tree too.
	// (/zookeeper/config is then the ensemble's own membership, which ZooKeeper writes itself.)
	snaps, err := filepath.Glob(filepath.Join(zkDir, "data", "version-2", "snapshot.*"))
	if err != nil || len(snaps) == 0 {
		t.Fatalf("no exported snapshot: %v", err)
	}
	export, err := os.ReadFile(snaps[0])
	if err != nil {
		t.Fatal(err)
	}
	eports, err := apachezk.FreePorts(9)
	if err != nil {
		t.Fatal(err)
	}
	var servers, clients []string
	for i := range 3 {
		servers = append(servers, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", i+1, eports[3+i], eports[6+i]))
		clients = append(clients, fmt.Sprintf("127.0.0.1:%d", eports[i]))
	}
	var members []apachezk.ServerConfig
	for i := range 3 {
		mdir := filepath.Join(dir, fmt.Sprintf("zk%d", i+1))
		v2 := filepath.Join(mdir, "data", "version-2")
		if err := os.MkdirAll(v2, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(v2, filepath.Base(snaps[0])), export, 0o644); err != nil {
			t.Fatal(err)
		}
		members = append(members, apachezk.ServerConfig{Dir: mdir, ClientAddr: clients[i], ID: i + 1, Servers: servers, HeapMB: 256,
			Extra: map[string]string{"extendedTypesEnabled": "true", "DigestAuthenticationProvider.superDigest": super}})
	}
	zktest.LaunchAt(t, members...)
	ze := superReader(t, strings.Join(clients, ","))
	got := zktest.DumpTree(t, ze)
	delete(got, "/zookeeper/config")
	delete(want, "/zookeeper/config")
	zktest.DiffTrees(t, "tree against ZooKeeper's", got, want)
}
