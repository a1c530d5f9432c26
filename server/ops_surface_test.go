package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkd-io/zkd/conformance"
	"github.com/zkd-io/zkd/internal/testkit"
	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/server"
	"github.com/zkd-io/zkd/server/zkdtest"
)

func word(t *testing.T, addr, w string) string {
	t.Helper()
	out, err := conformance.FourLetterWord(addr, w, 5*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", w, err)
	}
	return out
}

func TestFourLetterWords(t *testing.T) {
	s := zkdtest.Start(t, zkdtest.WithoutRaft())
	c, _ := connect(t, s.Addr())
	if _, _, _, err := c.GetW("/zookeeper"); err != nil {
		t.Fatal(err)
	}
	if got := word(t, s.Addr(), "ruok"); got != "imok" {
		t.Errorf("ruok = %q", got)
	}
	if got := word(t, s.Addr(), "isro"); got != "rw" {
		t.Errorf("isro = %q", got)
	}
	stats, ok := zk.FLWSrvr([]string{s.Addr()}, 5*time.Second)
	if !ok || stats[0].Mode != zk.ModeStandalone || stats[0].Connections < 1 {
		t.Errorf("go-zookeeper FLWSrvr: ok=%v %+v", ok, stats[0])
	}
	// cons lists its own connection too, as ZooKeeper does (go-zookeeper's FLWCons cannot parse
	// that line, against ZooKeeper either; the conformance suite checks the session lines).
	cons := word(t, s.Addr(), "cons")
	if !regexp.MustCompile(`(?m)^ /127\.0\.0\.1:\d+\[0\]\(queued=0,recved=1,sent=0\)$`).MatchString(cons) ||
		!strings.Contains(cons, fmt.Sprintf("sid=0x%x,", c.SessionID())) {
		t.Errorf("cons = %q; want its own connection's line and the session's", cons)
	}
	mntr := word(t, s.Addr(), "mntr")
	for _, k := range []string{"zk_version\t3.9.5-zkd", "zk_server_state\tstandalone", "zk_znode_count\t", "zk_watch_count\t1\n", "zk_num_alive_connections\t"} {
		if !strings.Contains(mntr, k) {
			t.Errorf("mntr lacks %q:\n%s", k, mntr)
		}
	}
	if got := word(t, s.Addr(), "wchs"); !strings.HasPrefix(got, "1 connections watching 1 paths\nTotal watches:1\n") {
		t.Errorf("wchs = %q", got)
	}
	if got := word(t, s.Addr(), "wchp"); !strings.HasPrefix(got, "/zookeeper\n\t0x") {
		t.Errorf("wchp = %q", got)
	}
	if got := word(t, s.Addr(), "conf"); !strings.Contains(got, "tickTime=200\n") || !strings.Contains(got, "minSessionTimeout=400\n") {
		t.Errorf("conf = %q", got)
	}
	if got := word(t, s.Addr(), "srst"); got != "Server stats reset.\n" {
		t.Errorf("srst = %q", got)
	}
	for _, w := range []string{"stat", "envi", "dump", "dirs", "cons", "crst", "wchc"} {
		if got := word(t, s.Addr(), w); got == "" {
			t.Errorf("%s: empty output", w)
		}
	}
}

func TestFourLetterWordWhitelist(t *testing.T) {
	s := zkdtest.Start(t, zkdtest.WithoutRaft(), zkdtest.WithConfig(func(c *server.Config) { c.FourLetterWords = nil }))
	if got := word(t, s.Addr(), "ruok"); got != "imok" {
		t.Errorf("ruok with the default list = %q", got)
	}
	if got := word(t, s.Addr(), "crst"); got != "crst is not executed because it is not in the whitelist.\n" {
		t.Errorf("crst with the default list = %q", got)
	}
	s2 := zkdtest.Start(t, zkdtest.WithoutRaft(), zkdtest.WithConfig(func(c *server.Config) { c.FourLetterWords = []string{"ruok"} }))
	if got := word(t, s2.Addr(), "mntr"); !strings.Contains(got, "not in the whitelist") {
		t.Errorf("mntr not whitelisted = %q", got)
	}
	if got := word(t, s2.Addr(), "srvr"); !strings.HasPrefix(got, "Zookeeper version: ") {
		t.Errorf("srvr is always allowed; got %q", got)
	}
}

func TestAdminHTTP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := zkdtest.Start(t, zkdtest.WithoutRaft(), zkdtest.WithConfig(func(c *server.Config) { c.AdminListener = ln }))
	base := "http://" + s.AdminAddr()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/ready"); code != 200 {
		t.Errorf("/ready = %d %q", code, body)
	}
	code, body := get("/metrics")
	// znode_count keeps ZooKeeper's name; Prometheus reserves "_count" for summaries and
	// histograms, so it is untyped rather than a gauge.
	if code != 200 || !strings.Contains(body, "# TYPE znode_count untyped\nznode_count ") {
		t.Errorf("/metrics = %d:\n%s", code, body)
	}
	code, body = get("/commands/mntr")
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil || code != 200 {
		t.Fatalf("/commands/mntr = %d %q: %v", code, body, err)
	}
	// ZooKeeper names the command by its primary name, whichever alias was asked for.
	if m["command"] != "monitor" || m["error"] != nil || m["server_state"] != "standalone" {
		t.Errorf("/commands/mntr = %v", m)
	}
	_, body = get("/commands/nosuch")
	if err := json.Unmarshal([]byte(body), &m); err != nil || m["error"] != "Unknown command: nosuch" {
		t.Errorf("/commands/nosuch = %q", body)
	}
}

func TestSessionExpiryDeletesEphemerals(t *testing.T) {
	s := zkdtest.Start(t, zkdtest.WithoutRaft())
	r := dialRaw(t, s.Addr())
	if err := r.NewSession(400); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, r, "/gone-soon", openACL, 1)
	w := rawSession(t, s.Addr())
	// Stop sending anything: the session expires, its ephemeral is deleted, its socket closed.
	if _, err := r.ReadUntilClosed(10 * time.Second); err != nil {
		t.Fatalf("expired session's connection: %v", err)
	}
	testkit.Eventually(t, 10*time.Second, "the ephemeral of an expired session to be deleted", func() bool {
		_, err := w.Do(jute.OpExists, &jute.ExistsRequest{Path: "/gone-soon"}, &jute.ExistsResponse{})
		return err != nil
	})
}

// TestMntrTimesSnapshots checks that the snapshots the log triggers show in mntr under
// ZooKeeper's names, as monitoring reads them.
func TestMntrTimesSnapshots(t *testing.T) {
	s := zkdtest.Start(t, zkdtest.WithConfig(func(c *server.Config) {
		c.Consensus.SnapshotThreshold = 50
		c.Consensus.SnapshotInterval = 50 * time.Millisecond
	}))
	pairs := func() map[string]string {
		m := map[string]string{}
		for line := range strings.SplitSeq(word(t, s.Addr(), "mntr"), "\n") {
			if k, v, ok := strings.Cut(line, "\t"); ok {
				m[k] = v
			}
		}
		return m
	}
	before := pairs()
	for _, k := range []string{"zk_snap_count", "zk_avg_snapshottime", "zk_min_snapshottime", "zk_max_snapshottime", "zk_cnt_snapshottime", "zk_sum_snapshottime"} {
		if _, ok := before[k]; !ok {
			t.Fatalf("mntr lacks %s", k)
		}
	}
	if before["zk_cnt_snapshottime"] != "0" || before["zk_avg_snapshottime"] != "0.0" {
		t.Fatalf("a fresh server reports snapshots: %v", before)
	}
	c, _ := connect(t, s.Addr())
	if _, err := c.Create("/snap", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if _, err := c.Set("/snap", []byte{byte(i)}, -1); err != nil {
			t.Fatal(err)
		}
	}
	var m map[string]string
	testkit.EventuallyNil(t, 10*time.Second, "a snapshot counted after 200 writes over a threshold of 50", func() error {
		if m = pairs(); m["zk_cnt_snapshottime"] == "0" {
			return fmt.Errorf("mntr %v", m)
		}
		return nil
	})
	// snap_count is ZooKeeper's count of snapshots sent to followers: none here.
	if m["zk_snap_count"] != "0" {
		t.Errorf("snap_count %s on a standalone server; want 0", m["zk_snap_count"])
	}
	if m["zk_avg_snapshottime"] == "" || !strings.Contains(m["zk_avg_snapshottime"], ".") {
		t.Errorf("avg_snapshottime = %q", m["zk_avg_snapshottime"])
	}
}
