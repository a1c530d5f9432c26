package child

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(out)
		if strings.Count(string(b), "hello") >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %d-th hello in the output:\n%s", n, b)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
