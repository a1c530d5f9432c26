package recipes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zkd-io/zkd/internal/testkit/pyclient"
)

// kazooCandidate is a kazoo Election candidate the election interop test drives a step at a time,
// with the same commands as testdata/LatchCandidate.java: python3 - HOSTS PATH ID TIMEOUT_MS.
// Its leader is the first of kazoo's contenders(), which lists the contenders' identifiers in
// kazoo's order.
const kazooCandidate = `
import sys, threading, time
from kazoo.client import KazooClient
hosts, path, ident, timeout = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]) / 1000.0
out = threading.Lock()
def say(line):
    with out:
        print(line, flush=True)
zk = KazooClient(hosts=hosts, timeout=timeout)
zk.start()
say("READY")
election = zk.Election(path, ident)
resign = threading.Event()
def lead():
    say("LEADING")
    resign.wait()
runner = None
for line in sys.stdin:
    cmd = line.strip()
    if cmd == "campaign":
        runner = threading.Thread(target=election.run, args=(lead,), daemon=True)
        runner.start()
        while election.lock.node is None:
            time.sleep(0.005)
        say("QUEUED " + election.lock.node)
    elif cmd == "leader":
        c = election.contenders()
        say("LEADER " + (c[0] if c else "-"))
    elif cmd == "resign":
        resign.set()
        runner.join()
        say("RESIGNED")
    else:
        say("UNKNOWN " + cmd)
zk.stop()
`

// TestElectionInterop queues Go Election candidates and candidates of another library on one
// path, alternating (Go, other, Go, other), and lets each lead in turn: Curator's LeaderLatch
// beside Election in CuratorLatch mode, and kazoo's Election beside Election in Kazoo mode. While
// each candidate leads, every observer names it: the Go side's Leader and the other library's
// own (LeaderLatch.getLeader, kazoo's contenders()), and no later candidate believes it leads.
// Leadership follows the queue order across languages, a Go Observe reports no other order, the
// second leader (the other library's) is killed with SIGKILL instead of resigning and the next
// candidate leads within the session timeout and a few seconds, and once the last resigns both
// sides name no leader.
func TestElectionInterop(t *testing.T) {
	t.Run("curator-latch", func(t *testing.T) {
		java, cp := curatorJava(t)
		electionInterop(t, CuratorLatch, func(ctx context.Context, p, id string) *stepProcess {
			return startStepProcess(t, ctx, java, "-Xmx96m", "-cp", cp, filepath.Join("testdata", "LatchCandidate.java"),
				strings.Join(testServer(t), ","), p, id, strconv.Itoa(int(testTimeout/time.Millisecond)))
		})
	})
	t.Run("kazoo-election", func(t *testing.T) {
		py := pyclient.KazooPython(t)
		script := filepath.Join(t.TempDir(), "candidate.py")
		if err := os.WriteFile(script, []byte(kazooCandidate), 0o600); err != nil {
			t.Fatal(err)
		}
		electionInterop(t, Kazoo, func(ctx context.Context, p, id string) *stepProcess {
			return startStepProcess(t, ctx, py, script, strings.Join(testServer(t), ","), p, id,
				strconv.Itoa(int(testTimeout/time.Millisecond)))
		})
	})
}

// candidate is one election candidate the test drives, of either language.
type candidate struct {
	id       string
	campaign func()          // queue; returns once the candidate's node exists
	leading  <-chan struct{} // closed once the candidate believes it leads
	resign   func()
	proc     *stepProcess // the other library's candidate; nil for Go
}

func electionInterop(t *testing.T, proto Protocol, start func(ctx context.Context, p, id string) *stepProcess) {
	const bound = testTimeout + 8*time.Second // a killed leader's successor: a tick late at most, and room for a loaded machine
	p := testPath(t)
	ctx := testCtx(t, 120*time.Second)
	obs := newTestSession(t, nil)
	if err := ensurePath(ctx, obs, p); err != nil {
		t.Fatal(err)
	}
	// The other library's processes start first: their start-up is the slow part.
	procs := []*stepProcess{start(ctx, p, "other-1"), start(ctx, p, "other-2")}
	errs := make(chan error, 8)
	goCandidate := func(id string) *candidate {
		e := NewElection(newTestSession(t, nil), p, WithProtocol(proto), WithData([]byte(id)))
		leading := make(chan struct{})
		lease := make(chan *Lease, 1)
		return &candidate{
			id: id,
			campaign: func() {
				go func() {
					l, err := e.Campaign(ctx)
					if err != nil {
						errs <- fmt.Errorf("%s: campaign: %w", id, err)
						return
					}
					lease <- l
					close(leading)
				}()
			},
			leading: leading,
			resign: func() {
				if err := (<-lease).Unlock(ctx); err != nil {
					t.Errorf("%s: resign: %v", id, err)
				}
			},
		}
	}
	otherCandidate := func(sp *stepProcess, id string) *candidate {
		sp.waitReady(t, ctx)
		return &candidate{
			id:       id,
			campaign: func() { sp.ask(t, ctx, "campaign", "QUEUED ") },
			leading:  sp.leading,
			resign:   func() { sp.ask(t, ctx, "resign", "RESIGNED") },
			proc:     sp,
		}
	}
	order := []*candidate{goCandidate("go-1"), otherCandidate(procs[0], "other-1"), goCandidate("go-2"), otherCandidate(procs[1], "other-2")}
	ids := make([]string, len(order))
	for i, c := range order {
		ids[i] = c.id
	}

	// A Go observer follows the leadership throughout.
	obsCtx, stopObserving := context.WithCancel(ctx)
	var observed []string
	observing := make(chan struct{})
	go func() {
		defer close(observing)
		for l := range NewElection(obs, p, WithProtocol(proto)).Observe(obsCtx) {
			if id := string(l.Data); l.Path != "" && (len(observed) == 0 || observed[len(observed)-1] != id) {
				observed = append(observed, id)
			}
		}
	}()

	for i, c := range order {
		c.campaign()
		for len(children(t, obs, p)) != i+1 {
			select {
			case err := <-errs:
				t.Fatal(err)
			case <-ctx.Done():
				t.Fatalf("%s never queued", c.id)
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	// allName waits until every observer names want: the Go side's Leader and each live process
	// of the other library ("-" for no leader). On a cluster an observer's member may not have
	// applied the last change yet, so each may name the previous leader, prev, for a moment, and
	// nothing else.
	goObserver := NewElection(obs, p, WithProtocol(proto))
	allName := func(want, prev string) {
		t.Helper()
		namers := map[string]func() string{"go": func() string {
			_, _ = obs.Conn().Sync(p)
			l, err := goObserver.Leader(ctx)
			if errors.Is(err, ErrNoLeader) {
				return "-"
			}
			if err != nil {
				t.Fatalf("go observer: %v", err)
			}
			return string(l.Data)
		}}
		for j, sp := range procs {
			if !sp.killed {
				namers[fmt.Sprintf("other-%d", j+1)] = func() string { return sp.ask(t, ctx, "leader", "LEADER ") }
			}
		}
		for who, name := range namers {
			for {
				got := name()
				if got == want {
					break
				}
				if got != prev || ctx.Err() != nil {
					t.Fatalf("while %s leads, observer %s names %q", want, who, got)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	for i, c := range order {
		waitFrom := time.Now()
		select {
		case <-c.leading:
		case err := <-errs:
			t.Fatal(err)
		case <-ctx.Done():
			t.Fatalf("%s never led (order %v)", c.id, ids)
		}
		if i > 0 && order[i-1].proc != nil && order[i-1].proc.killed {
			took := time.Since(waitFrom)
			t.Logf("%s led %v after %s was killed", c.id, took.Round(time.Millisecond), order[i-1].id)
			if took > bound {
				t.Errorf("%s led %v after %s was killed; want within %v", c.id, took, order[i-1].id, bound)
			}
		}
		for _, later := range order[i+1:] {
			if isClosed(later.leading) {
				t.Errorf("%s believes it leads while %s does", later.id, c.id)
			}
		}
		prev := ""
		if i > 0 {
			prev = order[i-1].id
		}
		allName(c.id, prev)
		if i == 1 {
			c.proc.kill(t)
			continue
		}
		c.resign()
	}
	// Nobody leads now: both sides say so (a LeaderLatch deletes its node after close returns).
	allName("-", order[len(order)-1].id)
	stopObserving()
	<-observing
	// Observe may miss a leadership that came and went between its reads, never reorder them.
	at := 0
	for _, id := range observed {
		k := slices.Index(ids[at:], id)
		if k < 0 {
			t.Errorf("the Go observer reported leaders %v; want them in the order %v", observed, ids)
			break
		}
		at += k
	}
	t.Logf("leaders in order %v; the Go observer saw %v", ids, observed)
}

// stepProcess is another library's election candidate, driven a command at a time on its
// standard input (see LatchCandidate.java). LEADING may come at any moment; every other line
// answers a command.
type stepProcess struct {
	cmd     *exec.Cmd
	in      io.WriteCloser
	out     lockedBuffer  // everything it printed, for failures
	lines   chan string   // its lines other than LEADING
	leading chan struct{} // closed when it prints LEADING
	killed  bool
}

func startStepProcess(t *testing.T, ctx context.Context, name string, args ...string) *stepProcess {
	t.Helper()
	sp := &stepProcess{cmd: exec.CommandContext(ctx, name, args...), lines: make(chan string, 16), leading: make(chan struct{})}
	var err error
	if sp.in, err = sp.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	sp.cmd.Stderr = &sp.out
	out := startLines(t, sp.cmd, false)
	go func() {
		defer close(sp.lines)
		for line := range out {
			_, _ = sp.out.Write([]byte(line + "\n"))
			if line == "LEADING" {
				close(sp.leading)
				continue
			}
			sp.lines <- line
		}
	}()
	return sp
}

// next returns its next line other than LEADING.
func (sp *stepProcess) next(t *testing.T, ctx context.Context, what string) string {
	t.Helper()
	select {
	case l, ok := <-sp.lines:
		if !ok {
			t.Fatalf("the candidate process ended before %s: %s", what, sp.out.String())
		}
		return l
	case <-ctx.Done():
		t.Fatalf("no %s from the candidate process: %s", what, sp.out.String())
		return ""
	}
}

func (sp *stepProcess) waitReady(t *testing.T, ctx context.Context) {
	t.Helper()
	if l := sp.next(t, ctx, "READY"); l != "READY" {
		t.Fatalf("the candidate process said %q; want READY: %s", l, sp.out.String())
	}
}

// ask sends a command and returns its answer, which must start with prefix, without the prefix.
func (sp *stepProcess) ask(t *testing.T, ctx context.Context, command, prefix string) string {
	t.Helper()
	if _, err := io.WriteString(sp.in, command+"\n"); err != nil {
		t.Fatalf("%s: %v: %s", command, err, sp.out.String())
	}
	l := sp.next(t, ctx, command)
	rest, ok := strings.CutPrefix(l, prefix)
	if !ok {
		t.Fatalf("%s: the candidate process said %q; want %s…: %s", command, l, prefix, sp.out.String())
	}
	return rest
}

// kill stops the process with SIGKILL, as a crash would: its session lives on until it expires.
func (sp *stepProcess) kill(t *testing.T) {
	t.Helper()
	if err := sp.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	sp.killed = true
}
