package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zkd-io/zkd/jute"
)

// failoverRecord is what the fail-over measurement of "zkbench scale" found on one server's
// 3-node cluster.
type failoverRecord struct {
	Server      string  `json:"server"`
	Sessions    int     `json:"sessions"`
	Processes   int     `json:"client_processes"`
	OpenS       float64 `json:"open_s"`          // opening every session
	SessionKiB  float64 `json:"session_rss_kib"` // members' RSS added per session, summed over members
	SteadyP99   float64 `json:"steady_read_p99_ms"`
	ReadP99     float64 `json:"failover_read_p99_ms"`
	ReadMax     float64 `json:"failover_read_max_ms"`
	Reads       int64   `json:"failover_reads"`
	ReadErrors  int64   `json:"failover_read_errors"`
	Lost        int64   `json:"connections_lost"`
	Expired     int64   `json:"sessions_expired"`
	Reattached  int     `json:"reattached"`
	FirstS      float64 `json:"first_reattach_s"`
	LastS       float64 `json:"last_reattach_s"`
	PeakPerS    int     `json:"peak_reattach_per_s"` // most reattachments in one second
	LeaderAfter string  `json:"leader_after"`
	Err         string  `json:"error,omitempty"`
}

// holdProc is one "zkbench hold" child process.
type holdProc struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines *bufio.Scanner
}

// startHold starts a hold child holding n sessions over addrs, and waits until they are open.
func startHold(ctx context.Context, addrs []string, n, first int, path string) (*holdProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self, "hold", "-addr", strings.Join(addrs, ","), "-sessions", strconv.Itoa(n),
		"-first", strconv.Itoa(first), "-path", path, "-read-every", "5s", "-session-timeout", "30s")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &holdProc{cmd: cmd, in: in, lines: bufio.NewScanner(out)}
	p.lines.Buffer(make([]byte, 64<<10), 64<<20) // a stats line lists every reattachment
	if !p.lines.Scan() || !strings.HasPrefix(p.lines.Text(), "ready ") {
		p.stop()
		return nil, fmt.Errorf("zkbench: hold child: no ready line (%q): %v", p.lines.Text(), cmd.Wait())
	}
	return p, nil
}

// send sends a command to the child.
func (p *holdProc) send(cmd string) error {
	_, err := io.WriteString(p.in, cmd+"\n")
	return err
}

// mark starts the child's new measurement and waits until it has: a connection the child loses
// after the parent's next step (the leader's kill) is then always counted in it. Without the
// wait, a child that read "mark" late counted a session's loss before the mark and its
// reattachment after it.
func (p *holdProc) mark() error {
	if err := p.send("mark"); err != nil {
		return err
	}
	if !p.lines.Scan() || p.lines.Text() != "marked" {
		return fmt.Errorf("zkbench: hold child: no mark acknowledged (%q): %v", p.lines.Text(), p.lines.Err())
	}
	return nil
}

// stats asks the child for its figures since the last mark.
func (p *holdProc) stats() (holdStats, error) {
	var st holdStats
	if err := p.send("stats"); err != nil {
		return st, err
	}
	if !p.lines.Scan() {
		return st, fmt.Errorf("zkbench: hold child: no stats: %v", p.lines.Err())
	}
	return st, json.Unmarshal(p.lines.Bytes(), &st)
}

// stop asks the child to close its sessions and waits for it (killing it after 30 s).
func (p *holdProc) stop() {
	_ = p.send("quit")
	_ = p.in.Close()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// statsAll gathers every child's stats into one.
func statsAll(procs []*holdProc) (holdStats, error) {
	var all holdStats
	var p99s, p50s []float64
	for _, p := range procs {
		st, err := p.stats()
		if err != nil {
			return all, err
		}
		all.Sessions += st.Sessions
		all.Reads += st.Reads
		all.ReadErrors += st.ReadErrors
		all.Lost += st.Lost
		all.Expired += st.Expired
		all.Reattached = append(all.Reattached, st.Reattached...)
		all.ReadMax = max(all.ReadMax, st.ReadMax)
		p99s, p50s = append(p99s, st.ReadP99), append(p50s, st.ReadP50)
	}
	// The children read alike from one node; their largest p99 stands for all.
	all.ReadP99, all.ReadP50 = slices.Max(p99s), slices.Max(p50s)
	return all, nil
}

// killNode kills node i with SIGKILL and waits for it to be gone.
func (s *server) killNode(i int) error {
	if s.kind == kindZooKeeper {
		return s.zk[i].Kill()
	}
	pid, err := s.pid(i)
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return err
	}
	<-s.waits[i]
	s.cmds[i] = nil
	return nil
}

// scaleFailover starts a 3-node cluster of kind, has o.FailoverSessions sessions held on it by
// child processes (each session reading one node every 5 s), measures o.FailoverSteady, kills the
// leader with SIGKILL and measures the next o.FailoverWindow: reads, lost connections, expired sessions, and
// when the sessions reattached.
func scaleFailover(ctx context.Context, o scaleOptions, kind, dir string, base int, logf func(string, ...any)) (failoverRecord, error) {
	rec := failoverRecord{Server: kind}
	var s *server
	var err error
	if kind == "zookeeper" {
		s, err = startZooKeeper(ctx, dir, base, 3)
	} else {
		s, err = startZkd(ctx, o.ZkdBin, o.ZkdArgs, dir, base, 3)
	}
	if err != nil {
		return rec, err
	}
	defer func() { _ = s.stop() }()
	rec.Server = s.kind
	const path = "/failover"
	c, err := dialClient(s.addrs[0], 30*time.Second, nil)
	if err != nil {
		return rec, err
	}
	err = create(c, path, []byte("a node every session reads"), jute.ModePersistent)
	_ = c.close()
	if err != nil {
		return rec, err
	}
	rss := func() float64 {
		var sum float64
		for i := range s.nodeCount() {
			if pid, err := s.pid(i); err == nil {
				mb, _ := rssMB(pid)
				sum += mb
			}
		}
		return sum
	}
	rss0 := rss()
	per := max(o.HoldPerProcess, 1)
	logf("%s cluster: opening %d sessions from %d processes", s.kind, o.FailoverSessions, (o.FailoverSessions+per-1)/per)
	start := time.Now()
	var procs []*holdProc
	defer func() {
		for _, p := range procs {
			p.stop()
		}
	}()
	for left, i := o.FailoverSessions, 0; left > 0; i++ {
		n := min(left, per)
		p, err := startHold(ctx, s.addrs, n, i, path)
		if err != nil {
			return rec, err
		}
		procs = append(procs, p)
		left -= n
	}
	rec.Sessions, rec.Processes = o.FailoverSessions, len(procs)
	rec.OpenS = time.Since(start).Seconds()
	settle(ctx, map[string]*server{s.kind: s})
	time.Sleep(2 * time.Second)
	rec.SessionKiB = (rss() - rss0) * 1024 / float64(rec.Sessions)
	logf("%s cluster: %d sessions open in %.1f s, %.1f KiB of members' RSS each; %v steady", s.kind, rec.Sessions, rec.OpenS, rec.SessionKiB, o.FailoverSteady)
	mark := func() error {
		for _, p := range procs {
			if err := p.mark(); err != nil {
				return err
			}
		}
		return nil
	}
	if err := mark(); err != nil {
		return rec, err
	}
	time.Sleep(o.FailoverSteady)
	steady, err := statsAll(procs)
	if err != nil {
		return rec, err
	}
	rec.SteadyP99 = steady.ReadP99
	leader := -1
	for i, a := range s.addrs {
		if mode, err := serverMode(a); err == nil && mode == "leader" {
			leader = i
		}
	}
	if leader < 0 {
		return rec, errors.New("zkbench: no member says it leads")
	}
	if err := mark(); err != nil {
		return rec, err
	}
	logf("%s cluster: steady read p99 %.1f ms; kill -9 of the leader (member %d) and %v of fail-over", s.kind, rec.SteadyP99, leader+1, o.FailoverWindow)
	if err := s.killNode(leader); err != nil {
		return rec, err
	}
	time.Sleep(o.FailoverWindow)
	fo, err := statsAll(procs)
	if err != nil {
		return rec, err
	}
	rec.ReadP99, rec.ReadMax, rec.Reads, rec.ReadErrors = fo.ReadP99, fo.ReadMax, fo.Reads, fo.ReadErrors
	rec.Lost, rec.Expired, rec.Reattached = fo.Lost, fo.Expired, len(fo.Reattached)
	if len(fo.Reattached) > 0 {
		rec.FirstS, rec.LastS = slices.Min(fo.Reattached), slices.Max(fo.Reattached)
		perSecond := map[int]int{}
		for _, t := range fo.Reattached {
			perSecond[int(t)]++
		}
		for _, n := range perSecond {
			rec.PeakPerS = max(rec.PeakPerS, n)
		}
	}
	for i, a := range s.addrs {
		if i == leader {
			continue
		}
		if mode, err := serverMode(a); err == nil && mode == "leader" {
			rec.LeaderAfter = fmt.Sprintf("member %d", i+1)
		}
	}
	logf("%s cluster: fail-over read p99 %.1f ms, max %.0f ms, %d reads (%d errors); %d connections lost, %d sessions expired; %d reattached from %.1f to %.1f s, at most %d in one second; new leader %s",
		s.kind, rec.ReadP99, rec.ReadMax, rec.Reads, rec.ReadErrors, rec.Lost, rec.Expired, rec.Reattached, rec.FirstS, rec.LastS, rec.PeakPerS, rec.LeaderAfter)
	return rec, nil
}

// failoverDir is where a server's fail-over cluster keeps its files.
func failoverDir(work, kind string) string { return filepath.Join(work, kind+"-cluster") }
