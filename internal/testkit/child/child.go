// Package child starts and controls processes for test and tool machinery (internal/testkit/apachezk's
// ZooKeeper servers, internal/testkit/chaos's zkd servers): each runs in a session of its own, is
// signalled only by its PID, is reaped by a goroutine its Process owns, and can be started again
// on the same command line after it exited.
//
// It is never used by production code (internal/lint).
package child

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// ErrNotRunning reports a signal for a process that has exited.
var ErrNotRunning = errors.New("child: process not running")

// ErrRunning reports a Restart of a process that still runs.
var ErrRunning = errors.New("child: process still running")

// Config says what to run.
type Config struct {
	// Argv is the whole command line. A prefix that execs in place (ip netns exec NS) keeps
	// the PID the program's own.
	Argv []string
	// Dir is the working directory.
	Dir string
	// Output receives stdout and stderr, appended across starts.
	Output string
	// Banner writes a "=== starting at <time>" line to Output before each start.
	Banner bool
	// KillWithParent asks the kernel to SIGKILL the process if the thread that started it exits
	// (Pdeathsig). Leave it off when the starting code may run on a locked OS thread that ends.
	KillWithParent bool
}

// Process is the process Start started, and its later restarts. Its methods are safe for
// concurrent use; Stop, Kill and Restart are serialised.
type Process struct {
	cfg  Config
	life sync.Mutex // held by Stop, Kill and Restart for their whole run
	mu   struct {
		sync.Mutex
		run *launch // the latest start
	}
}

// launch is one start. Its goroutine waits for the process and closes done once it has exited
// and been reaped.
type launch struct {
	cmd  *exec.Cmd
	at   time.Time     // just before the exec
	done chan struct{} // closed once cmd.Wait returned
	err  error         // cmd.Wait's result; read it only after done is closed
}

func (l *launch) exited() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// signal sends sig; a process already gone is not an error.
func (l *launch) signal(sig os.Signal) error {
	if err := l.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("child: signal %v to pid %d: %w", sig, l.cmd.Process.Pid, err)
	}
	return nil
}

// Start starts cfg's command and returns at once.
func Start(cfg Config) (*Process, error) {
	p := &Process{cfg: cfg}
	if err := p.start(); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Process) start() error {
	out, err := os.OpenFile(p.cfg.Output, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("child: %w", err)
	}
	// The child has its own copy of the descriptor once started.
	defer out.Close()
	if p.cfg.Banner {
		fmt.Fprintf(out, "=== starting at %s\n", time.Now().Format(time.RFC3339Nano))
	}
	cmd := exec.Command(p.cfg.Argv[0], p.cfg.Argv[1:]...)
	cmd.Dir = p.cfg.Dir
	cmd.Stdout, cmd.Stderr = out, out
	// A session of its own, so that a terminal's signals do not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if p.cfg.KillWithParent {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	l := &launch{cmd: cmd, at: time.Now(), done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("child: start %s: %w", p.cfg.Argv[0], err)
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

func (p *Process) current() *launch {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.run
}

// PID returns the process id of the latest start.
func (p *Process) PID() int { return p.current().cmd.Process.Pid }

// Launched returns when the latest start happened: the moment just before the exec.
func (p *Process) Launched() time.Time { return p.current().at }

// Running reports whether the latest start has not exited. A paused process is running.
func (p *Process) Running() bool { return !p.current().exited() }

// Exited returns a channel closed once the latest start has exited and been reaped, and a func
// that then returns how it ended (cmd.Wait's error, nil for exit status 0).
func (p *Process) Exited() (<-chan struct{}, func() error) {
	l := p.current()
	return l.done, func() error { <-l.done; return l.err }
}

// Stop sends SIGTERM (and SIGCONT, so that a paused process can act on it), then SIGKILL if the
// process has not exited after grace, and returns once it has exited. Stopping a process that
// is not running does nothing.
func (p *Process) Stop(grace time.Duration) error {
	p.life.Lock()
	defer p.life.Unlock()
	l := p.current()
	if l.exited() {
		return nil
	}
	if err := errors.Join(l.signal(syscall.SIGTERM), l.signal(syscall.SIGCONT)); err != nil {
		return err
	}
	t := time.NewTimer(grace)
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

// Kill sends SIGKILL and returns once the process has exited. Killing a process that is not
// running does nothing.
func (p *Process) Kill() error {
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

// Pause stops the process with SIGSTOP: it keeps its sockets but does nothing until Resume.
// It returns once every thread of the process has stopped: the kernel stops each thread as it
// next notices the signal, so a thread running on another CPU could otherwise still answer a
// request sent just after the signal.
func (p *Process) Pause() error {
	if err := p.signalRunning(syscall.SIGSTOP); err != nil {
		return err
	}
	l := p.current()
	deadline := time.Now().Add(pauseWait)
	for !allStopped(l.cmd.Process.Pid) {
		if l.exited() {
			return ErrNotRunning
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("child: pid %d: threads still running %v after SIGSTOP", l.cmd.Process.Pid, pauseWait)
		}
		time.Sleep(time.Millisecond) // poll /proc: the kernel offers no event for a stop
	}
	return nil
}

// pauseWait bounds how long Pause waits for all threads to stop.
const pauseWait = 10 * time.Second

// allStopped reports whether every thread of pid is in the stopped state (T), as
// /proc/PID/task/TID/stat says. A thread that is gone counts as stopped.
func allStopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return false
	}
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			continue
		}
		// The state follows the command name in parentheses, which may itself hold ") ".
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			return false
		}
		if st := b[i+2]; st != 'T' && st != 't' {
			return false
		}
	}
	return true
}

// Resume continues a paused process with SIGCONT.
func (p *Process) Resume() error { return p.signalRunning(syscall.SIGCONT) }

func (p *Process) signalRunning(sig os.Signal) error {
	l := p.current()
	if l.exited() {
		return ErrNotRunning
	}
	return l.signal(sig)
}

// Restart starts the command again after the process was killed, stopped or exited by itself.
// Like Start it returns at once.
func (p *Process) Restart() error {
	p.life.Lock()
	defer p.life.Unlock()
	if !p.current().exited() {
		return ErrRunning
	}
	return p.start()
}

// Tail returns the last n lines of a file (from its last 16 KiB), or a note why it cannot.
func Tail(name string, n int) string {
	f, err := os.Open(name)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	defer f.Close()
	const window = 16 << 10
	if st, err := f.Stat(); err == nil && st.Size() > window {
		_, _ = f.Seek(st.Size()-window, io.SeekStart)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
