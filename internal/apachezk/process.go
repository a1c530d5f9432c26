package apachezk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// StopGrace is how long Stop waits after SIGTERM before it sends SIGKILL.
const StopGrace = 15 * time.Second

// pollInterval is how often WaitReady asks the server again.
const pollInterval = 25 * time.Millisecond

// ErrNotRunning reports an operation that needs a running server on one that has exited or was
// stopped.
var ErrNotRunning = errors.New("apachezk: server not running")

// ErrRunning reports a Restart of a server that is still running.
var ErrRunning = errors.New("apachezk: server still running")

// Process is one ZooKeeper server: the JVM this process started, and its files. Its methods are
// safe for concurrent use. Stop, Kill and Restart are serialised.
type Process struct {
	cfg  ServerConfig
	java string

	life sync.Mutex // held by Stop, Kill and Restart for their whole run
	mu   struct {
		sync.Mutex
		run *launch // the latest launch
	}
}

// launch is one start of the JVM. Its goroutine, started with it, waits for the process and
// closes done when it has exited and been reaped.
type launch struct {
	cmd  *exec.Cmd
	at   time.Time     // just before the exec
	done chan struct{} // closed once cmd.Wait returned
	err  error         // cmd.Wait's result; read it only after done is closed
}

// exited reports whether the launch's process has exited.
func (l *launch) exited() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the launch's process; a process already gone is not an error.
func (l *launch) signal(sig os.Signal) error {
	if err := l.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("apachezk: signal %v to pid %d: %w", sig, l.cmd.Process.Pid, err)
	}
	return nil
}

// Launch writes the server's configuration under cfg.Dir and starts its JVM in a session and
// process group of its own. It returns once the process is started; WaitReady waits until the
// server serves. The caller must Stop or Kill it.
func Launch(cfg ServerConfig) (*Process, error) {
	if err := Installed(); err != nil {
		return nil, err
	}
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	java, err := javaPath()
	if err != nil {
		return nil, fmt.Errorf("apachezk: java: %w", err)
	}
	if err := cfg.writeFiles(); err != nil {
		return nil, err
	}
	p := &Process{cfg: cfg, java: java}
	if err := p.start(); err != nil {
		return nil, err
	}
	return p, nil
}

// start launches the JVM on the files already written, with its output appended to
// logs/zookeeper.out.
func (p *Process) start() error {
	out, err := os.OpenFile(p.outPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("apachezk: %w", err)
	}
	// The child has its own copy of the descriptor once started.
	defer out.Close()
	argv := p.cfg.command(p.java)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = p.cfg.Dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	l := &launch{cmd: cmd, done: make(chan struct{})}
	l.at = time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("apachezk: start %s: %w", argv[0], err)
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

// current returns the latest launch.
func (p *Process) current() *launch {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.run
}

// PID returns the process id of the latest launch (the JVM's, since Wrap execs in place).
func (p *Process) PID() int { return p.current().cmd.Process.Pid }

// Launched returns when the latest launch started: the moment just before the exec.
func (p *Process) Launched() time.Time { return p.current().at }

// ClientAddr returns the host:port clients connect to.
func (p *Process) ClientAddr() string { return p.cfg.ClientAddr }

// Dir returns the node directory, as an absolute path.
func (p *Process) Dir() string { return p.cfg.Dir }

// Running reports whether the latest launch's process has not exited yet. A paused server is
// running.
func (p *Process) Running() bool { return !p.current().exited() }

// Stop sends SIGTERM (and SIGCONT, so that a paused server can act on it), then SIGKILL if the
// server has not exited after StopGrace, and returns once the process has exited. Stopping a
// server that is not running does nothing.
func (p *Process) Stop() error {
	p.life.Lock()
	defer p.life.Unlock()
	l := p.current()
	if l.exited() {
		return nil
	}
	if err := errors.Join(l.signal(syscall.SIGTERM), l.signal(syscall.SIGCONT)); err != nil {
		return err
	}
	grace := time.NewTimer(StopGrace)
	defer grace.Stop()
	select {
	case <-l.done:
		return nil
	case <-grace.C:
	}
	if err := l.signal(syscall.SIGKILL); err != nil {
		return err
	}
	<-l.done
	return nil
}

// Kill sends SIGKILL and returns once the process has exited. Killing a server that is not
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

// Pause stops the server's process with SIGSTOP: it keeps its sockets but answers nothing until
// Resume.
func (p *Process) Pause() error { return p.signalRunning(syscall.SIGSTOP) }

// Resume continues a paused server with SIGCONT.
func (p *Process) Resume() error { return p.signalRunning(syscall.SIGCONT) }

func (p *Process) signalRunning(sig os.Signal) error {
	l := p.current()
	if l.exited() {
		return ErrNotRunning
	}
	return l.signal(sig)
}

// Restart launches the server again on the same files (configuration and data) after it was
// killed, stopped or exited by itself. Like Launch it returns at once; wait with WaitReady.
func (p *Process) Restart() error {
	p.life.Lock()
	defer p.life.Unlock()
	if !p.current().exited() {
		return ErrRunning
	}
	return p.start()
}

// ExitError is WaitReady's error when the server's process exited before it was ready.
type ExitError struct {
	Addr string // the server's client address
	PID  int
	Err  error // how the process ended (cmd.Wait's error; nil for a zero exit status)
	// Out and Log are the last lines of logs/zookeeper.out (the JVM's own output) and of
	// logs/zookeeper.log (the server's log, where ZooKeeper reports why it gave up).
	Out, Log string
}

func (e *ExitError) Error() string {
	how := "exit status 0"
	if e.Err != nil {
		how = e.Err.Error()
	}
	return fmt.Sprintf("apachezk: server %s (pid %d) exited before it was ready (%s)\nzookeeper.out ends:\n%s\nzookeeper.log ends:\n%s",
		e.Addr, e.PID, how, e.Out, e.Log)
}

func (e *ExitError) Unwrap() error { return e.Err }

// WaitReady waits until the server serves: a standalone server answers ruok with imok and its
// srvr reports Mode standalone, an ensemble member's srvr reports Mode leader or follower. Wait
// for it before connecting: while ZooKeeper starts (loading its data, say) it accepts
// connections but may leave a session's handshake unanswered until the client times out. It returns an *ExitError at once if
// the process exits first, and ctx's error (with the last reply) if ctx ends first.
func (p *Process) WaitReady(ctx context.Context) error {
	l := p.current()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	var last string
	for {
		if l.exited() {
			return p.exitError(l)
		}
		ready, reply := p.ready(ctx)
		if ready {
			return nil
		}
		last = reply
		select {
		case <-ctx.Done():
			return fmt.Errorf("apachezk: server %s not ready (last reply %q): %w", p.cfg.ClientAddr, last, ctx.Err())
		case <-l.done:
			return p.exitError(l)
		case <-tick.C:
		}
	}
}

// ready asks the server once whether it serves, and returns the reply it got.
func (p *Process) ready(ctx context.Context) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if p.cfg.standalone() {
		out, err := FourLetterWord(ctx, p.cfg.ClientAddr, "ruok")
		if err != nil {
			return false, err.Error()
		}
		if out != "imok" {
			return false, out
		}
	}
	// A standalone server says imok as soon as it listens, before it serves requests (it
	// closes client connections until then), so srvr must report its mode too.
	out, err := FourLetterWord(ctx, p.cfg.ClientAddr, "srvr")
	if err != nil {
		return false, err.Error()
	}
	switch Mode(out) {
	case "leader", "follower":
		return true, out
	case "standalone":
		return p.cfg.standalone(), out
	}
	return false, out
}

// Mode returns the Mode line's value from a srvr or stat reply ("leader", "follower",
// "standalone", ...), or "" if the reply has none.
func Mode(srvr string) string {
	for line := range strings.SplitSeq(srvr, "\n") {
		if m, ok := strings.CutPrefix(line, "Mode: "); ok {
			return strings.TrimSpace(m)
		}
	}
	return ""
}

func (p *Process) exitError(l *launch) error {
	<-l.done
	return &ExitError{
		Addr: p.cfg.ClientAddr,
		PID:  l.cmd.Process.Pid,
		Err:  l.err,
		Out:  tail(p.outPath(), 20),
		Log:  tail(filepath.Join(p.cfg.Dir, "logs", "zookeeper.log"), 20),
	}
}

func (p *Process) outPath() string { return filepath.Join(p.cfg.Dir, "logs", "zookeeper.out") }

// tail returns the last n lines of a file (from its last 8 KiB), or a note why it cannot.
func tail(name string, n int) string {
	f, err := os.Open(name)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	defer f.Close()
	const window = 8 << 10
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

// FourLetterWord sends a four-letter word (ruok, srvr, mntr, ...) to the server at addr and
// returns its whole reply. ctx bounds the dial and the exchange.
func FourLetterWord(ctx context.Context, addr, word string) (string, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("apachezk: %s to %s: %w", word, addr, err)
	}
	defer c.Close()
	if deadline, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(deadline)
	}
	// Once ctx ends, a deadline in the past fails the pending read or write.
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := io.WriteString(c, word); err != nil {
		return "", fmt.Errorf("apachezk: %s to %s: %w", word, addr, errors.Join(ctx.Err(), err))
	}
	out, err := io.ReadAll(c)
	if err != nil {
		return string(out), fmt.Errorf("apachezk: %s to %s: %w", word, addr, errors.Join(ctx.Err(), err))
	}
	return string(out), nil
}
