package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zkd-io/zkd/internal/testkit/apachezk"
	"github.com/zkd-io/zkd/internal/testkit/child"
)

// Targets: the server implementation a run starts.
const (
	TargetZkd       = "zkd"
	TargetZooKeeper = "zookeeper"
)

// clientPort is every server's client port (each has its own address).
const clientPort = 2181

// ClusterConfig describes the ensemble of one run.
type ClusterConfig struct {
	Target string // TargetZkd or TargetZooKeeper
	Dir    string // one subdirectory per server is created in it
	ZkdBin string // the zkd binary (TargetZkd)
	TickMs int    // tickTime; zero means 2000
	Net    *Net   // one server per node
}

// Server is one ensemble member.
type Server struct {
	ID   int    // myid, 1-based
	Addr string // client address ip:2181
	Dir  string
	Logs []string // its log files
	p    process
}

// Cluster is a running ensemble. Its methods are safe for concurrent use.
type Cluster struct {
	Target  string
	Net     *Net
	Servers []*Server
}

// StartCluster writes each server's configuration and starts it in its namespace. It does not
// wait for them to serve (WaitReady does). On error the servers already started are killed.
func StartCluster(cfg ClusterConfig) (_ *Cluster, err error) {
	tick := cfg.TickMs
	if tick == 0 {
		tick = 2000
	}
	c := &Cluster{Target: cfg.Target, Net: cfg.Net}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Close())
		}
	}()
	var lines, ips []string
	for i, nd := range cfg.Net.Nodes {
		lines = append(lines, fmt.Sprintf("server.%d=%s:2888:3888", i+1, nd.IP))
		ips = append(ips, nd.IP)
	}
	for i, nd := range cfg.Net.Nodes {
		s := &Server{ID: i + 1, Addr: fmt.Sprintf("%s:%d", nd.IP, clientPort), Dir: filepath.Join(cfg.Dir, fmt.Sprintf("s%d", i+1))}
		wrap := []string{"ip", "netns", "exec", nd.NS}
		switch cfg.Target {
		case TargetZkd:
			p, logPath, err := launchZkd(cfg.ZkdBin, s, nd, ips, tick, wrap)
			if err != nil {
				return nil, err
			}
			s.p, s.Logs = p, []string{logPath}
		case TargetZooKeeper:
			p, err := apachezk.Launch(apachezk.ServerConfig{
				Dir:        s.Dir,
				ClientAddr: s.Addr,
				ID:         s.ID,
				Servers:    lines,
				Extra:      map[string]string{"tickTime": strconv.Itoa(tick)},
				Wrap:       wrap,
				HeapMB:     256,
			})
			if err != nil {
				return nil, err
			}
			s.p = p
			s.Logs = []string{filepath.Join(s.Dir, "logs", "zookeeper.log"), filepath.Join(s.Dir, "logs", "zookeeper.out")}
		default:
			return nil, fmt.Errorf("chaos: unknown target %q (want %s or %s)", cfg.Target, TargetZkd, TargetZooKeeper)
		}
		c.Servers = append(c.Servers, s)
	}
	return c, nil
}

// launchZkd writes zoo.cfg and myid for s and starts zkd.
func launchZkd(bin string, s *Server, nd NetNode, ips []string, tick int, wrap []string) (*zkdProcess, string, error) {
	data := filepath.Join(s.Dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, "", fmt.Errorf("chaos: %w", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "tickTime=%d\ninitLimit=10\nsyncLimit=5\ndataDir=%s\nclientPort=%d\nclientPortAddress=%s\n4lw.commands.whitelist=*\n",
		tick, data, clientPort, nd.IP)
	for i, ipAddr := range ips {
		// The examples/cluster/zoo1.cfg form: server.N=host:peer:election;clientHost:clientPort.
		fmt.Fprintf(&b, "server.%d=%s:2888:3888;%s:%d\n", i+1, ipAddr, ipAddr, clientPort)
	}
	cfgPath := filepath.Join(s.Dir, "zoo.cfg")
	if err := os.WriteFile(cfgPath, []byte(b.String()), 0o644); err != nil {
		return nil, "", fmt.Errorf("chaos: %w", err)
	}
	if err := os.WriteFile(filepath.Join(data, "myid"), []byte(strconv.Itoa(s.ID)+"\n"), 0o644); err != nil {
		return nil, "", fmt.Errorf("chaos: %w", err)
	}
	logPath := filepath.Join(s.Dir, "zkd.log")
	argv := append(append([]string(nil), wrap...), bin, "-config", cfgPath, "-admin", "off")
	p, err := startZkd(argv, s.Dir, logPath, s.Addr)
	return p, logPath, err
}

// Addrs returns the servers' client addresses.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		out[i] = s.Addr
	}
	return out
}

// WaitReady waits until every server reports Mode leader or follower.
func (c *Cluster) WaitReady(ctx context.Context) error {
	errs := make([]error, len(c.Servers))
	var wg sync.WaitGroup
	for i, s := range c.Servers {
		wg.Go(func() { errs[i] = s.p.WaitReady(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Leader returns the index of the server whose srvr says Mode: leader, polling until exactly
// one does or ctx ends.
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		leader, n := -1, 0
		for i, s := range c.Servers {
			if m, err := srvrMode(ctx, s.Addr); err == nil && m == "leader" {
				leader, n = i, n+1
			}
		}
		if n == 1 {
			return leader, nil
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("chaos: no single leader (%d claim it): %w", n, ctx.Err())
		case <-tick.C:
		}
	}
}

// Zxid returns server i's last zxid from srvr.
func (c *Cluster) Zxid(ctx context.Context, i int) (int64, error) {
	out, err := srvr(ctx, c.Servers[i].Addr)
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(out, "\n") {
		if v, ok := strings.CutPrefix(line, "Zxid: "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 0, 64)
		}
	}
	return 0, fmt.Errorf("chaos: srvr of %s has no Zxid: %q", c.Servers[i].Addr, out)
}

// Kill sends SIGKILL to server i and waits for it to exit.
func (c *Cluster) Kill(i int) error { return c.Servers[i].p.Kill() }

// Restart starts server i again on its data.
func (c *Cluster) Restart(i int) error { return c.Servers[i].p.Restart() }

// Pause stops server i with SIGSTOP.
func (c *Cluster) Pause(i int) error { return c.Servers[i].p.Pause() }

// Resume continues server i with SIGCONT.
func (c *Cluster) Resume(i int) error { return c.Servers[i].p.Resume() }

// PID returns server i's PID.
func (c *Cluster) PID(i int) int { return c.Servers[i].p.PID() }

// Close kills every server (SIGCONT first, harmless, then SIGKILL) and waits for them.
func (c *Cluster) Close() error {
	var errs []error
	for _, s := range c.Servers {
		if s.p == nil {
			continue
		}
		_ = s.p.Resume()
		if err := s.p.Kill(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// LogTails returns the last n lines of every server's logs.
func (c *Cluster) LogTails(n int) string {
	var b strings.Builder
	for _, s := range c.Servers {
		for _, l := range s.Logs {
			fmt.Fprintf(&b, "--- server %d: %s (last %d lines)\n%s\n", s.ID, l, n, child.Tail(l, n))
		}
	}
	return b.String()
}

// RaceReports returns, per server log holding "WARNING: DATA RACE", the log's path and the
// first report.
func (c *Cluster) RaceReports() []string {
	var out []string
	for _, s := range c.Servers {
		for _, l := range s.Logs {
			b, err := os.ReadFile(l)
			if err != nil {
				continue
			}
			text := string(b)
			i := strings.Index(text, "WARNING: DATA RACE")
			if i < 0 {
				continue
			}
			end := min(len(text), i+6000)
			out = append(out, fmt.Sprintf("server %d (%s): %d race reports; the first:\n%s", s.ID, l,
				strings.Count(text, "WARNING: DATA RACE"), text[i:end]))
		}
	}
	return out
}
