package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkd-io/zkd/internal/testkit"
	"github.com/zkd-io/zkd/internal/testkit/apachezk"
	"github.com/zkd-io/zkd/internal/testkit/pyclient"
	"github.com/zkd-io/zkd/internal/testkit/zktest"
	"github.com/zkd-io/zkd/znode"
)

// The move of a three-server ensemble: stop ZooKeeper, import the member with the highest zxid
// into three zkd members with the same zoo.cfg lines, start them. A client whose connect string
// lists the three servers keeps its session, ephemerals and watches; the tree is the same; and
// the test reports how long writes were unavailable.
func TestImportEnsembleCutover(t *testing.T) {
	zktest.Require(t)
	if testing.Short() {
		t.Skip("runs three ZooKeeper and three zkd servers")
	}
	dir := t.TempDir()
	super := znode.DigestID("super", "pw")
	ports, err := apachezk.FreePorts(9)
	if err != nil {
		t.Fatal(err)
	}
	var servers, clients []string
	for i := range 3 {
		servers = append(servers, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", i+1, ports[3+i], ports[6+i]))
		clients = append(clients, fmt.Sprintf("127.0.0.1:%d", ports[i]))
	}
	cfgs := make([]apachezk.ServerConfig, 3)
	for i := range 3 {
		cfgs[i] = apachezk.ServerConfig{
			Dir: filepath.Join(dir, fmt.Sprintf("zk%d", i+1)), ClientAddr: clients[i], ID: i + 1, Servers: servers, HeapMB: 256,
			Extra: map[string]string{"extendedTypesEnabled": "true", "snapCount": "40", "DigestAuthenticationProvider.superDigest": super},
		}
	}
	procs := zktest.LaunchAt(t, cfgs...)
	connect := strings.Join(clients, ",")
	live, liveEv := sessionOf(t, connect, 30*time.Second)
	reattached := ridesThrough(t, live, liveEv)
	w, _ := sessionOf(t, connect, 30*time.Second)
	open := zk.WorldACL(zk.PermAll)
	for _, p := range []string{"/app", "/app/config", "/locks"} {
		if _, err := w.Create(p, []byte("v0"), 0, open); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 100 {
		if _, err := w.Create(fmt.Sprintf("/app/n%03d", i), []byte("x"), 0, zk.DigestACL(zk.PermRead, "bob", "pw")); err != nil {
			t.Fatal(err)
		}
	}
	mine, err := live.Create("/locks/mine-", []byte("held"), zk.FlagEphemeral|zk.FlagSequence, open)
	if err != nil {
		t.Fatal(err)
	}
	_, _, watch, err := live.GetW("/app/config")
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	// Read the tree from each member in turn after a sync, so that all have everything.
	reader := superReader(t, connect)
	if _, err := reader.Sync("/"); err != nil {
		t.Fatal(err)
	}
	want := zktest.DumpTree(t, reader)
	reader.Close()

	// The move. Write unavailability runs from stopping ZooKeeper to the first write zkd takes.
	stopped := time.Now()
	for _, p := range procs {
		if err := p.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	var from []string
	for i := range 3 {
		zd := filepath.Join(dir, fmt.Sprintf("zk%d", i+1))
		from = append(from, "-from", filepath.Join(zd, "data"), "-from-log", filepath.Join(zd, "txnlog"))
	}
	for i := range 3 {
		data := filepath.Join(dir, fmt.Sprintf("zkd%d", i+1))
		if err := os.MkdirAll(data, 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(data, "myid"), []byte(fmt.Sprint(i+1)), 0o600); err != nil {
			t.Fatal(err)
		}
		var cfg strings.Builder
		fmt.Fprintf(&cfg, "dataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\nextendedTypesEnabled=true\ntickTime=2000\nDigestAuthenticationProvider.superDigest=%s\n", data, ports[i], super)
		for _, s := range servers {
			cfg.WriteString(s + "\n")
		}
		cfgPath := filepath.Join(dir, fmt.Sprintf("zoo%d.cfg", i+1))
		if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		args := append(append([]string{"import"}, from...), "-data", data, "-config", cfgPath)
		if code := run(args, &out, &out); code != 0 {
			t.Fatalf("zkd import: exit %d\n%s", code, out.String())
		}
		if i == 0 {
			t.Log(strings.TrimSpace(out.String()))
		}
		startZkd(t, "-config", cfgPath)
	}
	imported := time.Now()
	c, _ := sessionOf(t, connect, 30*time.Second)
	if err := error(nil); !testkit.Until(time.Until(stopped.Add(90*time.Second)), func() bool {
		_, err = c.Create("/after-the-move", nil, 0, open)
		return err == nil
	}) {
		t.Fatalf("no write accepted after the move: %v", err)
	}
	t.Logf("writes unavailable for %v (ZooKeeper stop and import %v, zkd start to first write %v)",
		time.Since(stopped).Round(time.Millisecond), imported.Sub(stopped).Round(time.Millisecond), time.Since(imported).Round(time.Millisecond))

	reattached()
	if _, st, err := live.Get(mine); err != nil || st.EphemeralOwner != live.SessionID() {
		t.Fatalf("the live session's ephemeral %s after the move: %v %+v", mine, err, st)
	}
	if _, err := c.Set("/app/config", []byte("v1"), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-watch:
		if e.Type != zk.EventNodeDataChanged {
			t.Errorf("watch fired with %+v", e)
		}
	case <-time.After(30 * time.Second):
		t.Error("the watch set on ZooKeeper never fired on zkd")
	}
	if err := c.Delete("/after-the-move", -1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Set("/app/config", []byte("v0"), -1); err != nil {
		t.Fatal(err)
	}
	r2 := superReader(t, connect)
	got := zktest.DumpTree(t, r2)
	// The two writes after the move changed what they touched; /zookeeper/config describes the
	// running membership in zkd's words (docs/differences.md); the rest is ZooKeeper's tree.
	if g := got["/zookeeper/config"].Data; !bytes.HasPrefix(g, bytes.Split(want["/zookeeper/config"].Data, []byte("version="))[0]) {
		t.Errorf("/zookeeper/config on zkd %q does not list ZooKeeper's members %q", g, want["/zookeeper/config"].Data)
	}
	for _, p := range []string{"/", "/app/config", "/zookeeper/config"} {
		delete(got, p)
		delete(want, p)
	}
	zktest.DiffTrees(t, "tree against ZooKeeper's", got, want)
}

// cutoverClient is a client process (kazoo or the Java client) that rides through the move:
// see testdata/cutover_client.py and testdata/CutoverClient.java.
type cutoverClient struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

func startCutoverClient(t *testing.T, name string, argv ...string) *cutoverClient {
	t.Helper()
	c := &cutoverClient{name: name, cmd: exec.Command(argv[0], argv[1:]...), lines: make(chan string, 16)}
	var err error
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	c.cmd.Stderr = &stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		_ = c.cmd.Wait()
		if t.Failed() {
			t.Logf("%s stderr:\n%s", name, stderr.String())
		}
	})
	go func() { // ends when the process's stdout closes
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	return c
}

// line waits for the client's next line that starts with one of prefixes.
func (c *cutoverClient) line(t *testing.T, prefixes ...string) string {
	t.Helper()
	timeout := time.After(120 * time.Second)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatalf("%s exited before printing %v", c.name, prefixes)
			}
			for _, p := range prefixes {
				if strings.HasPrefix(l, p) {
					return l
				}
			}
		case <-timeout:
			t.Fatalf("%s printed no %v", c.name, prefixes)
		}
	}
}

// kazoo and the Java client, connected to ZooKeeper with a connect string that also lists
// zkd's address, ride through the move to zkd with their sessions, ephemerals and watches.
func TestImportKeepsKazooAndJavaSessions(t *testing.T) {
	zktest.Require(t)
	py := pyclient.KazooPython(t)
	java, err := exec.LookPath("java")
	if err != nil {
		t.Skip("no java")
	}
	dir := t.TempDir()
	ports, err := apachezk.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	// zkd takes over on another address; the clients' connect string lists both.
	addr, zkdAddr := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	both := addr + "," + zkdAddr
	zkDir := filepath.Join(dir, "zookeeper")
	zkp := zktest.LaunchAt(t, apachezk.ServerConfig{Dir: zkDir, ClientAddr: addr})[0]
	setup, _ := sessionOf(t, addr, 30*time.Second)
	if _, err := setup.Create("/watched", []byte("v0"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	setup.Close()
	src, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	clients := []*cutoverClient{
		startCutoverClient(t, "kazoo", py, filepath.Join(src, "cutover_client.py"), both),
		startCutoverClient(t, "java", java, "-cp", apachezk.Jar, filepath.Join(src, "CutoverClient.java"), both),
	}
	for _, c := range clients {
		t.Logf("%s: %s", c.name, c.line(t, "READY", "FAIL"))
	}

	if err := zkp.Stop(); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "zkd")
	var out bytes.Buffer
	if code := run([]string{"import", "-from", filepath.Join(zkDir, "data"), "-from-log", filepath.Join(zkDir, "txnlog"), "-data", data}, &out, &out); code != 0 {
		t.Fatalf("zkd import: exit %d\n%s", code, out.String())
	}
	cfg := filepath.Join(dir, "zoo.cfg")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("dataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n", data, ports[1])), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startZkd(t, "-config", cfg, "-log-level", "info")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("ZKDLOG:\n%s", p.out.String())
		}
	})
	waitRuok(t, zkdAddr, p)
	c, _ := sessionOf(t, zkdAddr, 30*time.Second)
	if _, err := c.Set("/watched", []byte("v1"), -1); err != nil {
		t.Fatal(err)
	}
	for _, cl := range clients {
		if _, err := io.WriteString(cl.stdin, "CHECK\n"); err != nil {
			t.Fatal(err)
		}
	}
	for _, cl := range clients {
		if got := cl.line(t, "OK", "FAIL"); got != "OK" {
			t.Errorf("%s after the move: %s", cl.name, got)
		}
	}
}
