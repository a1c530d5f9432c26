package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/zkd-io/zkd/internal/apachezk"
)

// process is one server process the test started and controls by PID: a zkd process here, or
// an *apachezk.Process.
type process interface {
	PID() int
	Running() bool
	Kill() error
	Pause() error
	Resume() error
	Restart() error
	Stop() error
	WaitReady(ctx context.Context) error
}

var (
	_ process = (*zkdProcess)(nil)
	_ process = (*apachezk.Process)(nil)
)

// errRunning reports a Restart of a process that still runs.
var errRunning = errors.New("chaos: process still running")

// zkdProcess is a zkd binary started under a command prefix (ip netns exec NS) that execs it in
// place, with its output appended to a log file.
type zkdProcess struct {
	argv []string
	dir  string
	log  string // stdout and stderr, appended across restarts
	addr string // client address, for WaitReady

	life sync.Mutex // serialises Stop, Kill and Restart
	mu   struct {
		sync.Mutex
		run *launch
	}
}

// launch is one start of a process; its goroutine reaps it and closes done.
type launch struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // cmd.Wait's result, once done is closed
}

func (l *launch) exited() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

func (l *launch) signal(sig syscall.Signal) error {
	if err := l.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("chaos: signal %v to pid %d: %w", sig, l.cmd.Process.Pid, err)
	}
	return nil
}

// startZkd starts a zkd process; argv is the whole command line, prefix included.
func startZkd(argv []string, dir, logPath, addr string) (*zkdProcess, error) {
	p := &zkdProcess{argv: argv, dir: dir, log: logPath, addr: addr}
	if err := p.start(); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *zkdProcess) start() error {
	out, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	defer out.Close()
	fmt.Fprintf(out, "=== chaos: starting at %s\n", time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Dir = p.dir
	cmd.Stdout, cmd.Stderr = out, out
	// Its own session, so that a terminal's signals do not reach it; and killed if this process
	// dies (Sweep catches what escapes).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	l := &launch{cmd: cmd, done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("chaos: start %s: %w", p.argv[0], err)
	}
	go func() {
		l.err = cmd.Wait()
		close(l.done)
	}()
	p.mu.Lock()
	p.mu.run = l
	p.mu.Unlock()
	return nil
}

func (p *zkdProcess) current() *launch {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.run
}

// PID returns the PID of the latest start (zkd's own: the prefix execs in place).
func (p *zkdProcess) PID() int { return p.current().cmd.Process.Pid }

// Running reports whether the latest start has not exited; a paused process is running.
func (p *zkdProcess) Running() bool { return !p.current().exited() }

// Kill sends SIGKILL and waits for the process to be reaped.
func (p *zkdProcess) Kill() error {
	p.life.Lock()
	defer p.life.Unlock()
	l := p.current()
	if l.exited() {
		return nil
	}
	if err := l.signal(syscall.SIGKILL); err != nil {
		return err
	}
	<-l.done
	return nil
}

// Stop sends SIGTERM (and SIGCONT, for a paused process), then SIGKILL after 15 seconds.
func (p *zkdProcess) Stop() error {
	p.life.Lock()
	defer p.life.Unlock()
	l := p.current()
	if l.exited() {
		return nil
	}
	if err := errors.Join(l.signal(syscall.SIGTERM), l.signal(syscall.SIGCONT)); err != nil {
		return err
	}
	t := time.NewTimer(15 * time.Second)
	defer t.Stop()
	select {
	case <-l.done:
		return nil
	case <-t.C:
	}
	if err := l.signal(syscall.SIGKILL); err != nil {
		return err
	}
	<-l.done
	return nil
}

// Pause stops the process with SIGSTOP.
func (p *zkdProcess) Pause() error { return p.current().signal(syscall.SIGSTOP) }

// Resume continues it with SIGCONT.
func (p *zkdProcess) Resume() error { return p.current().signal(syscall.SIGCONT) }

// Restart starts the process again on the same files after it exited.
func (p *zkdProcess) Restart() error {
	p.life.Lock()
	defer p.life.Unlock()
	if !p.current().exited() {
		return errRunning
	}
	return p.start()
}

// WaitReady waits until srvr reports Mode leader or follower, or the process exits.
func (p *zkdProcess) WaitReady(ctx context.Context) error {
	l := p.current()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		if l.exited() {
			return fmt.Errorf("chaos: zkd %s (pid %d) exited before it was ready (%v); log %s ends:\n%s",
				p.addr, l.cmd.Process.Pid, l.err, p.log, tail(p.log, 20))
		}
		mode, err := srvrMode(ctx, p.addr)
		if err == nil && (mode == "leader" || mode == "follower") {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = "mode " + mode
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("chaos: zkd %s not ready (last: %s): %w", p.addr, last, ctx.Err())
		case <-tick.C:
		}
	}
}

// srvrMode asks addr for srvr and returns its Mode.
func srvrMode(ctx context.Context, addr string) (string, error) {
	out, err := srvr(ctx, addr)
	if err != nil {
		return "", err
	}
	return apachezk.Mode(out), nil
}

// srvr returns addr's srvr reply, within two seconds at most.
func srvr(ctx context.Context, addr string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return apachezk.FourLetterWord(ctx, addr, "srvr")
}

// tail returns the last n lines of a file (from its last 16 KiB).
func tail(name string, n int) string {
	b, err := readTail(name, 16<<10)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func readTail(name string, window int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	off := max(st.Size()-window, 0)
	b := make([]byte, st.Size()-off)
	_, err = f.ReadAt(b, off)
	return b, err
}

// buildZkd builds cmd/zkd from the module holding this package into dir, with -race when race
// is set, and returns the binary's path.
func buildZkd(ctx context.Context, dir string, race bool) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "zkd")
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	args = append(args, "./cmd/zkd")
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("chaos: go %v: %w\n%s", args, err, out)
	}
	return bin, nil
}

// moduleRoot finds the directory holding go.mod, upwards from the working directory (a test
// runs in its package's directory).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("chaos: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("chaos: go.mod not found above the working directory")
		}
		dir = parent
	}
}
