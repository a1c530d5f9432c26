package server_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkd-io/zkd/internal/testkit"
	"github.com/zkd-io/zkd/internal/testkit/apachezk"
	"github.com/zkd-io/zkd/internal/testkit/zktest"
	"github.com/zkd-io/zkd/recipes"
	"github.com/zkd-io/zkd/server"
	"github.com/zkd-io/zkd/server/zkdtest"
)

// jsonUnmarshal decodes JSON keeping numbers exact (digests use all 64 bits).
func jsonUnmarshal(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return d.Decode(v)
}

// jsonInt returns a JSON number decoded by jsonUnmarshal as an int64.
func jsonInt(t *testing.T, v any) int64 {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("%v (%T) is not a JSON number", v, v)
	}
	i, err := n.Int64()
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// command fetches an admin command from base (http://host:port) as a JSON object.
func command(t *testing.T, base, name string) map[string]any {
	t.Helper()
	var m map[string]any
	resp, err := http.Get(base + "/commands/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if err := jsonUnmarshal(body, &m); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/commands/%s: %d %v: %s", name, resp.StatusCode, err, body)
	}
	return m
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// digestOf returns the zxid and digest of a hash answer's only entry.
func digestOf(t *testing.T, m map[string]any) (zxid, digest int64) {
	t.Helper()
	ds, ok := m["digests"].([]any)
	if !ok || len(ds) != 1 {
		t.Fatalf("hash: digests %v; want one entry", m["digests"])
	}
	d := ds[0].(map[string]any)
	if fmt.Sprint(d["digest_version"]) != "1" {
		t.Errorf("hash: digest_version %v; want 1", d["digest_version"])
	}
	return jsonInt(t, d["zxid"]), jsonInt(t, d["digest"])
}

// The commands ZooKeeper 3.9 has beyond the first set, on a standalone server, over HTTP.
func TestMoreAdminCommands(t *testing.T) {
	t.Setenv("ZOO_TICK_TIME", "200")
	t.Setenv("ZOO_SUPER_PASSWORD", "hunter2")
	const initial = "tickTime=200\nclientPort=2181\n"
	s := zkdtest.Start(t, zkdtest.WithoutRaft(), withAdmin(t),
		zkdtest.WithConfig(func(c *server.Config) { c.InitialConfig = initial }))
	base := "http://" + s.AdminAddr()
	c, _ := connect(t, s.Addr())

	// hash: one digest of the tree at its zxid, the same until the tree changes.
	z1, d1 := digestOf(t, command(t, base, "hash"))
	if z2, d2 := digestOf(t, command(t, base, "hash")); z2 != z1 || d2 != d1 {
		t.Errorf("hash of an unchanged tree: %d/%d then %d/%d", z1, d1, z2, d2)
	}
	if _, err := c.Create("/h", []byte("x"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	z3, d3 := digestOf(t, command(t, base, "hash"))
	if z3 <= z1 || d3 == d1 {
		t.Errorf("hash after a write: zxid %d -> %d, digest %d -> %d; want both to change", z1, z3, d1, d3)
	}
	if got, want := word(t, s.Addr(), "hash"), fmt.Sprintf("%x: %d\n", z3, d3); got != want {
		t.Errorf("hash four-letter word = %q; want %q", got, want)
	}

	// last_snapshot: an in-memory server has none, which ZooKeeper reports as -1.
	if m := command(t, base, "lsnp"); m["command"] != "last_snapshot" || m["zxid"] != "ffffffffffffffff" || fmt.Sprint(m["timestamp"]) != "-1" {
		t.Errorf("last_snapshot = %v", m)
	}
	if m := command(t, base, "icfg"); m["command"] != "initial_configuration" || m["initial_configuration"] != initial {
		t.Errorf("initial_configuration = %v", m)
	}

	// The trace mask: ZooKeeper's default, set over HTTP and by stmk, read by gtmk.
	if m := command(t, base, "get_trace_mask"); fmt.Sprint(m["tracemask"]) != "306" {
		t.Errorf("get_trace_mask = %v; want 306", m)
	}
	if m := command(t, base, "set_trace_mask?traceMask=7"); fmt.Sprint(m["tracemask"]) != "7" || m["error"] != nil {
		t.Errorf("set_trace_mask?traceMask=7 = %v", m)
	}
	if got := word(t, s.Addr(), "gtmk"); got != "7" {
		t.Errorf("gtmk after set_trace_mask = %q; want 7", got)
	}
	if m := command(t, base, "stmk"); m["error"] != "setTraceMask requires long traceMask argument" || m["command"] != "set_trace_mask" {
		t.Errorf("set_trace_mask without an argument = %v", m)
	}
	if m := command(t, base, "set_trace_mask?traceMask=abc"); m["error"] != "setTraceMask requires long traceMask argument, got abc" {
		t.Errorf("set_trace_mask?traceMask=abc = %v", m)
	}
	if got := setTraceMaskWord(t, s.Addr(), 42); got != "42" {
		t.Errorf("stmk 42 = %q", got)
	}
	if m := command(t, base, "gtmk"); fmt.Sprint(m["tracemask"]) != "42" {
		t.Errorf("get_trace_mask after stmk = %v; want 42", m)
	}

	// system_properties: the Go runtime, the effective configuration, the variables that
	// configure zkd (secrets redacted), nothing else from the environment.
	m := command(t, base, "sysp")
	for k, want := range map[string]string{
		"zkd.tickTime": "200", "zkd.maxSessionTimeout": "30000", "zkd.herdWatchThreshold": "10",
		"zkd.slowRequestThresholdMs": "1000", "env.ZOO_TICK_TIME": "200", "env.ZOO_SUPER_PASSWORD": "(redacted)",
		// The overload settings, at ZooKeeper's defaults.
		"zkd.globalOutstandingLimit": "1000", "zkd.request_throttle_max_requests": "0",
		"zkd.request_throttle_stall_time": "100", "zkd.request_throttle_drop_stale": "true",
		"zkd.connection_throttle_tokens": "0", "zkd.connection_throttle_fill_time": "1",
		"zkd.connection_throttle_fill_count": "1", "zkd.connection_throttle_freeze_time": "-1",
		"zkd.connection_throttle_drop_increase": "0.02", "zkd.connection_throttle_drop_decrease": "0.002",
		"zkd.connection_throttle_decrease_ratio": "0", "zkd.connection_throttle_weight_enabled": "false",
		"zkd.connection_throttle_global_session_weight": "3", "zkd.connection_throttle_local_session_weight": "1",
		"zkd.connection_throttle_renew_session_weight": "2", "zkd.largeRequestThreshold": "-1",
		"zkd.largeRequestMaxBytes": "104857600",
	} {
		if m[k] != want {
			t.Errorf("system_properties[%s] = %v; want %q", k, m[k], want)
		}
	}
	if m["go.version"] == nil || m["command"] != "system_properties" {
		t.Errorf("system_properties = %v", m)
	}
	if got, want := fmt.Sprint(m["go.gcpercent"]), runtimeGCPercent(); got != want || want == "0" || m["zkd.clientTcpKeepAlive"] != "false" {
		t.Errorf("system_properties: go.gcpercent %s (the runtime's is %s), zkd.clientTcpKeepAlive %v", got, want, m["zkd.clientTcpKeepAlive"])
	}
	for k := range m {
		if strings.HasPrefix(k, "env.") && !strings.HasPrefix(k, "env.ZOO_") && !strings.HasPrefix(k, "env.GO") {
			t.Errorf("system_properties shows %s", k)
		}
	}

	// A standalone server answers zabstate, observers and orst as ZooKeeper's does.
	if m := command(t, base, "zabstate"); m["voting"] != false || m["zabstate"] != "" {
		t.Errorf("zabstate = %v", m)
	}
	if m := command(t, base, "obsr"); m["command"] != "observers" || fmt.Sprint(m["synced_observers"]) != "0" || fmt.Sprint(m["observers"]) != "[]" {
		t.Errorf("observers = %v", m)
	}
	if m := command(t, base, "orst"); m["command"] != "observer_connection_stat_reset" || m["error"] != nil || len(m) != 2 {
		t.Errorf("observer_connection_stat_reset = %v", m)
	}

	// The command list links every primary name.
	resp, err := http.Get(base + "/commands")
	if err != nil {
		t.Fatal(err)
	}
	list, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, name := range []string{"hash", "last_snapshot", "initial_configuration", "get_trace_mask", "set_trace_mask",
		"system_properties", "zabstate", "observers", "observer_connection_stat_reset", "locks", "monitor"} {
		if !strings.Contains(string(list), ">"+name+"</a>") {
			t.Errorf("/commands does not list %s", name)
		}
	}
}

// setTraceMaskWord sends stmk with its 8-byte mask, as ZooKeeper's clients do, and returns the
// answer.
func setTraceMaskWord(t *testing.T, addr string, mask int64) string {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	msg := binary.BigEndian.AppendUint64([]byte("stmk"), uint64(mask))
	if _, err := nc.Write(msg); err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(nc)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// last_snapshot on a durable server names the newest snapshot it took: its zxid and time.
func TestLastSnapshotCommand(t *testing.T) {
	before := time.Now().Unix()
	s := zkdtest.Start(t, zkdtest.WithDir(t.TempDir()), withAdmin(t), zkdtest.WithConfig(func(c *server.Config) {
		c.Consensus.SnapshotBytes = 4 << 10 // a snapshot every 4 KiB of log
	}))
	base := "http://" + s.AdminAddr()
	c, _ := connect(t, s.Addr())
	for i := range 20 {
		if _, err := c.Create(fmt.Sprintf("/s%d", i), make([]byte, 512), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	var m map[string]any
	testkit.EventuallyNil(t, 20*time.Second, "a snapshot", func() error {
		if m = command(t, base, "last_snapshot"); m["zxid"] == "ffffffffffffffff" {
			return fmt.Errorf("last_snapshot %v", m)
		}
		return nil
	})
	zxid, err := strconv.ParseUint(m["zxid"].(string), 16, 64)
	ts := jsonInt(t, m["timestamp"])
	if err != nil || zxid == 0 || zxid > uint64(s.Stats().LastZxid) || ts < before || ts > time.Now().Unix() {
		t.Errorf("last_snapshot = %v; want a zxid up to 0x%x and a time since %d", m, s.Stats().LastZxid, before)
	}
}

// On a 3-server cluster every member computes the same digest at the same zxid, answers zabstate
// as a voting member in broadcast, and reports a lock's owner as connected here, attached to
// another server (the leader knows which), or unknown (a follower does not).
func TestClusterHashZabstateAndLocks(t *testing.T) {
	cl := zkdtest.StartCluster(t, 3, zkdtest.WithConfig(func(c *server.Config) { c.AdminAddr = "127.0.0.1:0" }))
	c, _ := connect(t, cl.Servers[0].Addr())
	var last int64
	for i := range 10 {
		p := fmt.Sprintf("/d%d", i)
		if _, err := c.Create(p, []byte(p), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		st, err := c.Set(p, []byte("v"), 0)
		if err != nil {
			t.Fatal(err)
		}
		last = st.Mzxid
	}
	digests := map[int64]int64{}
	for i, s := range cl.Servers {
		testkit.EventuallyNil(t, 10*time.Second, fmt.Sprintf("server %d's hash at zxid 0x%x", i+1, last), func() error {
			z, d := digestOf(t, command(t, "http://"+s.AdminAddr(), "hash"))
			if z > last {
				t.Fatalf("server %d: hash at zxid 0x%x; want it at 0x%x", i+1, z, last)
			}
			if z != last {
				return fmt.Errorf("hash at zxid 0x%x", z)
			}
			digests[d]++
			return nil
		})
		if m := command(t, "http://"+s.AdminAddr(), "zabstate"); m["voting"] != true || m["zabstate"] != "broadcast" {
			t.Errorf("server %d: zabstate = %v", i+1, m)
		}
	}
	if len(digests) != 1 {
		t.Errorf("digests at zxid 0x%x differ between members: %v", last, digests)
	}

	sess := lockSession(t, cl.Servers[0].Addr())
	lease, err := recipes.NewMutex(sess, "/cluster/lock").Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lease.Unlock(context.Background()) }()
	leader := cl.Leader()
	for i, s := range cl.Servers {
		rep := waitLocks(t, s, "", func(rep server.LockReport) bool { _, ok := queueAt(rep, "/cluster/lock"); return ok })
		q, _ := queueAt(rep, "/cluster/lock")
		h := q.Holder
		if h.SessionID != sess.ID() || h.Node != lease.Token().Path || h.SessionAgeMs < 0 {
			t.Errorf("server %d: holder %+v; want session 0x%x on %s with a known age", i+1, h, sess.ID(), lease.Token().Path)
		}
		switch {
		case i == 0:
			if !strings.HasPrefix(h.ClientAddress, "127.0.0.1:") || h.Server != "1" || h.LastActivityMs < 0 {
				t.Errorf("server 1 (the client's): holder %+v; want its address and activity", h)
			}
		case s == leader:
			if h.ClientAddress != "remote" || h.Server != "1" || h.LastActivityMs < 0 {
				t.Errorf("server %d (leader): holder %+v; want remote on server 1, with its activity", i+1, h)
			}
		default:
			if h.ClientAddress != "unknown" || h.Server != "" || h.LastActivityMs != -1 {
				t.Errorf("server %d (follower): holder %+v; want unknown", i+1, h)
			}
		}
	}
}

// Where ZooKeeper 3.8 has the same command, zkd answers with the same keys (and, for the
// commands whose values do not depend on the implementation, the same values). The reference is
// a real ZooKeeper with its AdminServer on; the test skips without one.
func TestAdminCommandShapesMatchZooKeeper(t *testing.T) {
	if err := apachezk.AdminServerInstalled(); err != nil {
		t.Skip(err)
	}
	zkBase, zkAddr := startZooKeeperWithAdmin(t)
	s := zkdtest.Start(t, zkdtest.WithoutRaft(), withAdmin(t))
	zkdBase := "http://" + s.AdminAddr()
	// ZooKeeper logs a digest every 128 transactions: enough writes that it has one.
	for _, addr := range []string{zkAddr, s.Addr()} {
		c, _ := connect(t, addr)
		for i := range 130 {
			if _, err := c.Create(fmt.Sprintf("/n%d", i), nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, name := range []string{"hash", "last_snapshot", "lsnp", "initial_configuration", "icfg", "get_trace_mask", "gtmk",
		"set_trace_mask?traceMask=306", "set_trace_mask", "set_trace_mask?traceMask=x", "system_properties", "zabstate",
		"observers", "obsr", "observer_connection_stat_reset", "orst"} {
		want, got := command(t, zkBase, name), command(t, zkdBase, name)
		if name == "system_properties" {
			// The JVM's properties against the Go runtime's settings: only the frame compares.
			if want["command"] != got["command"] || got["error"] != nil || want["error"] != nil {
				t.Errorf("%s: zkd %v/%v, ZooKeeper %v/%v", name, got["command"], got["error"], want["command"], want["error"])
			}
			continue
		}
		if fmt.Sprint(keys(got)) != fmt.Sprint(keys(want)) {
			t.Errorf("%s: zkd's keys %v; ZooKeeper's %v", name, keys(got), keys(want))
		}
		for _, k := range []string{"command", "error", "tracemask", "voting", "zabstate", "synced_observers", "observers"} {
			if fmt.Sprint(got[k]) != fmt.Sprint(want[k]) {
				t.Errorf("%s: zkd's %s = %v; ZooKeeper's %v", name, k, got[k], want[k])
			}
		}
		if name == "hash" {
			zd, wd := got["digests"].([]any), want["digests"].([]any)
			if len(wd) == 0 || len(zd) == 0 {
				t.Fatalf("hash: digests %v (zkd), %v (ZooKeeper)", zd, wd)
			}
			if g, w := keys(zd[0].(map[string]any)), keys(wd[0].(map[string]any)); fmt.Sprint(g) != fmt.Sprint(w) {
				t.Errorf("hash: digest keys %v; ZooKeeper's %v", g, w)
			}
		}
		if _, ok := want["zxid"].(string); ok {
			if _, ok := got["zxid"].(string); !ok {
				t.Errorf("%s: zxid %v is not a string as ZooKeeper's is", name, got["zxid"])
			}
		}
	}
}

// startZooKeeperWithAdmin starts a standalone ZooKeeper 3.8 with its AdminServer on and returns
// the AdminServer's base URL and the client address.
func startZooKeeperWithAdmin(t *testing.T) (base, addr string) {
	t.Helper()
	var adminPort int
	p := zktest.Launch(t, 2, func(ports []int) apachezk.ServerConfig {
		adminPort = ports[1]
		return apachezk.ServerConfig{
			Dir:        t.TempDir(),
			ClientAddr: fmt.Sprintf("127.0.0.1:%d", ports[0]),
			HeapMB:     256,
			Extra: map[string]string{"admin.enableServer": "true", "admin.serverAddress": "127.0.0.1",
				"admin.serverPort": strconv.Itoa(ports[1])},
		}
	})
	base = fmt.Sprintf("http://127.0.0.1:%d", adminPort)
	testkit.EventuallyNil(t, 30*time.Second, "ZooKeeper's AdminServer at "+base, func() error {
		resp, err := http.Get(base + "/commands/ruok")
		if err == nil {
			resp.Body.Close()
		}
		return err
	})
	return base, p.ClientAddr()
}

// runtimeGCPercent is the GC percent in force, as system_properties should report it.
func runtimeGCPercent() string {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return strconv.FormatInt(int64(s[0].Value.Uint64()), 10)
}
