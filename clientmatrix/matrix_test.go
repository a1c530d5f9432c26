package clientmatrix

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"

	"github.com/zkd-io/zkd/internal/testkit/zktest"
	"github.com/zkd-io/zkd/server/zkdtest"
)

var update = flag.Bool("update", false, "rewrite the client matrix section of docs/compatibility.md from this run")

func TestMain(m *testing.M) {
	flag.Parse()
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/go-zookeeper/zk.(*Conn).sendLoop"),
		goleak.IgnoreAnyFunction("github.com/go-zookeeper/zk.(*Conn).recvLoop"),
		goleak.IgnoreTopFunction("time.Sleep"), goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}

// Deadlines: a command without an answer in this time is a hang. Curator retries twice with a
// 2 s connection timeout, so its slowest honest answer is about 7 s; a driver gives up a
// connect after 8 s.
const (
	opWithin      = 10 * time.Second
	connectWithin = 12 * time.Second
	// burstWait is how long a driver's burst waits for its results before it classifies them
	// (the drivers' own constants say the same); the matrix allows it burstWait+opWithin.
	burstWait = 8 * time.Second
)

// cell is what one client did under one condition on one server.
type cell struct {
	saw   string // what the application saw: the client's own error name, or ok
	after string // the client afterwards: usable (a probe worked), or the state it reported
	hang  bool   // a command got no answer within its deadline
	dead  bool   // the client's I/O thread died (or the driver process exited)
	dup   bool   // a non-idempotent write was applied twice
	skip  string // why the cell was not run
}

func (c cell) String() string {
	if c.skip != "" {
		return "n/a (" + c.skip + ")"
	}
	s := c.saw
	if c.after != "" {
		s += "; " + c.after
	}
	if c.hang {
		s += " **HANG**"
	}
	if c.dead {
		s += " **I/O thread died**"
	}
	if c.dup {
		s += " **write applied twice**"
	}
	return s
}

// bad is why the cell fails on zkd ("" when it does not).
func (c cell) bad() string {
	switch {
	case c.hang:
		return "the client hung"
	case c.dead:
		return "the client's I/O thread died"
	case c.dup:
		return "a non-idempotent write was applied twice"
	}
	return ""
}

// client is one client's driver during the run; it is restarted after a hang or a crash.
type client struct {
	kind clientKind
	drv  driver
	t    testing.TB
	cell *cell // the cell being filled
	id   string
	pw   string
}

// do runs one command on the client; a hang or an exited driver is marked on the cell and the
// driver replaced for the next condition. ok is false when the answer is not "ok".
func (c *client) do(cmd string, within time.Duration) (reply string, ok bool) {
	if c.drv == nil {
		return "driver gone", false
	}
	out, err := c.drv.do(cmd, within)
	if err != nil {
		if err == errHang {
			c.cell.hang = true
			c.t.Logf("%s: %q: no answer within %v", c.kind.name, cmd, within)
			if p, ok := c.drv.(*proc); ok {
				c.t.Logf("%s's stderr ends: %s", c.kind.name, lastLines(p.stderr(), 15))
			}
			out = "no answer"
		} else {
			c.cell.dead = true
			c.t.Logf("%s: %q: %v", c.kind.name, cmd, err)
			out = "driver exited"
		}
		c.drv.stop()
		c.drv = nil
		return out, false
	}
	if strings.Contains(out, "iothread=dead") || strings.Contains(out, "crashed=") {
		c.cell.dead = true
	}
	return strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(out, "ok"), "err")), strings.HasPrefix(out, "ok")
}

// connect opens the client's session (readOnly: a read-only-allowing one) on addrs.
func (c *client) connect(addrs []string, readOnly bool) bool {
	ro := "0"
	if readOnly {
		ro = "1"
	}
	out, ok := c.do(fmt.Sprintf("connect %s 6000 %s", strings.Join(addrs, ","), ro), connectWithin)
	if ok {
		f := strings.Fields(out)
		if len(f) == 2 {
			c.id, c.pw = f[0], f[1]
		}
	}
	return ok
}

// saw returns the answer of cmd as the application saw it: "ok" or the error name.
func (c *client) saw(cmd string) string {
	out, ok := c.do(cmd, opWithin)
	if ok {
		return "ok"
	}
	return out
}

// probeAfter fills cell.after: "usable" when a probe works on the same handle within d, else
// the last error and the client's state.
func (c *client) probeAfter(path string, d time.Duration) {
	deadline := time.Now().Add(d)
	var last string
	for {
		out, ok := c.do("probe "+path, opWithin)
		if ok {
			c.cell.after = "usable"
			return
		}
		last = out
		if c.drv == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond) // a reconnecting client: try again, bounded by d
	}
	c.cell.after = "not usable (" + last + ")"
	c.stateAfter(false)
}

// stateAfter appends the state the client reports (after a condition that closes the session).
func (c *client) stateAfter(replace bool) { c.reportState(replace, false) }

// stateOnlyAfter is stateAfter without the last event, for conditions where which event came
// last races the test (a reconnection attempt, Curator's SUSPENDED turning LOST).
func (c *client) stateOnlyAfter() { c.reportState(true, true) }

func (c *client) reportState(replace, stateOnly bool) {
	out, ok := c.do("state", opWithin)
	if !ok {
		return
	}
	f := strings.Fields(out)
	for i, s := range f {
		if strings.HasPrefix(s, "iothread=alive") {
			f = slices.Delete(f, i, i+1)
			break
		}
	}
	if stateOnly && len(f) > 1 && !strings.HasPrefix(f[1], "iothread=") && !strings.HasPrefix(f[1], "crashed=") {
		f = slices.Delete(f, 1, 2)
	}
	st := "state " + strings.Join(f, " ")
	if replace || c.cell.after == "" {
		c.cell.after = st
	} else {
		c.cell.after += ", " + st
	}
}

func (c *client) close() {
	if c.drv != nil {
		c.do("close", opWithin)
	}
}

// target is one server implementation.
type target string

const (
	zkd       target = "zkd"
	zookeeper target = "ZooKeeper"
)

// row is one condition of the matrix; run fills a cell per client on one target.
type row struct {
	name string
	// run drives every client through the condition on tg, filling cells[client name]; it
	// returns a reason when the condition cannot be produced on tg.
	run func(t *testing.T, tg target, cs []*client) (notProduced string)
}

// results: row name → target → client name → cell.
type results map[string]map[target]map[string]*cell

// TestClientMatrix drives every client through every condition on zkd and on ZooKeeper.
func TestClientMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real clients and servers")
	}
	if !*update && os.Getenv("CLIENTMATRIX_CHECK") != "1" && os.Getenv("CLIENTMATRIX") != "1" {
		// A few minutes of real clients whose cells depend on timing: run alone, without the
		// race detector, by make client-matrix(-check), not among every package in make test.
		t.Skip("run by make client-matrix-check (or CLIENTMATRIX=1)")
	}
	kinds := clients()
	var cs []*client
	for _, k := range kinds {
		c := &client{kind: k, t: t}
		cs = append(cs, c)
	}
	t.Cleanup(func() {
		for _, c := range cs {
			if c.drv != nil {
				c.drv.stop()
			}
		}
	})
	plainServers[zkd] = zkdtest.Start(t).Addr()
	if zktest.Check() == nil {
		plainServers[zookeeper], _ = standalone(t, zookeeper, nil, nil)
	}
	t.Cleanup(func() { clear(plainServers) })
	res := results{}
	for _, r := range rows() {
		res[r.name] = map[target]map[string]*cell{}
		for _, tg := range []target{zkd, zookeeper} {
			t.Run(r.name+"/"+string(tg), func(t *testing.T) {
				cells := map[string]*cell{}
				res[r.name][tg] = cells
				var live []*client
				for _, c := range cs {
					cl := &cell{}
					cells[c.kind.name] = cl
					c.cell, c.t = cl, t
					if c.kind.missing != "" {
						cl.skip = "not installed"
						continue
					}
					live = append(live, c)
				}
				startDrivers(t, live)
				var ready []*client
				for _, c := range live {
					if c.drv != nil {
						ready = append(ready, c)
					}
				}
				if why := r.run(t, tg, ready); why != "" {
					for _, cl := range cells {
						cl.skip = why
					}
					t.Skip(why)
				}
				for _, c := range ready {
					c.close()
				}
				for _, c := range cs {
					t.Logf("%s: %s", c.kind.name, cells[c.kind.name])
				}
			})
		}
		// On zkd no client may hang, lose its I/O thread or have a write applied twice, unless
		// real ZooKeeper does the same to it under the same condition (the reference: such a
		// cell is the client's limit, not zkd's doing).
		for _, c := range cs {
			z, ref := res[r.name][zkd][c.kind.name], res[r.name][zookeeper][c.kind.name]
			if z == nil || z.bad() == "" {
				continue
			}
			if ref != nil && ref.skip == "" && ref.bad() == z.bad() {
				t.Logf("%s, %s: %s on zkd as on ZooKeeper", r.name, c.kind.name, z.bad())
				continue
			}
			t.Errorf("%s on zkd, %s: %s (%s; ZooKeeper: %v)", c.kind.name, r.name, z.bad(), z, ref)
		}
	}
	for _, k := range kinds {
		if k.missing != "" {
			t.Logf("%s skipped: %s", k.name, k.missing)
		}
	}
	checkDoc(t, res, kinds)
}

// startDrivers starts the drivers that are not running, in parallel.
func startDrivers(t *testing.T, cs []*client) {
	var wg sync.WaitGroup
	for _, c := range cs {
		if c.drv != nil {
			continue
		}
		wg.Go(func() {
			d, err := c.kind.start()
			if err != nil {
				t.Errorf("%s: %v", c.kind.name, err)
				return
			}
			c.drv = d
		})
	}
	wg.Wait()
}

// each runs fn for every client at once and waits for all.
func each(cs []*client, fn func(c *client)) {
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() { fn(c) })
	}
	wg.Wait()
}

// slug turns a client name into a path component.
func slug(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// admin is a go-zookeeper session the test itself uses to set up and inspect the tree.
func admin(t *testing.T, addrs []string) *zk.Conn {
	t.Helper()
	conn, events, err := zk.Connect(addrs, 10*time.Second, zk.WithLogger(nopLogger{}), zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				go func() {
					for range events {
					}
				}()
				return conn
			}
		case <-ctx.Done():
			t.Fatalf("admin session on %v: not connected", addrs)
		}
	}
}

// mkdirs creates each path (and its parents) with the admin session.
func mkdirs(t *testing.T, a *zk.Conn, paths ...string) {
	t.Helper()
	for _, p := range paths {
		parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
		for i := range parts {
			sub := "/" + strings.Join(parts[:i+1], "/")
			if _, err := a.Create(sub, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && err != zk.ErrNodeExists {
				t.Fatalf("create %s: %v", sub, err)
			}
		}
	}
}

// duplicates reports whether a burst directory holds two nodes for one request (n<i>-<seq>
// twice for one i), or a single-write directory more than one node.
func duplicates(t *testing.T, a *zk.Conn, dir string, single bool) bool {
	kids, _, err := a.Children(dir)
	if err != nil {
		t.Logf("children %s: %v", dir, err)
		return false
	}
	if single {
		return len(kids) > 1
	}
	seen := map[string]bool{}
	for _, k := range kids {
		i := strings.LastIndex(k, "-")
		if i < 0 {
			continue
		}
		if seen[k[:i]] {
			return true
		}
		seen[k[:i]] = true
	}
	return false
}

func joinSet(m map[string]bool) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return strings.Join(ks, ",")
}
