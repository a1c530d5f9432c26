package apachezk

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"
)

// Every Process's reaper goroutine must be gone once its server was stopped or killed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// needZooKeeper skips the test, naming what to install, when Apache ZooKeeper is missing.
func needZooKeeper(t *testing.T) {
	t.Helper()
	if err := Installed(); err != nil {
		t.Skip(err)
	}
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// launchT starts a server that the test stops when it ends, whatever happens.
func launchT(t *testing.T, cfg ServerConfig) *Process {
	t.Helper()
	p, err := Launch(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// startStandalone launches a standalone server on a free loopback port and waits until it is
// ready, picking another port if the first was taken in between.
func startStandalone(t *testing.T, dir string) *Process {
	t.Helper()
	for attempt := 0; ; attempt++ {
		ports, err := FreePorts(1)
		if err != nil {
			t.Fatal(err)
		}
		p := launchT(t, ServerConfig{Dir: dir, ClientAddr: fmt.Sprintf("127.0.0.1:%d", ports[0])})
		err = p.WaitReady(testCtx(t, 60*time.Second))
		var exit *ExitError
		if errors.As(err, &exit) && attempt < 3 {
			t.Logf("server exited, trying another port: %v", err)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
}

type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

// connect opens a go-zookeeper session and waits until it is established.
func connect(t *testing.T, addrs ...string) *zk.Conn {
	t.Helper()
	c, events, err := zk.Connect(addrs, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(quietLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx := testCtx(t, 30*time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return c
			}
		case <-ctx.Done():
			t.Fatalf("no session with %v: %v", addrs, ctx.Err())
		}
	}
}

func TestZooCfg(t *testing.T) {
	cfg, err := ServerConfig{
		Dir:        "/n1",
		ClientAddr: "127.0.0.1:2181",
		ID:         1,
		Servers:    []string{"server.1=127.0.0.1:2888:3888", "server.2=127.0.0.1:2889:3889"},
		Extra:      map[string]string{"tickTime": "500", "snapCount": "1000", "extendedTypesEnabled": "true"},
	}.validate()
	if err != nil {
		t.Fatal(err)
	}
	want := `tickTime=500
initLimit=10
syncLimit=5
dataDir=/n1/data
dataLogDir=/n1/txnlog
clientPortAddress=127.0.0.1
clientPort=2181
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=*
forceSync=yes
extendedTypesEnabled=true
snapCount=1000
server.1=127.0.0.1:2888:3888
server.2=127.0.0.1:2889:3889
`
	if got := cfg.zooCfg(); got != want {
		t.Errorf("zoo.cfg =\n%s\nwant\n%s", got, want)
	}
	cfg.Wrap = []string{"ip", "netns", "exec", "ns1"}
	got := strings.Join(cfg.command("/usr/bin/java"), " ")
	wantCmd := "ip netns exec ns1 /usr/bin/java -Dzookeeper.log.dir=/n1/logs -Dzookeeper.log.file=zookeeper.log -Xmx1000m " +
		"-XX:+HeapDumpOnOutOfMemoryError -XX:HeapDumpPath=/n1/logs -XX:OnOutOfMemoryError=kill -9 %p " +
		"-cp /n1/conf:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar:" +
		"/usr/share/java/netty-codec.jar:/usr/share/java/netty-resolver.jar " +
		"org.apache.zookeeper.server.quorum.QuorumPeerMain /n1/conf/zoo.cfg"
	if got != wantCmd {
		t.Errorf("command = %s\nwant      %s", got, wantCmd)
	}
	// An AdminServer needs the servlet API on the classpath.
	cfg.Extra["admin.enableServer"] = "true"
	if cp := strings.Join(cfg.classpath(), ":"); !strings.HasSuffix(cp, ":/usr/share/java/servlet-api.jar") {
		t.Errorf("classpath with the AdminServer on = %s; want the servlet API last", cp)
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []ServerConfig{
		{ClientAddr: "127.0.0.1:2181"},
		{Dir: "d", ClientAddr: "2181"},
		{Dir: "d", ClientAddr: "127.0.0.1:0"},
		{Dir: "d", ClientAddr: "127.0.0.1:2181", Servers: []string{"server.1=127.0.0.1:1:2"}},
		{Dir: "d", ClientAddr: "127.0.0.1:2181", ID: 1, Servers: []string{"127.0.0.1:1:2"}},
		{Dir: "d", ClientAddr: "127.0.0.1:2181", Extra: map[string]string{"a": "b\nc=d"}},
		{Dir: "d", ClientAddr: "127.0.0.1:2181", HeapMB: -1},
	} {
		if _, err := c.validate(); err == nil {
			t.Errorf("validate(%+v) = nil; want an error", c)
		}
	}
	c, err := ServerConfig{Dir: "d", ClientAddr: "127.0.0.1:2181"}.validate()
	if err != nil || !filepath.IsAbs(c.Dir) || c.HeapMB != DefaultHeapMB {
		t.Errorf("validate = %+v, %v; want an absolute Dir and HeapMB %d", c, err, DefaultHeapMB)
	}
}

func TestFreePorts(t *testing.T) {
	ports, err := FreePorts(9)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p <= 0 || seen[p] {
			t.Fatalf("FreePorts(9) = %v; want 9 distinct ports", ports)
		}
		seen[p] = true
	}
}

// TestStandalone runs one server through its whole life: ready, a znode written, SIGKILL,
// a restart on the same files that still holds the znode, pause and resume, stop.
func TestStandalone(t *testing.T) {
	needZooKeeper(t)
	dir := t.TempDir()
	p := startStandalone(t, dir)
	if p.Dir() != dir {
		t.Errorf("Dir() = %s; want %s", p.Dir(), dir)
	}
	for _, f := range []string{"conf/zoo.cfg", "conf/log4j.properties", "logs/zookeeper.log"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	if out, err := FourLetterWord(testCtx(t, 5*time.Second), p.ClientAddr(), "ruok"); err != nil || out != "imok" {
		t.Fatalf("ruok = %q, %v; want imok", out, err)
	}
	if out, err := FourLetterWord(testCtx(t, 5*time.Second), p.ClientAddr(), "srvr"); err != nil || Mode(out) != "standalone" {
		t.Fatalf("srvr = %q, %v; want Mode: standalone", out, err)
	}

	c := connect(t, p.ClientAddr())
	if _, err := c.Create("/kept", []byte("across a kill"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	c.Close()

	pid, launched := p.PID(), p.Launched()
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if p.Running() {
		t.Fatal("Running() after Kill")
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("pid %d still exists after Kill (zombie or alive): %v", pid, err)
	}
	if err := p.Pause(); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Pause after Kill = %v; want ErrNotRunning", err)
	}
	if err := p.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := p.Restart(); !errors.Is(err, ErrRunning) {
		t.Errorf("Restart of a running server = %v; want ErrRunning", err)
	}
	if err := p.WaitReady(testCtx(t, 60*time.Second)); err != nil {
		t.Fatal(err)
	}
	if p.PID() == pid || !p.Launched().After(launched) {
		t.Errorf("after Restart: pid %d launched %v; was %d at %v", p.PID(), p.Launched(), pid, launched)
	}
	c = connect(t, p.ClientAddr())
	if data, _, err := c.Get("/kept"); err != nil || string(data) != "across a kill" {
		t.Fatalf("Get(/kept) after kill and restart = %q, %v; want the data written before", data, err)
	}
	c.Close()

	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	// A stopped JVM never answers: the kernel accepts the connection but nothing replies.
	if out, err := FourLetterWord(testCtx(t, 300*time.Millisecond), p.ClientAddr(), "ruok"); err == nil {
		t.Errorf("ruok to a paused server = %q; want no answer", out)
	}
	if err := p.Resume(); err != nil {
		t.Fatal(err)
	}
	if out, err := FourLetterWord(testCtx(t, 10*time.Second), p.ClientAddr(), "ruok"); err != nil || out != "imok" {
		t.Fatalf("ruok after Resume = %q, %v; want imok", out, err)
	}

	// Stop must work on a paused server too (SIGTERM is acted on once continued).
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(stopped); d >= StopGrace {
		t.Errorf("Stop of a paused server took %v; SIGTERM should have ended it", d)
	}
	if p.Running() {
		t.Fatal("Running() after Stop")
	}
	if err := p.Stop(); err != nil {
		t.Errorf("second Stop = %v; want nil", err)
	}
	if err := p.Kill(); err != nil {
		t.Errorf("Kill after Stop = %v; want nil", err)
	}
}

// TestWaitReadyReportsExit launches a server on a client port another listener holds: it
// exits, and WaitReady says so at once with the server's last words.
func TestWaitReadyReportsExit(t *testing.T) {
	needZooKeeper(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := launchT(t, ServerConfig{Dir: t.TempDir(), ClientAddr: l.Addr().String()})
	err = p.WaitReady(testCtx(t, 60*time.Second))
	var exit *ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("WaitReady on a taken port = %v; want an *ExitError", err)
	}
	if exit.PID != p.PID() || !strings.Contains(exit.Log, "Address already in use") {
		t.Errorf("ExitError = %+v; want pid %d and the bind failure in the log", exit, p.PID())
	}
}

// TestEnsemble starts three servers on loopback ports; they must elect exactly one leader and
// replicate a write.
func TestEnsemble(t *testing.T) {
	needZooKeeper(t)
	dir := t.TempDir()
	ports, err := FreePorts(9)
	if err != nil {
		t.Fatal(err)
	}
	var servers []string
	for i := range 3 {
		servers = append(servers, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", i+1, ports[3+i], ports[6+i]))
	}
	procs := make([]*Process, 3)
	for i := range 3 {
		procs[i] = launchT(t, ServerConfig{
			Dir:        filepath.Join(dir, fmt.Sprintf("n%d", i+1)),
			ClientAddr: fmt.Sprintf("127.0.0.1:%d", ports[i]),
			ID:         i + 1,
			Servers:    servers,
			HeapMB:     256,
		})
	}
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Go(func() { errs[i] = p.WaitReady(testCtx(t, 120*time.Second)) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	modes := map[string]int{}
	for _, p := range procs {
		out, err := FourLetterWord(testCtx(t, 5*time.Second), p.ClientAddr(), "srvr")
		if err != nil {
			t.Fatal(err)
		}
		modes[Mode(out)]++
	}
	if modes["leader"] != 1 || modes["follower"] != 2 {
		t.Fatalf("modes %v; want one leader and two followers", modes)
	}
	c := connect(t, procs[0].ClientAddr())
	if _, err := c.Create("/replicated", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	c2 := connect(t, procs[2].ClientAddr())
	if _, err := c2.Sync("/replicated"); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := c2.Exists("/replicated"); err != nil || !ok {
		t.Fatalf("Exists(/replicated) on another member = %v, %v; want true", ok, err)
	}
}
