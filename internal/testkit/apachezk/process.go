package apachezk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/zkd-io/zkd/internal/testkit/child"
)

// StopGrace is how long Stop waits after SIGTERM before it sends SIGKILL.
const StopGrace = 15 * time.Second

// pollInterval is how often WaitReady asks the server again.
const pollInterval = 25 * time.Millisecond

// ErrNotRunning reports an operation that needs a running server on one that has exited or was
// stopped.
var ErrNotRunning = child.ErrNotRunning

// ErrRunning reports a Restart of a server that is still running.
var ErrRunning = child.ErrRunning

// Process is one ZooKeeper server: the JVM this process started (internal/testkit/child does the process
// control: PID, Running, Launched, Kill, Pause, Resume, Restart), and its files. Its methods are
// safe for concurrent use.
type Process struct {
	*child.Process
	cfg ServerConfig
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
	p := &Process{cfg: cfg}
	// The JVM's output is appended to logs/zookeeper.out.
	if p.Process, err = child.Start(child.Config{Argv: cfg.command(java), Dir: cfg.Dir, Output: p.outPath()}); err != nil {
		return nil, fmt.Errorf("apachezk: %w", err)
	}
	return p, nil
}

// ClientAddr returns the host:port clients connect to.
func (p *Process) ClientAddr() string { return p.cfg.ClientAddr }

// Dir returns the node directory, as an absolute path.
func (p *Process) Dir() string { return p.cfg.Dir }

// Stop sends SIGTERM (and SIGCONT, so that a paused server can act on it), then SIGKILL if the
// server has not exited after StopGrace, and returns once the process has exited. Stopping a
// server that is not running does nothing.
func (p *Process) Stop() error { return p.Process.Stop(StopGrace) }

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
// srvr reports Mode standalone, an ensemble member's srvr reports Mode leader or follower, and a
// secureClientPort in Extra accepts connections. Wait for it before connecting: while ZooKeeper
// starts (loading its data, say) it accepts connections but may leave a session's handshake
// unanswered until the client times out. It returns an *ExitError at once if the process exits
// first, and ctx's error (with the last reply) if ctx ends first.
func (p *Process) WaitReady(ctx context.Context) error {
	exited, _ := p.Exited()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	var last string
	for {
		select {
		case <-exited:
			return p.exitError()
		default:
		}
		ready, reply := p.ready(ctx)
		if ready {
			return nil
		}
		last = reply
		select {
		case <-ctx.Done():
			return fmt.Errorf("apachezk: server %s not ready (last reply %q): %w", p.cfg.ClientAddr, last, ctx.Err())
		case <-exited:
			return p.exitError()
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
	case "standalone":
		if !p.cfg.standalone() {
			return false, out
		}
	default:
		return false, out
	}
	// ZooKeeper binds its secure client port only after the plain one serves.
	if addr := p.cfg.secureAddr(); addr != "" {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return false, "secure client port: " + err.Error()
		}
		_ = c.Close()
	}
	return true, out
}

// secureAddr is the address of the secure client port the configuration asks for, or "".
func (c *ServerConfig) secureAddr() string {
	port := c.Extra["secureClientPort"]
	if port == "" {
		return ""
	}
	host := c.Extra["secureClientPortAddress"]
	if host == "" || host == "0.0.0.0" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
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

func (p *Process) exitError() error {
	_, how := p.Exited()
	return &ExitError{
		Addr: p.cfg.ClientAddr,
		PID:  p.PID(),
		Err:  how(),
		Out:  child.Tail(p.outPath(), 20),
		Log:  child.Tail(filepath.Join(p.cfg.Dir, "logs", "zookeeper.log"), 20),
	}
}

func (p *Process) outPath() string { return filepath.Join(p.cfg.Dir, "logs", "zookeeper.out") }

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
