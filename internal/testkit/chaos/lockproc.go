package chaos

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/zkd-io/zkd/internal/testkit/tcpproxy"
)

// Lock contenders in their own processes: the nemesis stops them with SIGSTOP, kills them with
// SIGKILL and partitions each from every server on its own, as real lock clients are hurt. A
// contender process is the test binary run again with ContenderEnv set (the test's TestMain calls
// RunContender). It connects to the servers through proxies of the test process (so that it can
// be partitioned alone) and reports on standard output, a line each:
//
//	SESSION <name> <id> <marker or ->   a session began (its marker created, or not)
//	HOLD <token>                         a critical section began
//	FENCE <token>                        a write to the fenced resource: the test answers 1 or 0
//	GUARDED <token> <version> <mzxid>    a guarded write of the token was acknowledged
//	ACKED <zxid> <what>                  a write was acknowledged
//	SECTION <token> <start> <end> <taken> <refused>   the section ended (times in Unix ns)
//	END <name> <closed|expired|abandoned>
//
// Its standard input carries the answers to FENCE and, last, STOP: close the session and exit.

// ContenderEnv is the environment variable that makes the test binary a lock contender process;
// its value is the contender's configuration (JSON).
const ContenderEnv = "CHAOS_LOCK_CONTENDER"

// contenderConfig is what a contender process is told.
type contenderConfig struct {
	Servers   []string // the proxies to the servers
	Slot      int
	TimeoutMs int32
	Seed      uint64
}

// RunContender is a contender process's main (see ContenderEnv); it returns the exit code.
func RunContender() int {
	var cfg contenderConfig
	if err := json.Unmarshal([]byte(os.Getenv(ContenderEnv)), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "chaos contender:", err)
		return 2
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	pl := &pipeLedger{out: bufio.NewWriter(os.Stdout), answers: make(chan bool)}
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			switch sc.Text() {
			case "STOP":
				stop()
			case "1", "0":
				pl.answers <- sc.Text() == "1"
			}
		}
		stop() // the test is gone
		close(pl.answers)
	}()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	w := &Workloads{h: NewHistory(), log: log, servers: cfg.Servers, cfg: WorkloadConfig{TimeoutMs: cfg.TimeoutMs}}
	rng := rand.New(rand.NewPCG(cfg.Seed, uint64(os.Getpid())))
	for k := 0; ctx.Err() == nil; k++ {
		name := fmt.Sprintf("p%d.%d.%d", cfg.Slot, os.Getpid(), k)
		rec := &SessionRecord{Name: name, Kind: "lock"}
		d := &zkDialer{}
		s := w.zkSessionWith(ctx, rec, log.With("session", name), d)
		if rec.ID != 0 {
			marker := cmp.Or(rec.Marker, "-")
			pl.say("SESSION %s %d %s", name, rec.ID, marker)
		}
		if s == nil {
			if rec.ID != 0 {
				pl.say("END %s abandoned", name)
			}
			continue
		}
		id := s.Conn().SessionID()
		w.lockLoop(ctx, s, id, name, rng, d, pl) // LockPause is 0 here: the nemesis stops the process
		end := "closed"
		if s.Conn().SessionID() != id {
			end = "expired"
		}
		s.Close()
		pl.say("END %s %s", name, end)
	}
	return 0
}

// pipeLedger is a contender process's ledger: its lines go to the test process.
type pipeLedger struct {
	mu      sync.Mutex
	out     *bufio.Writer
	answers chan bool
}

func (l *pipeLedger) say(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.out, format+"\n", args...)
	_ = l.out.Flush()
}

func (l *pipeLedger) fencedWrite(token int64) bool {
	l.say("FENCE %d", token)
	return <-l.answers // false once the test is gone
}

func (l *pipeLedger) holding(token int64) { l.say("HOLD %d", token) }

func (l *pipeLedger) addSection(s Section) {
	l.say("SECTION %d %d %d %d %d", s.Token, s.Start.UnixNano(), s.End.UnixNano(), s.Accepted, s.Rejected)
}

func (l *pipeLedger) addGuarded(g GuardedWrite) {
	l.say("GUARDED %d %d %d", g.Token, g.Version, g.Mzxid)
}

func (l *pipeLedger) acked(a AckedWrite) { l.say("ACKED %d %s", a.Zxid, a.What) }

// lockProc is one slot of contender processes in the test process: a process at a time (a new
// one after one was killed), with the proxies it reaches the servers through.
type lockProc struct {
	slot    int
	proxies []*tcpproxy.Proxy

	mu struct {
		sync.Mutex
		cmd     *exec.Cmd
		holding bool
	}
}

// startLockProcs starts the contender process slots; without a binary there are none.
func (w *Workloads) startLockProcs(ctx context.Context) error {
	if w.cfg.LockProcesses == 0 {
		return nil
	}
	if w.cfg.ContenderBin == "" {
		return fmt.Errorf("chaos: %d lock contender processes but no ContenderBin", w.cfg.LockProcesses)
	}
	for i := range w.cfg.LockProcesses {
		p := &lockProc{slot: i}
		for _, s := range w.servers {
			px, err := tcpproxy.New(s)
			if err != nil {
				w.closeLockProcs()
				return fmt.Errorf("chaos: contender proxy: %w", err)
			}
			p.proxies = append(p.proxies, px)
		}
		w.procs = append(w.procs, p)
	}
	for _, p := range w.procs {
		w.wg.Go(func() {
			for ctx.Err() == nil {
				if err := w.runLockProc(ctx, p); err != nil {
					w.log.Warn("contender process", "slot", p.slot, "err", err)
					sleepCtx(ctx, time.Second)
				}
			}
		})
	}
	return nil
}

// closeLockProcs closes the contenders' proxies (once their processes are gone).
func (w *Workloads) closeLockProcs() {
	for _, p := range w.procs {
		for _, px := range p.proxies {
			px.Close()
		}
	}
}

// runLockProc runs one contender process in slot p until it exits (killed, or stopped once ctx
// ends), recording what it reports.
func (w *Workloads) runLockProc(ctx context.Context, p *lockProc) error {
	addrs := make([]string, len(p.proxies))
	for i, px := range p.proxies {
		addrs[i] = px.Addr()
	}
	cfg, err := json.Marshal(contenderConfig{Servers: addrs, Slot: p.slot, TimeoutMs: w.cfg.TimeoutMs, Seed: w.seed})
	if err != nil {
		return err
	}
	cmd := exec.Command(w.cfg.ContenderBin)
	cmd.Env = append(os.Environ(), ContenderEnv+"="+string(cfg))
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	logw := &lineLogger{log: w.log.With("contender", p.slot), races: &w.contenders.races}
	cmd.Stderr = logw
	if err := cmd.Start(); err != nil {
		return err
	}
	p.mu.Lock()
	p.mu.cmd = cmd
	p.mu.Unlock()
	w.contenders.started.Add(1)
	w.log.Info("contender process started", "slot", p.slot, "pid", cmd.Process.Pid)
	var inMu sync.Mutex // FENCE answers and STOP share its standard input
	send := func(line string) {
		inMu.Lock()
		defer inMu.Unlock()
		_, _ = io.WriteString(in, line+"\n")
	}
	// Once ctx ends: STOP, and SIGKILL if it has not gone within a minute.
	exited := make(chan struct{})
	go func() {
		select {
		case <-exited:
			return
		case <-ctx.Done():
		}
		send("STOP")
		select {
		case <-exited:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
		}
	}()
	var cur *SessionRecord
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		num := func(i int) int64 {
			if i >= len(f) {
				return 0
			}
			v, _ := strconv.ParseInt(f[i], 10, 64)
			return v
		}
		switch f[0] {
		case "SESSION":
			cur = w.h.session(f[1], "lock")
			id := num(2)
			w.h.update(func() {
				cur.ID = id
				if len(f) > 3 && f[3] != "-" {
					cur.Marker, cur.Owns = f[3], []string{path.Dir(f[3])}
				}
			})
		case "HOLD":
			p.setHolding(true)
		case "FENCE":
			if w.h.fencedWrite(num(1)) {
				send("1")
			} else {
				send("0")
			}
		case "SECTION":
			p.setHolding(false)
			if cur != nil {
				w.h.addSection(Section{Session: cur.Name, Token: num(1), Start: time.Unix(0, num(2)), End: time.Unix(0, num(3)),
					Accepted: int(num(4)), Rejected: int(num(5))})
			}
		case "GUARDED":
			if cur != nil {
				w.h.addGuarded(GuardedWrite{Session: cur.Name, Token: num(1), Version: int32(num(2)), Mzxid: num(3)})
			}
		case "ACKED":
			if cur != nil && len(f) > 2 {
				a := AckedWrite{strings.Join(f[2:], " "), num(1)}
				w.h.update(func() { cur.Acked = append(cur.Acked, a) })
			}
		case "END":
			if cur != nil {
				end := map[string]SessionEnd{"closed": EndClosed, "expired": EndExpired}[f[len(f)-1]]
				w.h.update(func() { cur.End = cmp.Or(end, EndAbandoned) })
				cur = nil
			}
		}
	}
	err = cmd.Wait()
	close(exited)
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		w.contenders.signalled.Add(1)
	}
	p.setHolding(false)
	p.mu.Lock()
	p.mu.cmd = nil
	p.mu.Unlock()
	if cur != nil {
		// Killed with a session open: nobody closes it, so it must expire.
		w.h.update(func() { cur.End = EndAbandoned })
	}
	w.log.Info("contender process exited", "slot", p.slot, "pid", cmd.Process.Pid, "err", err)
	return nil
}

// contenderStats says what the contender processes went through and did.
func (w *Workloads) contenderStats(h *History) string {
	sections, taken, refused := 0, 0, 0
	for _, s := range h.sections {
		if strings.HasPrefix(s.Session, "p") {
			sections++
			taken += s.Accepted
			refused += s.Rejected
		}
	}
	return fmt.Sprintf("lock contender processes: %d started in %d slots, %d ended by a signal; %d critical sections, %d fenced writes taken, %d refused as stale",
		w.contenders.started.Load(), len(w.procs), w.contenders.signalled.Load(), sections, taken, refused)
}

func (p *lockProc) setHolding(on bool) {
	p.mu.Lock()
	p.mu.holding = on
	p.mu.Unlock()
}

// LockHolder returns a contender process slot whose process holds the lock now, waiting up to
// wait for one; nil if none did.
func (w *Workloads) LockHolder(ctx context.Context, wait time.Duration) *lockProc {
	deadline := time.Now().Add(wait)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		for _, p := range w.procs {
			p.mu.Lock()
			ok := p.mu.holding && p.mu.cmd != nil
			p.mu.Unlock()
			if ok {
				return p
			}
		}
		sleepCtx(ctx, 20*time.Millisecond)
	}
	return nil
}

// pid returns the slot's running process, 0 if none.
func (p *lockProc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.cmd == nil {
		return 0
	}
	return p.mu.cmd.Process.Pid
}

// signal sends sig to the slot's process, if it runs.
func (p *lockProc) signal(sig syscall.Signal) error {
	if pid := p.pid(); pid != 0 {
		return syscall.Kill(pid, sig)
	}
	return nil
}

// partition stalls (on) or resumes the slot's connections to every server.
func (p *lockProc) partition(on bool) {
	for _, px := range p.proxies {
		if on {
			px.Stall()
		} else {
			px.Resume()
		}
	}
}

// lineLogger logs what a contender process writes to its standard error, and counts the data
// races it reports (the test binary may be built with the race detector).
type lineLogger struct {
	mu    sync.Mutex
	log   *slog.Logger
	races *atomic.Int64
	rest  []byte
}

func (l *lineLogger) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rest = append(l.rest, b...)
	for {
		i := strings.IndexByte(string(l.rest), '\n')
		if i < 0 {
			break
		}
		line := string(l.rest[:i])
		if strings.Contains(line, "WARNING: DATA RACE") {
			l.races.Add(1)
		}
		l.log.Info(line)
		l.rest = l.rest[i+1:]
	}
	return len(b), nil
}
