package recipes

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// startContenders starts n contender processes with launch (contenderProcess), all connected
// before any starts its rounds, and returns a channel closed once every one has finished; their
// errors go to errs.
func startContenders(t *testing.T, ctx context.Context, errs chan<- error, n int, launch func() (func(), func() error)) <-chan struct{} {
	t.Helper()
	var starts []func()
	var wg sync.WaitGroup
	for range n {
		start, wait := launch()
		starts = append(starts, start)
		wg.Go(func() {
			if err := wait(); err != nil {
				errs <- err
			}
		})
	}
	for _, start := range starts {
		start()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	return done
}

// contenderProcess starts a contender process of another library (name args...), which prints
// READY once connected, starts its rounds when a line arrives on its standard input, and prints
// OK when it finished them. It returns once the process is READY, with a func that starts its
// rounds and a func that waits for it and returns an error unless it printed OK.
func contenderProcess(t *testing.T, ctx context.Context, name string, args ...string) (start func(), wait func() error) {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	for !strings.Contains(out.String(), "READY") {
		if ctx.Err() != nil {
			t.Fatalf("%s never connected: %s", filepath.Base(name), out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	start = func() { _, _ = in.Write([]byte("go\n")) }
	wait = func() error {
		if err := cmd.Wait(); err != nil || !strings.Contains(out.String(), "OK") {
			return fmt.Errorf("contender %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
		}
		return nil
	}
	return start, wait
}

// startLines starts cmd with its standard output piped (and its standard error too with
// mergeErr; otherwise it goes where cmd.Stderr says), stops it when the test ends, and returns a
// channel of the lines it prints, closed when its output ends.
func startLines(t *testing.T, cmd *exec.Cmd, mergeErr bool) <-chan string {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if mergeErr {
		cmd.Stderr = cmd.Stdout
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- strings.TrimSpace(sc.Text())
		}
	}()
	return lines
}

// lockedBuffer is a bytes.Buffer a process writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
