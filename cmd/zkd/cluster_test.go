package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkd-io/zkd/internal/testkit"
	"github.com/zkd-io/zkd/internal/testkit/apachezk"
)

// startCluster writes three zoo.cfg files (loopback, free ports), starts three zkd processes
// and returns their client addresses and processes.
func startCluster(t *testing.T) ([]string, []*zkdProcess) {
	addrs, procs, _ := startClusterLines(t)
	return addrs, procs
}

// startClusterLines is startCluster that also returns the zoo.cfg server.N lines.
func startClusterLines(t *testing.T) ([]string, []*zkdProcess, []string) {
	t.Helper()
	base := t.TempDir()
	// Nine distinct ports, held together while they are chosen: one at a time, a port released
	// could come back at once, and a member's client and peer ports were once the same.
	ports, err := apachezk.FreePorts(9)
	if err != nil {
		t.Fatal(err)
	}
	var clients, peers []string
	for i := range 3 {
		clients = append(clients, fmt.Sprintf("127.0.0.1:%d", ports[i]))
		peers = append(peers, fmt.Sprintf("127.0.0.1:%d", ports[3+i]))
	}
	var servers strings.Builder
	var lines []string
	for i := range 3 {
		line := fmt.Sprintf("server.%d=%s:%d;%s", i+1, peers[i], ports[6+i], clients[i])
		lines = append(lines, line)
		servers.WriteString(line + "\n")
	}
	var procs []*zkdProcess
	for i := range 3 {
		dir := filepath.Join(base, fmt.Sprint(i+1))
		if err := os.MkdirAll(dir, 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "myid"), []byte(fmt.Sprint(i+1)), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := fmt.Sprintf("tickTime=500\ninitLimit=10\nsyncLimit=5\ndataDir=%s\nadmin.enableServer=false\n4lw.commands.whitelist=*\n%s", dir, servers.String())
		path := filepath.Join(base, fmt.Sprintf("zoo%d.cfg", i+1))
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, startZkd(t, "-config", path))
	}
	for i, a := range clients {
		waitRuok(t, a, procs[i])
	}
	return clients, procs, lines
}

// /zookeeper/config shows each member as zoo.cfg names it, election port included (it showed the
// peer port twice).
func TestClusterConfigShowsZooCfgPorts(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three zkd processes")
	}
	addrs, _, lines := startClusterLines(t)
	c := connectZk(t, addrs[0])
	defer c.Close()
	data, _, err := c.Get("/zookeeper/config")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range lines {
		// zoo.cfg: server.N=host:peer:election;client. ZooKeeper writes the role in between.
		head, client, _ := strings.Cut(line, ";")
		if want := head + ":participant;" + client; !strings.Contains(string(data), want+"\n") {
			t.Errorf("/zookeeper/config lacks %q:\n%s", want, data)
		}
	}
}

// Killing the leader of a three-process cluster with SIGKILL loses no acknowledged write, and
// writes resume on the survivors.
func TestClusterKillLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three zkd processes")
	}
	addrs, procs := startCluster(t)
	leader := -1
	testkit.Until(20*time.Second, func() bool {
		stats, _ := zk.FLWSrvr(addrs, time.Second)
		for i, st := range stats {
			if st != nil && st.Mode == zk.ModeLeader {
				leader = i
			}
		}
		return leader >= 0
	})
	if leader < 0 {
		t.Fatal("no leader elected")
	}
	var survivors []string
	for i, a := range addrs {
		if i != leader {
			survivors = append(survivors, a)
		}
	}
	c := connectZk(t, survivors[0])
	defer c.Close()

	var mu sync.Mutex
	var acked []string
	var lastErr error
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			p := fmt.Sprintf("/w-%d", i)
			_, err := c.Create(p, nil, 0, zk.WorldACL(zk.PermAll))
			mu.Lock()
			if err == nil {
				acked = append(acked, p)
			} else {
				lastErr = err
			}
			mu.Unlock()
		}
	})
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	testkit.Eventually(t, time.Minute, "200 acknowledged writes before the kill", func() bool { return count() >= 200 })
	if err := procs[leader].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed, before := time.Now(), count()
	// The write in flight at the kill may still succeed; the one after it proves the resumption.
	if !testkit.Until(20*time.Second, func() bool { return count() >= before+2 }) {
		mu.Lock()
		err := lastErr
		mu.Unlock()
		for i, p := range procs {
			if i != leader {
				t.Logf("server %d:\n%s", i+1, p.out.String())
			}
		}
		t.Fatalf("writes did not resume after the leader was killed (last error %v)", err)
	}
	resumed := time.Since(killed)
	close(stop)
	wg.Wait()
	t.Logf("writes resumed within %v of SIGKILL of the leader", resumed.Round(10*time.Millisecond))

	check := connectZk(t, survivors[1])
	defer check.Close()
	if _, err := check.Sync("/"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range acked {
		if ok, _, err := check.Exists(p); err != nil || !ok {
			t.Fatalf("acknowledged %s missing after the leader's SIGKILL: %v %v", p, ok, err)
		}
	}
	if lastErr != nil && !errors.Is(lastErr, zk.ErrConnectionClosed) && !errors.Is(lastErr, zk.ErrNoServer) {
		t.Logf("last write error during failover: %v", lastErr)
	}
}
