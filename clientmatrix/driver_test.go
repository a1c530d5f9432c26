package clientmatrix

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkd-io/zkd/internal/testkit/apachezk"
	"github.com/zkd-io/zkd/internal/testkit/pyclient"
)

// errHang is what a command that got no answer within its deadline returns.
var errHang = errors.New("no answer within the deadline")

// driver runs one client: do sends a command line and returns its one-line answer.
type driver interface {
	do(cmd string, within time.Duration) (string, error)
	stop()
}

// clientKind is one column of the matrix: how to start its driver, or why it cannot run here.
type clientKind struct {
	name  string
	start func() (driver, error)
	// missing says why the client is not installed here ("" when it is).
	missing string
	// readOnly: the client can ask for a read-only session.
	readOnly bool
}

// npmDir is where scripts/install-node-client.sh puts node-zookeeper-client.
func npmDir() string {
	if d := os.Getenv("ZKD_NPM_DIR"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "zkd-npm")
}

// javaClasspath is the Java client's classpath, Curator's jars included.
func javaClasspath() []string {
	return []string{apachezk.Jar, "/usr/share/java/curator-client.jar", "/usr/share/java/curator-framework.jar",
		"/usr/share/java/curator-recipes.jar", "/usr/share/java/guava.jar", "/usr/share/java/slf4j-nop.jar"}
}

// clients lists the matrix's columns in order, each with what it needs checked.
func clients() []clientKind {
	javaMissing := ""
	if err := apachezk.Installed(); err != nil {
		javaMissing = err.Error()
	}
	curatorMissing := javaMissing
	for _, jar := range javaClasspath()[1:] {
		if _, err := os.Stat(jar); err != nil && curatorMissing == "" {
			curatorMissing = jar + " is missing (apt-get install libcurator-framework-java libcurator-recipes-java)"
		}
	}
	kazooMissing := ""
	py, err := pyclient.Kazoo()
	if err != nil {
		kazooMissing = err.Error()
	}
	nodeMissing := ""
	if _, err := exec.LookPath("node"); err != nil {
		nodeMissing = "node is not installed"
	} else if _, err := os.Stat(filepath.Join(npmDir(), "node_modules", "node-zookeeper-client")); err != nil {
		nodeMissing = "node-zookeeper-client is not installed in " + npmDir() + " (run scripts/install-node-client.sh)"
	}
	cliMissing := ""
	if _, err := os.Stat(cliMt); err != nil {
		cliMissing = cliMt + " is missing (apt-get install zookeeper-bin)"
	}
	java := func(mode string) func() (driver, error) {
		return func() (driver, error) {
			return startProc(nil, "java", "-Xmx128m", "-XX:TieredStopAtLevel=1", "-cp", strings.Join(javaClasspath(), ":"),
				filepath.Join("testdata", "Driver.java"), mode)
		}
	}
	return []clientKind{
		{name: "Java 3.8", start: java("java"), missing: javaMissing, readOnly: true},
		{name: "Curator 5.4", start: java("curator"), missing: curatorMissing, readOnly: true},
		{name: "kazoo 2.8", start: func() (driver, error) { return startProc(nil, py, filepath.Join("testdata", "driver.py")) },
			missing: kazooMissing, readOnly: true},
		{name: "go-zookeeper 1.0.4", start: func() (driver, error) { return &goDriver{}, nil }},
		{name: "node-zookeeper-client 1.1.3", start: func() (driver, error) {
			return startProc([]string{"NODE_PATH=" + filepath.Join(npmDir(), "node_modules")}, "node", filepath.Join("testdata", "driver.js"))
		}, missing: nodeMissing},
		{name: "C cli_mt", start: func() (driver, error) { return &cliDriver{}, nil }, missing: cliMissing, readOnly: true},
	}
}

// proc is a driver process speaking the line protocol.
type proc struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
	mu    sync.Mutex
	log   *strings.Builder
}

func startProc(env []string, name string, args ...string) (driver, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, in: in, lines: make(chan string, 16), log: &strings.Builder{}}
	cmd.Stderr = &lockedWriter{b: p.log, mu: &p.mu}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	select {
	case l, ok := <-p.lines:
		if ok && l == "ready" {
			return p, nil
		}
	case <-time.After(60 * time.Second):
	}
	p.stop()
	return nil, fmt.Errorf("%s did not start: %s", name, p.stderr())
}

type lockedWriter struct {
	b  *strings.Builder
	mu *sync.Mutex
}

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.b.Len() < 64<<10 {
		w.b.Write(b)
	}
	return len(b), nil
}

func (p *proc) stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

func (p *proc) do(cmd string, within time.Duration) (string, error) {
	if _, err := io.WriteString(p.in, cmd+"\n"); err != nil {
		return "", fmt.Errorf("driver gone: %w", err)
	}
	select {
	case l, ok := <-p.lines:
		if !ok {
			return "", fmt.Errorf("driver exited: %s", lastLines(p.stderr(), 5))
		}
		return l, nil
	case <-time.After(within):
		return "", errHang
	}
}

// stop kills the driver (by its PID) and reaps it.
func (p *proc) stop() {
	_ = p.in.Close()
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, " | ")
}

// goDriver is go-zookeeper in this process, behind the same commands.
type goDriver struct {
	conn   *zk.Conn
	events <-chan zk.Event
	last   string
	mu     sync.Mutex
}

// goErrNames names go-zookeeper's errors as its API exports them.
var goErrNames = map[error]string{
	zk.ErrConnectionClosed: "ErrConnectionClosed", zk.ErrUnknown: "ErrUnknown", zk.ErrAPIError: "ErrAPIError",
	zk.ErrNoNode: "ErrNoNode", zk.ErrNoAuth: "ErrNoAuth", zk.ErrBadVersion: "ErrBadVersion",
	zk.ErrNodeExists: "ErrNodeExists", zk.ErrNotEmpty: "ErrNotEmpty", zk.ErrSessionExpired: "ErrSessionExpired",
	zk.ErrInvalidACL: "ErrInvalidACL", zk.ErrAuthFailed: "ErrAuthFailed", zk.ErrClosing: "ErrClosing",
	zk.ErrNothing: "ErrNothing", zk.ErrSessionMoved: "ErrSessionMoved", zk.ErrReconfigDisabled: "ErrReconfigDisabled",
	zk.ErrBadArguments: "ErrBadArguments", zk.ErrNoServer: "ErrNoServer",
}

func goErrName(err error) string {
	if n, ok := goErrNames[err]; ok {
		return n
	}
	if strings.HasPrefix(err.Error(), "unknown error: ") {
		return "unknown_error_" + strings.TrimPrefix(err.Error(), "unknown error: ")
	}
	return strings.ReplaceAll(err.Error(), " ", "_")
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

func (d *goDriver) do(cmd string, within time.Duration) (string, error) {
	ch := make(chan string, 1)
	go func() {
		out, err := d.handle(strings.Fields(cmd))
		if err != nil {
			out = "err " + goErrName(err)
		}
		ch <- out
	}()
	select {
	case out := <-ch:
		return out, nil
	case <-time.After(within):
		return "", errHang
	}
}

func (d *goDriver) stop() {
	if d.conn != nil {
		d.conn.Close()
	}
}

func (d *goDriver) handle(a []string) (string, error) {
	switch a[0] {
	case "connect":
		ms, _ := strconv.Atoi(a[2])
		if a[3] == "1" {
			return "err read-only_sessions_not_supported", nil
		}
		conn, events, err := zk.Connect(strings.Split(a[1], ","), time.Duration(ms)*time.Millisecond,
			zk.WithLogger(nopLogger{}), zk.WithLogInfo(false))
		if err != nil {
			return "", err
		}
		d.conn, d.events = conn, nil
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
		defer cancel()
		for {
			select {
			case ev := <-events:
				d.setLast(ev.State.String())
				if ev.State == zk.StateHasSession {
					go func() {
						for ev := range events {
							d.setLast(ev.State.String())
						}
					}()
					// go-zookeeper does not export the session password.
					return fmt.Sprintf("ok %x -", conn.SessionID()), nil
				}
			case <-ctx.Done():
				return "err NotConnected", nil
			}
		}
	case "create":
		n, _ := strconv.Atoi(a[2])
		flags := int32(0)
		switch a[3] {
		case "s":
			flags = zk.FlagSequence
		case "e":
			flags = zk.FlagEphemeral
		}
		p, err := d.conn.Create(a[1], make([]byte, n), flags, zk.WorldACL(zk.PermAll))
		if err != nil {
			return "", err
		}
		return "ok " + p, nil
	case "get":
		data, _, err := d.conn.Get(a[1])
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("ok %d", len(data)), nil
	case "children":
		c, _, err := d.conn.Children(a[1])
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("ok %d", len(c)), nil
	case "addauth":
		if err := d.conn.AddAuth(a[1], []byte(a[2])); err != nil {
			return "", err
		}
		return "ok", nil
	case "reconfig":
		if _, err := d.conn.IncrementalReconfig(nil, []string{"99"}, -1); err != nil {
			return "", err
		}
		return "ok", nil
	case "probe":
		_, _, ch, err := d.conn.ExistsW(a[1])
		if err != nil {
			return "", err
		}
		if _, err := d.conn.Create(a[1], nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
			return "", err
		}
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			return "err WatchNotDelivered", nil
		}
		if err := d.conn.Delete(a[1], -1); err != nil {
			return "", err
		}
		return "ok", nil
	case "burst":
		// Wait for every result up to one deadline, then classify: answered, failed (by error
		// name), or not completed yet.
		n, _ := strconv.Atoi(a[2])
		var mu sync.Mutex
		ok, failed, errs := 0, 0, map[string]bool{}
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				_, err := d.conn.Create(fmt.Sprintf("%s/n%d-", a[1], i), nil, zk.FlagSequence, zk.WorldACL(zk.PermAll))
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed++
					errs[goErrName(err)] = true
				} else {
					ok++
				}
			})
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(burstWait):
		}
		mu.Lock()
		defer mu.Unlock()
		names := joinSet(errs)
		if names == "" {
			names = "-"
		}
		return fmt.Sprintf("ok %d %d %d %s", ok, failed, n-ok-failed, names), nil
	case "state":
		return fmt.Sprintf("ok %s %s", d.conn.State(), d.getLast()), nil
	case "close":
		d.conn.Close()
		return "ok", nil
	}
	return "err UnknownCommand", nil
}

func (d *goDriver) setLast(s string) {
	d.mu.Lock()
	d.last = s
	d.mu.Unlock()
}

func (d *goDriver) getLast() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.last
}
