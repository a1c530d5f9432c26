package child

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zkd-io/zkd/internal/testkit"
)

// A real process through its whole life: started, paused, resumed, killed, restarted under a new
// PID, stopped; signals to an exited process are refused, a restart of a running one too.
func TestProcessLife(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	p, err := Start(Config{Argv: []string{"sh", "-c", "echo hello; exec sleep 60"}, Output: out, Banner: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill() })
	waitFor(t, out, 1)
	if !p.Running() || p.Pause() != nil || p.Resume() != nil {
		t.Fatal("a running process did not take SIGSTOP and SIGCONT")
	}
	if err := p.Restart(); !errors.Is(err, ErrRunning) {
		t.Fatalf("Restart of a running process = %v; want ErrRunning", err)
	}
	first := p.PID()
	if err := p.Kill(); err != nil || p.Running() {
		t.Fatalf("Kill = %v, running %v", err, p.Running())
	}
	if _, how := p.Exited(); how() == nil {
		t.Fatal("a killed process exited with status 0")
	}
	if err := p.Pause(); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Pause after Kill = %v; want ErrNotRunning", err)
	}
	if err := p.Restart(); err != nil || p.PID() == first || !p.Running() {
		t.Fatalf("Restart = %v: pid %d (was %d), running %v", err, p.PID(), first, p.Running())
	}
	waitFor(t, out, 2)
	if err := p.Stop(10 * time.Second); err != nil || p.Running() {
		t.Fatalf("Stop = %v, running %v", err, p.Running())
	}
	b, _ := os.ReadFile(out)
	if strings.Count(string(b), "=== starting at") != 2 || strings.Count(string(b), "hello") != 2 {
		t.Fatalf("output of two starts, appended:\n%s", b)
	}
	if got := Tail(out, 1); got != "hello" {
		t.Fatalf("Tail = %q", got)
	}
}

// waitFor waits until the shell has written its n-th "hello" to the output file.
func waitFor(t *testing.T, out string, n int) {
	t.Helper()
	var b []byte
	if !testkit.Until(30*time.Second, func() bool {
		b, _ = os.ReadFile(out)
		return strings.Count(string(b), "hello") >= n
	}) {
		t.Fatalf("no %d-th hello in the output:\n%s", n, b)
	}
}

// Pause returns only once the process has stopped: a busy process is in the stopped state at
// once, and uses no CPU until Resume.
func TestPauseWaitsForTheStop(t *testing.T) {
	p, err := Start(Config{Argv: []string{"sh", "-c", "while :; do :; done"}, Output: filepath.Join(t.TempDir(), "out")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill() })
	for range 20 {
		if err := p.Pause(); err != nil {
			t.Fatal(err)
		}
		if !allStopped(p.PID()) {
			t.Fatal("Pause returned while a thread still ran")
		}
		before := cpuTicks(t, p.PID())
		time.Sleep(20 * time.Millisecond) // a span the stopped process must spend idle
		if after := cpuTicks(t, p.PID()); after != before {
			t.Fatalf("a paused process used CPU: %d ticks, then %d", before, after)
		}
		if err := p.Resume(); err != nil {
			t.Fatal(err)
		}
		if allStopped(p.PID()) {
			t.Fatal("still stopped after Resume")
		}
	}
}

// cpuTicks is the user plus system time of pid, in clock ticks, from /proc/PID/stat.
func cpuTicks(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	// After the name: state is field 0, utime field 11, stime field 12.
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}
