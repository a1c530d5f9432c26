package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkd-io/zkd/internal/testkit"
)

// The reconfig walkthrough of examples/cluster/README.md, on the example zoo.cfg files as shipped
// (only their ports and data directories moved, so the test does not collide with anything): three
// servers, a fourth started with -join, added and removed by the super user with the password the
// files' superDigest names, and refused to anyone else.
func TestExampleClusterReconfigWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("runs four zkd processes")
	}
	base := t.TempDir()
	ports := map[string]string{}
	remap := func(port string) string {
		if _, ok := ports[port]; !ok {
			ports[port] = strings.Split(freePort(t), ":")[1]
		}
		return ports[port]
	}
	portRe := regexp.MustCompile(`(127\.0\.0\.1:|clientPort=|admin\.serverPort=)(\d+)`)
	var cfgs []string
	clients := map[int]string{}
	for i := 1; i <= 4; i++ {
		b, err := os.ReadFile(filepath.Join("..", "..", "examples", "cluster", fmt.Sprintf("zoo%d.cfg", i)))
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(base, fmt.Sprint(i))
		if err := os.MkdirAll(dir, 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "myid"), []byte(fmt.Sprint(i)), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := portRe.ReplaceAllStringFunc(string(b), func(m string) string {
			sub := portRe.FindStringSubmatch(m)
			return sub[1] + remap(sub[2])
		})
		cfg = regexp.MustCompile(`(?m)^dataDir=.*$`).ReplaceAllString(cfg, "dataDir="+dir)
		path := filepath.Join(base, fmt.Sprintf("zoo%d.cfg", i))
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		cfgs = append(cfgs, path)
		clients[i] = "127.0.0.1:" + ports[fmt.Sprint(2180+i)]
	}
	var procs []*zkdProcess
	for i := 1; i <= 3; i++ {
		procs = append(procs, startZkd(t, "-config", cfgs[i-1]))
	}
	for i := 1; i <= 3; i++ {
		waitRuok(t, clients[i], procs[i-1])
	}
	p4 := startZkd(t, "-config", cfgs[3], "-join")

	// The README's line is zoo4.cfg's own server.4 line.
	b4, err := os.ReadFile(cfgs[3])
	if err != nil {
		t.Fatal(err)
	}
	add := regexp.MustCompile(`(?m)^server\.4=.*$`).FindString(string(b4))
	if !strings.HasPrefix(add, "server.4=127.0.0.1:"+ports["2891"]+":3891;") {
		t.Fatalf("zoo4.cfg's server.4 line: %q", add)
	}
	anon := connectZk(t, clients[1])
	defer anon.Close()
	if _, err := anon.IncrementalReconfig([]string{add}, nil, -1); err != zk.ErrNoAuth {
		t.Fatalf("reconfig without the super user = %v; want NoAuth", err)
	}
	admin := connectZk(t, clients[1])
	defer admin.Close()
	if err := admin.AddAuth("digest", []byte("super:zkd-example")); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.IncrementalReconfig([]string{add}, nil, -1); err != nil {
		t.Fatalf("reconfig -add: %v", err)
	}
	waitRuok(t, clients[4], p4)
	cfg, _, err := admin.Get("/zookeeper/config")
	if err != nil || !strings.Contains(string(cfg), fmt.Sprintf("server.4=127.0.0.1:%s:3891:participant;127.0.0.1:%s\n", ports["2891"], ports["2184"])) {
		t.Fatalf("/zookeeper/config after the add: %q, %v", cfg, err)
	}
	c4 := connectZk(t, clients[4])
	if _, err := c4.Create("/via-4", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("write through the added server: %v", err)
	}
	c4.Close()

	if _, err := admin.IncrementalReconfig(nil, []string{"4"}, -1); err != nil {
		t.Fatalf("reconfig -remove 4: %v", err)
	}
	cfg, _, err = admin.Get("/zookeeper/config")
	if err != nil || strings.Contains(string(cfg), "server.4=") {
		t.Fatalf("/zookeeper/config after the remove: %q, %v", cfg, err)
	}
	if !testkit.Until(20*time.Second, func() bool {
		return strings.Contains(p4.out.String(), "this server was removed from the cluster")
	}) {
		t.Fatalf("the removed server never said so:\n%s", p4.out.String())
	}
}
