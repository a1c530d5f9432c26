package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkd-io/zkd/internal/testkit"
)

// buildZkd builds the binary once per test binary run.
var buildZkd = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "zkd-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "zkd")
	// -buildvcs=auto stamps the revision in a checkout even where GOFLAGS turns it off.
	out, err := exec.Command("go", "build", "-buildvcs=auto", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v: %s", err, out)
	}
	return bin, nil
})

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// zkdProcess is a running zkd binary.
type zkdProcess struct {
	cmd *exec.Cmd
	out *syncBuffer
}

// syncBuffer collects a process's output; tests read it while the process still writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startZkd(t *testing.T, args ...string) *zkdProcess {
	t.Helper()
	bin, err := buildZkd()
	if err != nil {
		t.Fatal(err)
	}
	p := &zkdProcess{cmd: exec.Command(bin, args...), out: &syncBuffer{}}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	})
	return p
}

// waitRuok polls addr with ruok until the server answers imok.
func waitRuok(t *testing.T, addr string, p *zkdProcess) {
	t.Helper()
	if testkit.Until(20*time.Second, func() bool {
		ok := zk.FLWRuok([]string{addr}, time.Second)
		return len(ok) == 1 && ok[0]
	}) {
		return
	}
	t.Fatalf("zkd at %s never answered ruok; output:\n%s", addr, p.out.String())
}

func connectZk(t *testing.T, addr string) *zk.Conn {
	t.Helper()
	c, ev, err := zk.Connect([]string{addr}, 5*time.Second, zk.WithLogInfo(false), zk.WithLogger(quietLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for c.State() != zk.StateHasSession {
		select {
		case <-ev:
		case <-deadline:
			t.Fatal("no session")
		}
	}
	return c
}

func TestVersion(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"version"}, &out, &out); code != 0 || !strings.HasPrefix(out.String(), "zkd 3.9.5-zkd") {
		t.Errorf("zkd version = %d %q", code, out.String())
	}
}

// `zkd version` and `zkd -version` print the build the binary really is: in a checkout, the
// revision go build stamped and its commit time, not a constant.
func TestVersionShowsTheBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin, err := buildZkd()
	if err != nil {
		t.Fatal(err)
	}
	sub, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	flagged, err := exec.Command(bin, "-version").Output()
	if err != nil || !bytes.Equal(sub, flagged) {
		t.Fatalf("zkd -version = %q, %v; want what zkd version says, %q", flagged, err, sub)
	}
	if !strings.HasPrefix(string(sub), "zkd 3.9.5-zkd") || !strings.Contains(string(sub), "module github.com/zkd-io/zkd") {
		t.Fatalf("zkd version = %q", sub)
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout (%v): no revision to compare", err)
	}
	if want := "revision " + strings.TrimSpace(string(head)) + ", committed "; !strings.Contains(string(sub), want) {
		t.Fatalf("zkd version = %q; want %q", sub, want)
	}
	usage, _ := exec.Command(bin, "-h").CombinedOutput()
	if !strings.Contains(string(usage), "zkd version") {
		t.Fatalf("zkd -h does not list the subcommands:\n%s", usage)
	}
}

func TestBadConfigStopsStartup(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "zoo.cfg")
	if err := os.WriteFile(cfg, []byte("dataDir="+dir+"\nclientPort=2181\ntickTime=-5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if code := run([]string{"-config", cfg}, &out, &out); code != 1 || !strings.Contains(out.String(), "tickTime") {
		t.Errorf("bad tickTime: exit %d, output %q; want exit 1 naming tickTime", code, out.String())
	}
}

// Kill -9 of a standalone zkd loses no acknowledged write.
func TestKill9LosesNoAcknowledgedWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	addr := freePort(t)
	args := []string{"-data", dir, "-addr", addr, "-admin", "off"}
	p := startZkd(t, args...)
	waitRuok(t, addr, p)
	c := connectZk(t, addr)

	var mu sync.Mutex
	var acked []string
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				path := fmt.Sprintf("/k-%d-%d", w, i)
				if _, err := c.Create(path, []byte(path), 0, zk.WorldACL(zk.PermAll)); err != nil {
					return
				}
				mu.Lock()
				acked = append(acked, path)
				mu.Unlock()
			}
		})
	}
	testkit.Until(20*time.Second, func() bool { // the test goes on with what was acknowledged by then
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 300
	})
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
	close(done)
	wg.Wait()
	c.Close()
	mu.Lock()
	want := append([]string(nil), acked...)
	mu.Unlock()
	if len(want) < 300 {
		t.Fatalf("only %d writes acknowledged before the kill", len(want))
	}

	p2 := startZkd(t, args...)
	waitRuok(t, addr, p2)
	c2 := connectZk(t, addr)
	defer c2.Close()
	for _, path := range want {
		data, _, err := c2.Get(path)
		if err != nil || string(data) != path {
			t.Fatalf("after kill -9 and restart, acknowledged %s: %q, %v", path, data, err)
		}
	}
	t.Logf("%d acknowledged writes survived kill -9", len(want))
}

// quietLogger keeps go-zookeeper's reconnect chatter out of test output.
type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

// SIGHUP stops zkd the way SIGTERM does: a graceful shutdown with exit status 0 and nothing
// acknowledged lost, where Go's default would end the process on the spot.
func TestSIGHUPShutsDownGracefully(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	addr := freePort(t)
	args := []string{"-data", dir, "-addr", addr, "-admin", "off"}
	p := startZkd(t, args...)
	waitRuok(t, addr, p)
	c := connectZk(t, addr)
	if _, err := c.Create("/kept", []byte("x"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("zkd after SIGHUP: %v; output:\n%s", err, p.out.String())
	}
	if out := p.out.String(); !strings.Contains(out, `msg="shutting down" signal=hangup`) || !strings.Contains(out, "server stopped") {
		t.Fatalf("no graceful shutdown logged:\n%s", out)
	}
	p2 := startZkd(t, args...)
	waitRuok(t, addr, p2)
	c2 := connectZk(t, addr)
	defer c2.Close()
	if data, _, err := c2.Get("/kept"); err != nil || string(data) != "x" {
		t.Fatalf("after SIGHUP and restart: %q, %v", data, err)
	}
}
