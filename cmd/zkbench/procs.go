package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zkd-io/zkd/internal/testkit/apachezk"
	"github.com/zkd-io/zkd/jute"
)

// Server kinds.
const (
	kindZooKeeper = "ZooKeeper"
	kindZkd       = "zkd"
	// kindFloor labels the floor server's runs (floor.go). It is managed as a zkd process: the
	// zkbench binary run with the floor subcommand.
	kindFloor = "floor"
)

// server is a ZooKeeper or zkd, standalone or a 3-node cluster, started by the harness in its
// own directory. Only processes it started are ever signalled.
type server struct {
	kind  string
	addrs []string
	dir   string
	nodes []string // per-node directories

	zk []*apachezk.Process // ZooKeeper: the servers, by node

	bin   string      // zkd: the binary
	args  string      // zkd: argument template
	ports []int       // client ports, by node
	cmds  []*exec.Cmd // zkd: the running processes, by node
	waits []chan error
	// adminPort is zkd's admin server port, when the harness turned it on (zero: off).
	adminPort int
	// cfgExtra holds zoo.cfg lines a zkd was started with, kept by relaunch; zkHeapMB is the
	// -Xmx a ZooKeeper was started with (zero: apachezk's default), kept by relaunch.
	cfgExtra string
	zkHeapMB int
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
// with client ports base..base+2, peer ports base+11.. and election ports base+21.., as
// startZooKeeper lays out ZooKeeper's ensemble.
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
	if err := s.launchAll(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// launchAll starts every node of s (a zkd or floor server with its nodes and ports set) and waits
// until it serves, or stops what it started.
func (s *server) launchAll(ctx context.Context) error {
	s.cmds = make([]*exec.Cmd, len(s.nodes))
	s.waits = make([]chan error, len(s.nodes))
	for i := range s.nodes {
		if err := s.launchZkd(i); err != nil {
			_ = s.stop()
			return err
		}
	}
	if err := s.waitReady(ctx, 120*time.Second); err != nil {
		_ = s.stop()
		return err
	}
	return nil
}

// cfgLines renders zoo.cfg keys as lines, in key order.
func cfgLines(kv map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(kv)) {
		fmt.Fprintf(&b, "%s=%s\n", k, kv[k])
	}
	return b.String()
}

// launchZkd starts zkd node i and returns at once. Its output, with the Go runtime's GC trace (for
// the live heap), goes to zkd.log in the node's directory.
func (s *server) launchZkd(i int) error {
	cfg := filepath.Join(s.nodes[i], "zoo.cfg")
	repl := strings.NewReplacer("{cfg}", cfg, "{port}", strconv.Itoa(s.ports[i]),
		"{data}", filepath.Join(s.nodes[i], "data"), "{dir}", s.nodes[i], "{node}", strconv.Itoa(i+1))
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

// zooKeeperConfigs lays out Apache ZooKeeper with its files under dir: standalone on port base,
// or (nodes = 3) an ensemble with client ports base..base+2, peer ports base+11.. and election
// ports base+21... Every other setting is internal/testkit/apachezk's stock configuration.
func zooKeeperConfigs(dir string, base, nodes int) []apachezk.ServerConfig {
	if nodes == 1 {
		return []apachezk.ServerConfig{{Dir: dir, ClientAddr: fmt.Sprintf("127.0.0.1:%d", base)}}
	}
	var servers []string
	for i := 1; i <= nodes; i++ {
		servers = append(servers, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", i, base+10+i, base+20+i))
	}
	cfgs := make([]apachezk.ServerConfig, nodes)
	for i := range cfgs {
		cfgs[i] = apachezk.ServerConfig{
			Dir:        filepath.Join(dir, fmt.Sprintf("n%d", i+1)),
			ClientAddr: fmt.Sprintf("127.0.0.1:%d", base+i),
			ID:         i + 1,
			Servers:    servers,
		}
	}
	return cfgs
}

// startZooKeeper starts Apache ZooKeeper (internal/testkit/apachezk): standalone on port base, or a
// 3-node ensemble on base..base+2.
func startZooKeeper(ctx context.Context, dir string, base, nodes int) (*server, error) {
	return startZooKeeperHeap(ctx, dir, base, nodes, 0)
}

// startZooKeeperHeap is startZooKeeper with heapMB of heap per member (zero: apachezk's default).
func startZooKeeperHeap(ctx context.Context, dir string, base, nodes, heapMB int) (*server, error) {
	s := &server{kind: kindZooKeeper, dir: dir, zkHeapMB: heapMB}
	for i, cfg := range zooKeeperConfigs(dir, base, nodes) {
		cfg.HeapMB = heapMB
		p, err := apachezk.Launch(cfg)
		if err != nil {
			_ = s.stop()
			return nil, fmt.Errorf("zkbench: %w", err)
		}
		s.zk = append(s.zk, p)
		s.nodes = append(s.nodes, p.Dir())
		s.ports = append(s.ports, base+i)
		s.addrs = append(s.addrs, p.ClientAddr())
	}
	if err := s.waitZooKeeper(ctx); err != nil {
		_ = s.stop()
		return nil, err
	}
	if err := s.waitReady(ctx, 120*time.Second); err != nil {
		_ = s.stop()
		return nil, err
	}
	return s, nil
}

// waitZooKeeper waits until every ZooKeeper server serves (apachezk's WaitReady): 60 s for a
// standalone server, 120 s for an ensemble to elect its leader.
func (s *server) waitZooKeeper(ctx context.Context) error {
	within := 60 * time.Second
	if len(s.zk) > 1 {
		within = 120 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for _, p := range s.zk {
		if err := p.WaitReady(ctx); err != nil {
			return fmt.Errorf("zkbench: %w", err)
		}
	}
	return nil
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

// cpuSeconds returns the CPU time (user and system) the topology's server processes have used
// so far, summed over its nodes, from /proc/PID/stat (Linux; its clock ticks are USER_HZ, 100 a
// second on every Linux this runs on).
// selfCPUSeconds returns the CPU time (user and system, all threads) this process has used.
func selfCPUSeconds() (float64, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds(), nil
}

func (s *server) cpuSeconds() (float64, error) {
	var total float64
	for i := range s.nodeCount() {
		pid, err := s.pid(i)
		if err != nil {
			return 0, err
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0, err
		}
		// The command name (field 2) may hold spaces; fields 14 and 15 (utime, stime) count
		// from after its closing parenthesis.
		rest := string(b)
		if j := strings.LastIndexByte(rest, ')'); j >= 0 {
			rest = rest[j+1:]
		}
		f := strings.Fields(rest)
		if len(f) < 13 {
			return 0, fmt.Errorf("zkbench: /proc/%d/stat: too few fields", pid)
		}
		ut, err1 := strconv.ParseFloat(f[11], 64)
		st, err2 := strconv.ParseFloat(f[12], 64)
		if err1 != nil || err2 != nil {
			return 0, fmt.Errorf("zkbench: /proc/%d/stat: bad utime or stime", pid)
		}
		total += (ut + st) / 100
	}
	return total, nil
}

// nodeCount is the number of server processes.
func (s *server) nodeCount() int {
	if s.kind == kindZooKeeper {
		return len(s.zk)
	}
	return len(s.cmds)
}

// pid returns the process id of node i.
func (s *server) pid(i int) (int, error) {
	if s.kind == kindZooKeeper {
		return s.zk[i].PID(), nil
	}
	if s.cmds[i] == nil {
		return 0, fmt.Errorf("zkbench: %s node not running", s.kind)
	}
	return s.cmds[i].Process.Pid, nil
}

// stop stops every node gracefully: SIGTERM, then SIGKILL after 15 seconds.
func (s *server) stop() error {
	if s.kind == kindZooKeeper {
		var errs []error
		for _, p := range s.zk {
			errs = append(errs, p.Stop())
		}
		return errors.Join(errs...)
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
	if s.kind == kindZooKeeper {
		if err := s.zk[0].Kill(); err != nil {
			return fmt.Errorf("zkbench: kill -9: %w", err)
		}
		return nil
	}
	pid, err := s.pid(0)
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("zkbench: kill -9 %d: %w", pid, err)
	}
	<-s.waits[0]
	s.cmds[0] = nil
	return nil
}

// restart relaunches standalone node 0 on its existing data and returns the launch time, taken
// just before the exec of zkd or of ZooKeeper's JVM. zkd is left to start; ZooKeeper is first
// waited for until it serves (apachezk's WaitReady), as the harness always did: while it loads
// its data it accepts connections but leaves a session's handshake unanswered, and a client that
// connects then waits out its whole connect timeout (10 s here) instead of measuring the restart.
func (s *server) restart(ctx context.Context) (time.Time, error) {
	if s.kind == kindZkd {
		t := time.Now()
		return t, s.launchZkd(0)
	}
	p := s.zk[0]
	if err := p.Restart(); err != nil {
		return time.Time{}, fmt.Errorf("zkbench: restart ZooKeeper: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if err := p.WaitReady(ctx); err != nil {
		return time.Time{}, fmt.Errorf("zkbench: restart ZooKeeper: %w", err)
	}
	return p.Launched(), nil
}

// launchTime returns when node 0 was launched (ZooKeeper only: zkd's launch is timed by its
// caller).
func (s *server) launchTime() time.Time { return s.zk[0].Launched() }

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
// keys (for example snapCount) after the usual configuration, then waits until it takes writes.
func (s *server) relaunch(ctx context.Context, extra map[string]string) error {
	if len(s.nodes) != 1 {
		return errors.New("zkbench: relaunch is for standalone servers")
	}
	if err := s.stop(); err != nil {
		return err
	}
	if s.kind == kindZkd {
		if _, err := zkdConfig(s.nodes[0], s.ports[0], 0, 1, s.ports[0], s.cfgExtra+cfgLines(extra)); err != nil {
			return err
		}
		if err := s.launchZkd(0); err != nil {
			return err
		}
	} else {
		cfg := zooKeeperConfigs(s.dir, s.ports[0], 1)[0]
		cfg.Extra, cfg.HeapMB = extra, s.zkHeapMB
		p, err := apachezk.Launch(cfg)
		if err != nil {
			return fmt.Errorf("zkbench: relaunch ZooKeeper: %w", err)
		}
		s.zk[0] = p
		if err := s.waitZooKeeper(ctx); err != nil {
			_ = s.stop()
			return err
		}
	}
	return s.waitReady(ctx, 120*time.Second)
}

// startFloor starts the floor server (this binary's floor subcommand) with its logs under dir:
// standalone on port, as startZkd starts a standalone zkd, or replicated over nodes processes on
// port..port+nodes-1, of which only node 1 serves clients.
func startFloor(ctx context.Context, dir string, port, nodes int) (*server, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	if nodes == 1 {
		s, err := startZkd(ctx, self, "floor -port {port} -dir {data}", dir, port, 1)
		if err != nil {
			return nil, err
		}
		s.kind = kindFloor
		return s, nil
	}
	// The replicated floor (floorrepl.go): node 1 serves every client on port and reaches node
	// i on port+i-1.
	s := &server{kind: kindFloor, dir: dir, bin: self,
		args:  fmt.Sprintf("floor -port {port} -dir {data} -node {node} -nodes %d", nodes),
		addrs: []string{fmt.Sprintf("127.0.0.1:%d", port)}}
	for i := range nodes {
		nodeDir := filepath.Join(dir, fmt.Sprintf("n%d", i+1))
		if err := os.MkdirAll(nodeDir, 0o755); err != nil {
			return nil, err
		}
		s.nodes = append(s.nodes, nodeDir)
		s.ports = append(s.ports, port+i)
	}
	if err := s.launchAll(ctx); err != nil {
		return nil, err
	}
	return s, nil
}
