package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zkd-io/zkd/jute"
)

// Server kinds.
const (
	kindZooKeeper = "ZooKeeper"
	kindZkd       = "zkd"
)

// server is a ZooKeeper or zkd, standalone or a 3-node cluster, started by the harness in its
// own directory. Only processes it started are ever signalled.
type server struct {
	kind  string
	addrs []string
	dir   string
	nodes []string // per-node directories

	anchor string // ZooKeeper: the zk-anchor tool

	bin   string      // zkd: the binary
	args  string      // zkd: argument template
	ports []int       // zkd: client ports
	cmds  []*exec.Cmd // zkd: the running processes, by node
	waits []chan error
}

// zkdConfig writes a zoo.cfg for zkd node i (of n) in the format ZooKeeper uses, which zkd reads.
func zkdConfig(nodeDir string, clientPort, i, n, base int, extra string) (string, error) {
	if err := os.MkdirAll(filepath.Join(nodeDir, "data"), 0o755); err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "tickTime=2000\ninitLimit=10\nsyncLimit=5\n")
	fmt.Fprintf(&b, "dataDir=%s\n", filepath.Join(nodeDir, "data"))
	fmt.Fprintf(&b, "clientPortAddress=127.0.0.1\nclientPort=%d\n", clientPort)
	fmt.Fprintf(&b, "maxClientCnxns=0\n4lw.commands.whitelist=*\nforceSync=yes\nadmin.enableServer=false\n")
	b.WriteString(extra)
	if n > 1 {
		for j := 1; j <= n; j++ {
			fmt.Fprintf(&b, "server.%d=127.0.0.1:%d:%d\n", j, base+10+j, base+20+j)
		}
		if err := os.WriteFile(filepath.Join(nodeDir, "data", "myid"), []byte(strconv.Itoa(i+1)+"\n"), 0o644); err != nil {
			return "", err
		}
	}
	cfg := filepath.Join(nodeDir, "zoo.cfg")
	return cfg, os.WriteFile(cfg, []byte(b.String()), 0o644)
}

// startZkd starts zkd with its files under dir: standalone on port base, or (nodes = 3) a cluster
// with client ports base..base+2, peer ports base+11.. and election ports base+21.., as zk-anchor
// lays out ZooKeeper's ensemble.
func startZkd(ctx context.Context, bin, args, dir string, base, nodes int) (*server, error) {
	s := &server{kind: kindZkd, dir: dir, bin: bin, args: args}
	for i := range nodes {
		nodeDir := dir
		if nodes > 1 {
			nodeDir = filepath.Join(dir, fmt.Sprintf("n%d", i+1))
		}
		if _, err := zkdConfig(nodeDir, base+i, i, nodes, base, ""); err != nil {
			return nil, fmt.Errorf("zkbench: zkd config: %w", err)
		}
		s.nodes = append(s.nodes, nodeDir)
		s.ports = append(s.ports, base+i)
		s.addrs = append(s.addrs, fmt.Sprintf("127.0.0.1:%d", base+i))
	}
	s.cmds = make([]*exec.Cmd, nodes)
	s.waits = make([]chan error, nodes)
	for i := range nodes {
		if err := s.launchZkd(i); err != nil {
			_ = s.stop()
			return nil, err
		}
	}
	if err := s.waitReady(ctx, 120*time.Second); err != nil {
		_ = s.stop()
		return nil, err
	}
	return s, nil
}

// launchZkd starts zkd node i and returns at once. Its output, with the Go runtime's GC trace (for
// the live heap), goes to zkd.log in the node's directory.
func (s *server) launchZkd(i int) error {
	cfg := filepath.Join(s.nodes[i], "zoo.cfg")
	repl := strings.NewReplacer("{cfg}", cfg, "{port}", strconv.Itoa(s.ports[i]),
		"{data}", filepath.Join(s.nodes[i], "data"), "{dir}", s.nodes[i])
	args := strings.Fields(repl.Replace(s.args))
	logf, err := os.OpenFile(filepath.Join(s.nodes[i], "zkd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin, args...)
	cmd.Dir = s.nodes[i]
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "GODEBUG=gctrace=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("zkbench: start zkd: %w", err)
	}
	wait := make(chan error, 1)
	go func() { wait <- cmd.Wait(); _ = logf.Close() }()
	s.cmds[i], s.waits[i] = cmd, wait
	return nil
}

// startZooKeeper starts Apache ZooKeeper through zk-anchor: standalone on port base, or a
// 3-node ensemble on base..base+2.
func startZooKeeper(ctx context.Context, anchor, dir string, base, nodes int) (*server, error) {
	s := &server{kind: kindZooKeeper, dir: dir, anchor: anchor}
	verb := "start"
	if nodes > 1 {
		verb = "ensemble"
	}
	if out, err := exec.CommandContext(ctx, anchor, verb, strconv.Itoa(base), dir).CombinedOutput(); err != nil {
		_ = s.stop()
		return nil, fmt.Errorf("zkbench: zk-anchor %s: %w: %s", verb, err, bytes.TrimSpace(out))
	}
	for i := range nodes {
		if nodes > 1 {
			s.nodes = append(s.nodes, filepath.Join(dir, fmt.Sprintf("n%d", i+1)))
		} else {
			s.nodes = append(s.nodes, dir)
		}
		s.addrs = append(s.addrs, fmt.Sprintf("127.0.0.1:%d", base+i))
	}
	if err := s.waitReady(ctx, 120*time.Second); err != nil {
		_ = s.stop()
		return nil, err
	}
	return s, nil
}

// waitReady waits until every node accepts a session and a write succeeds.
func (s *server) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, a := range s.addrs {
		if err := waitServing(ctx, a, time.Until(deadline)); err != nil {
			return fmt.Errorf("zkbench: %s: %w", s.kind, err)
		}
	}
	for {
		c, err := dialClient(s.addrs[0], 10*time.Second, nil)
		if err == nil {
			err = ensurePath(c, "/zkbench")
			_ = c.close()
		}
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("zkbench: %s takes no writes: %w", s.kind, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// pid returns the process id of node i.
func (s *server) pid(i int) (int, error) {
	if s.kind == kindZkd {
		if s.cmds[i] == nil {
			return 0, errors.New("zkbench: zkd node not running")
		}
		return s.cmds[i].Process.Pid, nil
	}
	b, err := os.ReadFile(filepath.Join(s.nodes[i], "zk.pid"))
	if err != nil {
		return 0, fmt.Errorf("zkbench: zookeeper pid: %w", err)
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// stop stops every node gracefully (zk-anchor stop for ZooKeeper; SIGTERM, then SIGKILL after 15
// seconds, for zkd).
func (s *server) stop() error {
	if s.kind == kindZooKeeper {
		out, err := exec.Command(s.anchor, "stop", s.dir).CombinedOutput()
		if err != nil {
			return fmt.Errorf("zkbench: zk-anchor stop: %w: %s", err, bytes.TrimSpace(out))
		}
		return nil
	}
	for i, cmd := range s.cmds {
		if cmd == nil {
			continue
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.waits[i]:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-s.waits[i]
		}
		s.cmds[i] = nil
	}
	return nil
}

// kill9 kills node 0 with SIGKILL and waits for it to be gone.
func (s *server) kill9() error {
	pid, err := s.pid(0)
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("zkbench: kill -9 %d: %w", pid, err)
	}
	if s.kind == kindZkd {
		<-s.waits[0]
		s.cmds[0] = nil
		return nil
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); errors.Is(err, os.ErrNotExist) {
			return nil
		}
		time.Sleep(10 * time.Millisecond) // no event to wait on for a process we did not start
	}
	return fmt.Errorf("zkbench: pid %d still alive after kill -9", pid)
}

// restart relaunches standalone node 0 on its existing data and returns the launch time: for zkd
// just before exec, for ZooKeeper just before the JVM's exec (zk-anchor's launch_ns), so the
// shell wrapper is not counted.
func (s *server) restart(ctx context.Context) (time.Time, error) {
	if s.kind == kindZkd {
		t := time.Now()
		return t, s.launchZkd(0)
	}
	port := strings.TrimPrefix(s.addrs[0], "127.0.0.1:")
	if out, err := exec.CommandContext(ctx, s.anchor, "start", port, s.dir).CombinedOutput(); err != nil {
		return time.Time{}, fmt.Errorf("zkbench: zk-anchor start: %w: %s", err, bytes.TrimSpace(out))
	}
	return s.launchTime()
}

// launchTime reads when zk-anchor launched ZooKeeper's JVM.
func (s *server) launchTime() (time.Time, error) {
	b, err := os.ReadFile(filepath.Join(s.nodes[0], "launch_ns"))
	if err != nil {
		return time.Time{}, err
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("zkbench: launch_ns: %w", err)
	}
	return time.Unix(0, ns), nil
}

// waitForNode polls (every 10 ms) until a session on addr sees path, and returns when it did.
func waitForNode(ctx context.Context, addr, path string, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		c, err := dialClient(addr, 10*time.Second, nil)
		if err == nil {
			err = c.call(jute.OpExists, &jute.ExistsRequest{Path: path}).result()
			_ = c.close()
			if err == nil {
				return time.Now(), nil
			}
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("zkbench: %s not readable on %s after %v: %w", path, addr, timeout, err)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// rssMB returns a process's resident set size in MiB.
func rssMB(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				return 0, fmt.Errorf("zkbench: VmRSS %q: %w", rest, err)
			}
			return kb / 1024, nil
		}
	}
	return 0, errors.New("zkbench: no VmRSS")
}

var (
	jvmHeapUsed = regexp.MustCompile(`heap\s+total \d+K, used (\d+)K`)
	goLiveHeap  = regexp.MustCompile(`gc \d+ @[^\n]*?(\d+)->(\d+)->(\d+) MB`)
)

// heapMB returns the live heap of node 0: for ZooKeeper the Java heap in use after a full GC
// (jcmd GC.run, then GC.heap_info), for zkd the live heap reported by the last GC in its trace.
func (s *server) heapMB(ctx context.Context) (float64, error) {
	pid, err := s.pid(0)
	if err != nil {
		return 0, err
	}
	if s.kind == kindZooKeeper {
		if out, err := exec.CommandContext(ctx, "jcmd", strconv.Itoa(pid), "GC.run").CombinedOutput(); err != nil {
			return 0, fmt.Errorf("zkbench: jcmd GC.run: %w: %s", err, out)
		}
		out, err := exec.CommandContext(ctx, "jcmd", strconv.Itoa(pid), "GC.heap_info").CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("zkbench: jcmd GC.heap_info: %w: %s", err, out)
		}
		m := jvmHeapUsed.FindSubmatch(out)
		if m == nil {
			return 0, fmt.Errorf("zkbench: no heap figure in jcmd output: %s", out)
		}
		kb, _ := strconv.ParseFloat(string(m[1]), 64)
		return kb / 1024, nil
	}
	b, err := os.ReadFile(filepath.Join(s.nodes[0], "zkd.log"))
	if err != nil {
		return 0, err
	}
	all := goLiveHeap.FindAllSubmatch(b, -1)
	if len(all) == 0 {
		return 0, errors.New("zkbench: no GC trace in zkd.log")
	}
	mb, _ := strconv.ParseFloat(string(all[len(all)-1][3]), 64)
	return mb, nil
}

// relaunch stops a standalone server and starts it again on the same data with extra zoo.cfg
// lines (for example snapCount), then waits until it takes writes. ZooKeeper is launched by
// zk-anchor's own helpers (zk-common.sh beside it), which write the same configuration as
// `zk-anchor start` plus the extra lines.
func (s *server) relaunch(ctx context.Context, extra string) error {
	if len(s.nodes) != 1 {
		return errors.New("zkbench: relaunch is for standalone servers")
	}
	if err := s.stop(); err != nil {
		return err
	}
	port := s.addrs[0][strings.LastIndexByte(s.addrs[0], ':')+1:]
	if s.kind == kindZkd {
		if _, err := zkdConfig(s.nodes[0], s.ports[0], 0, 1, s.ports[0], extra); err != nil {
			return err
		}
		if err := s.launchZkd(0); err != nil {
			return err
		}
	} else {
		anchor, err := filepath.EvalSymlinks(s.anchor)
		if err != nil {
			return err
		}
		common := filepath.Join(filepath.Dir(anchor), "zk-common.sh")
		script := `. "$0"; zk_write_conf "$1" "$2" "$3"; zk_launch "$1"; zk_wait_ruok "$1" "$2" 120 >/dev/null || zk_die "no imok on port $2"`
		if out, err := exec.CommandContext(ctx, "bash", "-c", script, common, s.dir, port, extra).CombinedOutput(); err != nil {
			_ = s.stop()
			return fmt.Errorf("zkbench: relaunch ZooKeeper: %w: %s", err, bytes.TrimSpace(out))
		}
	}
	return s.waitReady(ctx, 120*time.Second)
}
