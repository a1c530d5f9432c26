package conformance

import (
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkd-io/zkd/jute"
)

// waitTimeout bounds every wait for an event or a reply in a check.
const waitTimeout = 10 * time.Second

// check is one named conformance check.
type check struct {
	name string
	run  func(t *testing.T, e *env)
}

var checkNameRE = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// runChecks runs every check against every target as Test<Area>/<target>/<check>, in parallel.
func runChecks(t *testing.T, area string, checks []check) {
	t.Helper()
	if theSuite.skip != "" {
		t.Skip(theSuite.skip)
	}
	seen := map[string]bool{}
	for _, c := range checks {
		if !checkNameRE.MatchString(c.name) || seen[c.name] {
			t.Fatalf("check name %q is not unique or not made of [A-Za-z0-9_]", c.name)
		}
		seen[c.name] = true
	}
	for _, tg := range theSuite.targets {
		t.Run(tg.Name, func(t *testing.T) {
			for _, c := range checks {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					c.run(t, newEnv(t, tg, area+"-"+c.name))
				})
			}
		})
	}
}

// env is what a check works with: its target, its own path prefix (created before the check
// runs, so checks never touch each other's nodes) and a connected go-zookeeper client.
type env struct {
	t    *testing.T
	tg   *Target
	base string
	zk   *zk.Conn
}

// discardLogger silences go-zookeeper, which would otherwise log from its goroutines after a
// test has ended.
type discardLogger struct{}

func (discardLogger) Printf(string, ...any) {}

func newEnv(t *testing.T, tg *Target, name string) *env {
	t.Helper()
	e := &env{t: t, tg: tg}
	e.zk, _ = e.connect(10 * time.Second)
	root := "/zkconf-" + theSuite.runID
	if _, err := e.zk.Create(root, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		t.Fatalf("create suite root %s: %v", root, err)
	}
	// A sequential name keeps reruns in one process (-count=N) apart.
	base, err := e.zk.Create(root+"/"+name+"-", nil, zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatalf("create check root under %s: %v", root, err)
	}
	e.base = base
	return e
}

// p returns the check's base path joined with the given segments.
func (e *env) p(segments ...string) string {
	return e.base + "/" + strings.Join(segments, "/")
}

// connect opens a go-zookeeper session to the target's first server with the given timeout and
// waits until it has a session. Every connection of a check goes to the same server (raw ones
// too), so a check sees its own writes on a cluster without syncing; cluster checks pick other
// servers explicitly with connectTo. The connection is closed when the test ends. The returned
// channel carries session events.
func (e *env) connect(timeout time.Duration) (*zk.Conn, <-chan zk.Event) {
	e.t.Helper()
	return e.connectTo(e.tg.Addrs[:1], timeout)
}

// connectTo is connect to the given servers.
func (e *env) connectTo(addrs []string, timeout time.Duration) (*zk.Conn, <-chan zk.Event) {
	e.t.Helper()
	// Through a cutter, so a reconnect waits for setWatches before replies flow (replyGate).
	c, events, err := zk.Connect(addrs, timeout, zk.WithDialer(newCutter().dial),
		zk.WithLogger(discardLogger{}), zk.WithLogInfo(false))
	if err != nil {
		e.t.Fatalf("zk.Connect(%v): %v", addrs, err)
	}
	e.t.Cleanup(c.Close)
	deadline := time.After(waitTimeout)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				e.t.Fatalf("zk.Connect: event channel closed before a session was established")
			}
			if ev.State == zk.StateHasSession {
				return c, events
			}
		case <-deadline:
			e.t.Fatalf("zk.Connect(%v): no session within %v", addrs, waitTimeout)
		}
	}
}

// conn opens another go-zookeeper session (10 s timeout).
func (e *env) conn() *zk.Conn {
	e.t.Helper()
	c, _ := e.connect(10 * time.Second)
	return c
}

// dial opens a raw connection to the first server with no handshake.
func (e *env) dial() *Raw {
	e.t.Helper()
	return e.dialAddr(e.tg.Addrs[0])
}

func (e *env) dialAddr(addr string) *Raw {
	e.t.Helper()
	r, err := DialRaw(addr, waitTimeout)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = r.Close() })
	return r
}

// raw opens a raw connection with a new 10 s session.
func (e *env) raw() *Raw {
	e.t.Helper()
	return e.rawTimeout(10000)
}

func (e *env) rawTimeout(ms int32) *Raw {
	e.t.Helper()
	r := e.dial()
	if err := r.NewSession(ms); err != nil {
		e.t.Fatal(err)
	}
	return r
}

// mk creates a persistent node with world:anyone ALL through go-zookeeper and fails the check on error.
func (e *env) mk(path string, data []byte) {
	e.t.Helper()
	if _, err := e.zk.Create(path, data, 0, zk.WorldACL(zk.PermAll)); err != nil {
		e.t.Fatalf("create %s: %v", path, err)
	}
}

// stat returns the Stat of path through go-zookeeper.
func (e *env) stat(path string) *zk.Stat {
	e.t.Helper()
	ok, st, err := e.zk.Exists(path)
	if err != nil || !ok {
		e.t.Fatalf("exists %s = %v, %v", path, ok, err)
	}
	return st
}

// exists reports whether path exists, after a sync so a cluster follower is up to date.
func (e *env) exists(path string) bool {
	e.t.Helper()
	if _, err := e.zk.Sync(path); err != nil {
		e.t.Fatalf("sync %s: %v", path, err)
	}
	ok, _, err := e.zk.Exists(path)
	if err != nil {
		e.t.Fatalf("exists %s: %v", path, err)
	}
	return ok
}

// zkEvent waits for one event on a go-zookeeper watch channel.
func zkEvent(t *testing.T, ch <-chan zk.Event) zk.Event {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(waitTimeout):
		t.Fatalf("no watch event within %v", waitTimeout)
		return zk.Event{}
	}
}

// noZKEvent fails if ch already holds an event. Use it after a round trip on the connection that
// holds the watch: events are delivered before later replies, so one that was due has arrived.
func noZKEvent(t *testing.T, ch <-chan zk.Event) {
	t.Helper()
	select {
	case ev := <-ch:
		t.Fatalf("unexpected watch event %+v", ev)
	default:
	}
}

// wantCode fails unless err is the ZooKeeper code want (a jute.Code from Raw.Do).
func wantCode(t *testing.T, what string, err error, want jute.Code) {
	t.Helper()
	if want == jute.CodeOK {
		if err != nil {
			t.Fatalf("%s: %v; want success", what, err)
		}
		return
	}
	var got jute.Code
	if !errors.As(err, &got) || got != want {
		t.Fatalf("%s: err = %v; want code %d (%v)", what, err, int32(want), want)
	}
}

// wantOneOf is wantCode for checks where more than one answer is correct.
func wantOneOf(t *testing.T, what string, err error, want ...jute.Code) jute.Code {
	t.Helper()
	var got jute.Code
	if err == nil {
		got = jute.CodeOK
	} else if !errors.As(err, &got) {
		t.Fatalf("%s: err = %v; want one of %v", what, err, want)
	}
	if !slices.Contains(want, got) {
		t.Fatalf("%s: code %d (%v); want one of %v", what, int32(got), got, want)
	}
	return got
}

// must fails the check on a non-nil error.
func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// openACL is world:anyone ALL in the jute form.
func openACL() []jute.ACL {
	return []jute.ACL{{Perms: jute.PermAll, ID: jute.Id{Scheme: "world", ID: "anyone"}}}
}

// rawCreate creates a node through a raw connection with op create2 and returns the reply and stat.
func rawCreate(t *testing.T, r *Raw, path string, data []byte, flags jute.CreateMode) (jute.ReplyHeader, jute.Create2Response) {
	t.Helper()
	var resp jute.Create2Response
	h, err := r.Do(jute.OpCreate2, &jute.CreateRequest{Path: path, Data: data, ACL: openACL(), Flags: flags}, &resp)
	must(t, "create2 "+path, err)
	return h, resp
}

// barrierEvent waits for the next notification on r and fails unless it is for path: the barrier
// change comes after everything the check did, so an earlier unexpected event shows up first.
func barrierEvent(t *testing.T, r *Raw, path string) {
	t.Helper()
	ev, _, err := r.WaitEvent()
	must(t, "wait for the barrier event", err)
	if ev.Path != path || ev.Type != jute.EventNodeDataChanged {
		t.Fatalf("event %v on %s arrived before the barrier's NodeDataChanged on %s", ev.Type, ev.Path, path)
	}
}

// watchBarrier sets a data watch on a fresh node through r, changes it through the go-zookeeper
// client, and checks that the barrier's event is the next one r receives.
func (e *env) watchBarrier(r *Raw) {
	e.t.Helper()
	path := e.p("barrier")
	if ok, _, _ := e.zk.Exists(path); !ok {
		e.mk(path, nil)
	}
	var resp jute.GetDataResponse
	_, err := r.Do(jute.OpGetData, &jute.GetDataRequest{Path: path, Watch: true}, &resp)
	must(e.t, "getData barrier watch", err)
	if _, err := e.zk.Set(path, []byte("x"), -1); err != nil {
		e.t.Fatalf("set barrier: %v", err)
	}
	barrierEvent(e.t, r, path)
}

// seen logs which of several accepted behaviours (usually ZooKeeper 3.8's or 3.9's) the target showed.
// isZkd reports whether the target is zkd, which some checks hold to a stricter answer than
// real ZooKeeper gives every time.
func (e *env) isZkd() bool { return strings.HasPrefix(e.tg.Name, "zkd") }

func (e *env) seen(format string, args ...any) {
	e.t.Helper()
	e.t.Logf("target %s (version %q): "+format, append([]any{e.tg.Name, e.tg.Version}, args...)...)
}

func itoa(i int) string { return strconv.Itoa(i) }

// digestACL is ALL for one digest user.
func digestACL(user, password string) []zk.ACL { return zk.DigestACL(zk.PermAll, user, password) }
