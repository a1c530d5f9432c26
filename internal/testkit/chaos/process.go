package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/zkd-io/zkd/internal/testkit/apachezk"
	"github.com/zkd-io/zkd/internal/testkit/child"
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

// zkdProcess is a zkd binary started under a command prefix (ip netns exec NS) that execs it in
// place, with its output appended to a log file; internal/testkit/child does the process control.
type zkdProcess struct {
	*child.Process
	log  string // stdout and stderr, appended across restarts
	addr string // client address, for WaitReady
}

// startZkd starts a zkd process; argv is the whole command line, prefix included.
func startZkd(argv []string, dir, logPath, addr string) (*zkdProcess, error) {
	// Killed if the test dies (Sweep catches what escapes).
	c, err := child.Start(child.Config{Argv: argv, Dir: dir, Output: logPath, Banner: true, KillWithParent: true})
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	return &zkdProcess{Process: c, log: logPath, addr: addr}, nil
}

// Stop sends SIGTERM (and SIGCONT, for a paused process), then SIGKILL after 15 seconds.
func (p *zkdProcess) Stop() error { return p.Process.Stop(15 * time.Second) }

// WaitReady waits until srvr reports Mode leader or follower, or the process exits.
func (p *zkdProcess) WaitReady(ctx context.Context) error {
	exited, how := p.Exited()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		select {
		case <-exited:
			return fmt.Errorf("chaos: zkd %s (pid %d) exited before it was ready (%v); log %s ends:\n%s",
				p.addr, p.PID(), how(), p.log, child.Tail(p.log, 20))
		default:
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
