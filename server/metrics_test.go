package server_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkd-io/zkd/internal/testkit"
	"github.com/zkd-io/zkd/server"
	"github.com/zkd-io/zkd/server/zkdtest"
)

// telegrafLine is the pattern Telegraf's zookeeper input applies to every mntr line; a line
// that does not match fails the whole collection.
var telegrafLine = regexp.MustCompile(`^zk_(\w+)\s+([\w\.\-]+)`)

// textKeys are the mntr keys whose value is text; agents skip them or make labels of them.
var textKeys = map[string]bool{"zk_version": true, "zk_server_state": true, "zk_peer_state": true}

// parseMntr reads mntr the way monitoring agents do: one "zk_key<TAB>value" per line, every
// value but the text ones a number. It fails the test on any line an agent would reject.
func parseMntr(t *testing.T, out string) map[string]float64 {
	t.Helper()
	m := map[string]float64{}
	for line := range strings.SplitSeq(strings.TrimSuffix(out, "\n"), "\n") {
		key, value, ok := strings.Cut(line, "\t")
		if !ok || strings.Contains(value, "\t") || !strings.HasPrefix(key, "zk_") {
			t.Fatalf("mntr line %q is not zk_key<TAB>value", line)
		}
		if !telegrafLine.MatchString(line) {
			t.Fatalf("mntr line %q does not match Telegraf's pattern", line)
		}
		if _, dup := m[key]; dup {
			t.Fatalf("mntr repeats %s", key)
		}
		if textKeys[key] {
			m[key] = 0
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("mntr %s = %q is not a number", key, value)
		}
		m[key] = v
	}
	return m
}

func mntr(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	return parseMntr(t, word(t, addr, "mntr"))
}

// summaryKeys returns the mntr keys of one of ZooKeeper's summaries.
func summaryKeys(name string, advanced bool) []string {
	keys := []string{"zk_avg_" + name, "zk_min_" + name, "zk_max_" + name, "zk_cnt_" + name, "zk_sum_" + name}
	if advanced {
		keys = append(keys, "zk_p50_"+name, "zk_p95_"+name, "zk_p99_"+name, "zk_p999_"+name)
	}
	return keys
}

// agentKeys are the mntr keys the monitoring agents and dashboards read (Datadog's zk check,
// Telegraf's zookeeper input, the mntr exporters, ZooKeeper's Grafana dashboard) that every zkd
// server serves.
func agentKeys() []string {
	keys := []string{
		"zk_version", "zk_server_state", "zk_avg_latency", "zk_min_latency", "zk_max_latency",
		"zk_packets_received", "zk_packets_sent", "zk_num_alive_connections", "zk_outstanding_requests",
		"zk_znode_count", "zk_watch_count", "zk_ephemerals_count", "zk_approximate_data_size",
		"zk_open_file_descriptor_count", "zk_max_file_descriptor_count", "zk_global_sessions",
		"zk_local_sessions", "zk_uptime", "zk_auth_failed_count", "zk_connection_rejected",
		"zk_bytes_received_count", "zk_response_bytes", "zk_last_client_response_size",
		"zk_min_client_response_size", "zk_max_client_response_size", "zk_connection_request_count",
		"zk_connection_revalidate_count", "zk_sessionless_connections_expired", "zk_stale_sessions_expired",
		"zk_stale_requests", "zk_stale_requests_dropped", "zk_large_requests_rejected",
		"zk_request_throttle_wait_count", "zk_looking_count", "zk_proposal_count", "zk_commit_count",
		"zk_learner_proposal_received_count", "zk_learner_commit_received_count", "zk_snap_count",
		"zk_apply_lag", "zk_log_size", "zk_snapshot_size", "zk_disk_full",
	}
	for _, s := range []string{"readlatency", "updatelatency", "propagation_latency", "commit_propagation_latency", "local_write_committed_time_ms"} {
		keys = append(keys, summaryKeys(s, true)...)
	}
	for _, s := range []string{"fsynctime", "snapshottime", "dbinittime", "election_time", "commit_process_time",
		"sync_processor_batch_size", "unavailable_time", "leader_unavailable_time", "follower_sync_time",
		"node_created_watch_count", "node_deleted_watch_count", "node_changed_watch_count", "node_children_watch_count"} {
		keys = append(keys, summaryKeys(s, false)...)
	}
	return keys
}

// traffic makes writes, reads and watches of every kind fire on addr, and returns the number of
// writes it made.
func traffic(t *testing.T, addr, prefix string) int {
	t.Helper()
	c, _ := connect(t, addr)
	acl := zk.WorldACL(zk.PermAll)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := c.Create(prefix, nil, 0, acl)
	must(err)
	const n = 30
	for i := range n {
		p := fmt.Sprintf("%s/n%02d", prefix, i)
		_, err := c.Create(p, []byte("some data"), 0, acl)
		must(err)
		_, _, err = c.Get(p)
		must(err)
	}
	// One watch of each kind fires: changed, children, created, deleted.
	_, _, w1, err := c.GetW(prefix + "/n00")
	must(err)
	_, err = c.Set(prefix+"/n00", []byte("changed"), -1)
	must(err)
	_, _, w2, err := c.ChildrenW(prefix)
	must(err)
	_, _, w3, err := c.ExistsW(prefix + "/new")
	must(err)
	_, err = c.Create(prefix+"/new", nil, 0, acl)
	must(err)
	_, _, w4, err := c.ExistsW(prefix + "/n01")
	must(err)
	must(c.Delete(prefix+"/n01", -1))
	for _, w := range []<-chan zk.Event{w1, w2, w3, w4} {
		select {
		case <-w:
		case <-time.After(10 * time.Second):
			t.Fatal("a watch did not fire")
		}
	}
	return n + 4
}

// TestMntrAsAgentsReadIt reads mntr as Datadog, Telegraf and the exporters do, after real
// traffic against a server with Raft on disk, and checks that the figures they chart are there
// and plausible.
func TestMntrAsAgentsReadIt(t *testing.T) {
	s := zkdtest.Start(t, zkdtest.WithDir(t.TempDir()))
	before := mntr(t, s.Addr())
	for _, k := range agentKeys() {
		if _, ok := before[k]; !ok {
			t.Errorf("mntr lacks %s", k)
		}
	}
	writes := traffic(t, s.Addr(), "/traffic")
	m := mntr(t, s.Addr())
	atLeast := func(key string, want float64) {
		t.Helper()
		if m[key] < want {
			t.Errorf("%s = %v; want at least %v", key, m[key], want)
		}
	}
	if m["zk_packets_received"] <= before["zk_packets_received"] || m["zk_packets_sent"] <= before["zk_packets_sent"] {
		t.Errorf("packets received %v -> %v, sent %v -> %v: they did not grow",
			before["zk_packets_received"], m["zk_packets_received"], before["zk_packets_sent"], m["zk_packets_sent"])
	}
	atLeast("zk_cnt_updatelatency", float64(writes))
	atLeast("zk_cnt_readlatency", 30)
	atLeast("zk_cnt_fsynctime", 1)
	atLeast("zk_sum_sync_processor_batch_size", m["zk_cnt_sync_processor_batch_size"])
	atLeast("zk_cnt_local_write_committed_time_ms", float64(writes))
	atLeast("zk_cnt_commit_process_time", float64(writes))
	atLeast("zk_cnt_propagation_latency", float64(writes))
	atLeast("zk_proposal_count", float64(writes))
	atLeast("zk_commit_count", float64(writes))
	atLeast("zk_cnt_election_time", 1)
	atLeast("zk_cnt_dbinittime", 1)
	atLeast("zk_cnt_unavailable_time", 1)
	atLeast("zk_znode_count", 30)
	atLeast("zk_global_sessions", 1)
	atLeast("zk_num_alive_connections", 1)
	atLeast("zk_bytes_received_count", 1)
	atLeast("zk_response_bytes", 1)
	atLeast("zk_min_client_response_size", 16) // a reply header alone is 16 bytes
	atLeast("zk_max_client_response_size", m["zk_min_client_response_size"])
	atLeast("zk_connection_request_count", 1)
	atLeast("zk_log_size", 1)
	atLeast("zk_open_file_descriptor_count", 1)
	for _, kind := range []string{"created", "deleted", "changed", "children"} {
		atLeast("zk_cnt_node_"+kind+"_watch_count", 1)
	}
	for _, s := range []string{"updatelatency", "readlatency"} {
		lo, p50, p99, hi, avg := m["zk_min_"+s], m["zk_p50_"+s], m["zk_p99_"+s], m["zk_max_"+s], m["zk_avg_"+s]
		if !(lo <= p50 && p50 <= p99 && p99 <= hi && lo <= avg && avg <= hi) {
			t.Errorf("%s: min %v p50 %v p99 %v max %v avg %v are out of order", s, lo, p50, p99, hi, avg)
		}
		if m["zk_sum_"+s] > m["zk_cnt_"+s]*hi {
			t.Errorf("%s: sum %v exceeds cnt %v times max %v", s, m["zk_sum_"+s], m["zk_cnt_"+s], hi)
		}
	}
	if m["zk_disk_full"] != 0 || m["zk_large_requests_rejected"] != 0 || m["zk_auth_failed_count"] != 0 {
		t.Errorf("disk_full %v, large_requests_rejected %v, auth_failed_count %v; want 0",
			m["zk_disk_full"], m["zk_large_requests_rejected"], m["zk_auth_failed_count"])
	}
	if _, ok := m["zk_followers"]; ok {
		t.Error("a standalone server reports followers")
	}

	if got := word(t, s.Addr(), "srst"); got != "Server stats reset.\n" {
		t.Fatalf("srst = %q", got)
	}
	after := mntr(t, s.Addr())
	for _, k := range []string{"zk_cnt_updatelatency", "zk_cnt_readlatency", "zk_packets_received", "zk_cnt_fsynctime", "zk_proposal_count"} {
		if after[k] != 0 {
			t.Errorf("%s = %v after srst; want 0", k, after[k])
		}
	}
	if after["zk_max_client_response_size"] != -1 {
		t.Errorf("max_client_response_size = %v after srst; want -1 (none)", after["zk_max_client_response_size"])
	}
}

// TestMntrOnACluster checks the leader-only keys and the per-follower lag on a real cluster.
func TestMntrOnACluster(t *testing.T) {
	cl := zkdtest.StartCluster(t, 3)
	var leader *server.Server
	var followers []*server.Server
	for _, s := range cl.Servers {
		if s.Stats().Mode == "leader" {
			leader = s
		} else {
			followers = append(followers, s)
		}
	}
	if leader == nil {
		t.Fatal("no leader")
	}
	traffic(t, followers[0].Addr(), "/cluster")
	var m map[string]float64
	testkit.EventuallyNil(t, 10*time.Second, "the leader's followers to be synced", func() error {
		if m = mntr(t, leader.Addr()); m["zk_synced_followers"] != 2 || m["zk_pending_syncs"] != 0 {
			return fmt.Errorf("mntr %v", m)
		}
		return nil
	})
	for key, want := range map[string]float64{"zk_followers": 2, "zk_learners": 2, "zk_quorum_size": 3,
		"zk_synced_non_voting_followers": 0, "zk_synced_observers": 0} {
		if got, ok := m[key]; !ok || got != want {
			t.Errorf("leader %s = %v (present %v); want %v", key, got, ok, want)
		}
	}
	if m["zk_leader_uptime"] <= 0 || m["zk_max_proposal_size"] < m["zk_min_proposal_size"] || m["zk_min_proposal_size"] <= 0 {
		t.Errorf("leader_uptime %v, proposal sizes %v..%v", m["zk_leader_uptime"], m["zk_min_proposal_size"], m["zk_max_proposal_size"])
	}
	for _, f := range followers {
		key := fmt.Sprintf("zk_%d_learner_lag", f.Stats().ServerID)
		if _, ok := m[key]; !ok {
			t.Errorf("leader's mntr lacks %s", key)
		}
	}
	if !strings.Contains(word(t, leader.Addr(), "mntr"), "zk_peer_state\tleading - broadcast\n") {
		t.Error("leader's peer_state is not leading - broadcast")
	}
	fm := mntr(t, followers[0].Addr())
	if _, ok := fm["zk_followers"]; ok {
		t.Error("a follower reports followers")
	}
	for _, k := range []string{"zk_cnt_commit_propagation_latency", "zk_learner_proposal_received_count", "zk_cnt_updatelatency", "zk_cnt_follower_sync_time"} {
		if fm[k] < 1 {
			t.Errorf("follower %s = %v; want at least 1", k, fm[k])
		}
	}
	// /metrics has the same per-follower figures, labelled.
	mfs, err := leader.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	lagged := 0
	for _, mf := range mfs {
		if mf.GetName() == "zkd_raft_follower_lag" {
			lagged = len(mf.GetMetric())
		}
	}
	if lagged != 2 {
		t.Errorf("zkd_raft_follower_lag has %d series on the leader; want 2", lagged)
	}
}

// scrape returns the body of the server's /metrics.
func scrape(t *testing.T, s *server.Server) string {
	t.Helper()
	resp, err := http.Get("http://" + s.AdminAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics = %d: %v", resp.StatusCode, err)
	}
	return string(b)
}

// sample returns the value of the series named exactly series (name and labels) in a scrape.
func sample(t *testing.T, body, series string) float64 {
	t.Helper()
	for line := range strings.SplitSeq(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("/metrics has no %s", series)
	return 0
}

// TestMetricsPassPromtool scrapes /metrics of a real server after traffic and runs Prometheus'
// own linter over it (promtool check metrics, from Debian's prometheus package); any problem it
// reports fails the test. It also checks that /metrics and mntr report the same measurements.
func TestMetricsPassPromtool(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := zkdtest.Start(t, zkdtest.WithDir(t.TempDir()), zkdtest.WithConfig(func(c *server.Config) { c.AdminListener = ln }))
	traffic(t, s.Addr(), "/prom")
	body := scrape(t, s)

	for _, series := range []string{
		"znode_count", "packets_received", "num_alive_connections", "avg_latency", `readlatency{quantile="0.99"}`,
		"updatelatency_count", "fsynctime_count", "election_time_count", `zkd_request_duration_seconds_count{op="create"}`,
		`zkd_fsync_duration_seconds_bucket{le="+Inf"}`, "zkd_apply_duration_seconds_count", "zkd_commit_duration_seconds_count",
		"zkd_raft_term", "zkd_raft_commit_index", "zkd_raft_applied_index", "zkd_raft_leader_changes_total",
		"zkd_disk_full", "go_goroutines", "process_open_fds",
	} {
		sample(t, body, series)
	}
	m := mntr(t, s.Addr())
	for prom, key := range map[string]string{"updatelatency_count": "zk_cnt_updatelatency", "readlatency_count": "zk_cnt_readlatency",
		"znode_count": "zk_znode_count", "commit_count": "zk_commit_count"} {
		if p := sample(t, body, prom); p != m[key] {
			t.Errorf("/metrics %s = %v, mntr %s = %v; want the same measurement", prom, p, key, m[key])
		}
	}
	if got := sample(t, body, `zkd_request_duration_seconds_count{op="create"}`); got < 30 {
		t.Errorf("zkd_request_duration_seconds_count{op=create} = %v; want at least 30", got)
	}
	// srst resets what mntr shows; Prometheus' totals never go down.
	word(t, s.Addr(), "srst")
	if after := sample(t, scrape(t, s), "updatelatency_count"); after < sample(t, body, "updatelatency_count") {
		t.Errorf("updatelatency_count went down after srst: %v", after)
	}

	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Log("###############################################################################")
		t.Log("# promtool is not installed: /metrics was NOT linted. apt-get install prometheus #")
		t.Log("###############################################################################")
		t.Skip("promtool not installed")
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil || out.Len() > 0 {
		t.Fatalf("promtool check metrics: %v\n%s", err, out.String())
	}
}
