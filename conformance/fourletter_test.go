package conformance

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkd-io/zkd/internal/testkit"
	"github.com/zkd-io/zkd/jute"
)

// flw sends a four-letter word to the target's first server; words other than srvr need the
// target to whitelist every word.
func (e *env) flw(word string) string {
	e.t.Helper()
	if word != "srvr" && !e.tg.Caps.AllFourLetterWords {
		e.t.Skipf("target does not whitelist %s (4lw.commands.whitelist=*; CONFORMANCE_CAPS=4lw declares it)", word)
	}
	out, err := FourLetterWord(e.tg.Addrs[0], word, waitTimeout)
	must(e.t, word, err)
	return out
}

// wantLines checks that every line of out (split on \n, the empty tail dropped) matches one of the
// patterns.
func wantLines(t *testing.T, word, out string, patterns ...string) {
	t.Helper()
	var res []*regexp.Regexp
	for _, p := range patterns {
		res = append(res, regexp.MustCompile("^(?:"+p+")$"))
	}
	for i, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		ok := false
		for _, re := range res {
			ok = ok || re.MatchString(line)
		}
		if !ok {
			t.Fatalf("%s line %d %q matches none of %q\nfull output:\n%s", word, i+1, line, patterns, out)
		}
	}
}

const (
	versionLine = `Zookeeper version: \d+\.\d+\.\d+.*, built on .+`
	modeLine    = `Mode: (standalone|leader|follower|observer|read-only)`
	// ZooKeeper prints "null" for the address of a connection that is closing.
	clientLine = ` (/[0-9a-fA-F.:\[\]]+:\d+|null)\[\d+\]\(queued=\d+,recved=\d+,sent=\d+(,sid=0x[0-9a-f]+,lop=\w+,est=\d+,to=\d+(,lcxid=0x[0-9a-f]+)?,lzxid=0x[0-9a-f]+,lresp=\d+,llat=\d+,minlat=\d+,avglat=\d+,maxlat=\d+)?\)`
)

var srvrStatLines = []string{
	versionLine,
	`Latency min/avg/max: \d+/[0-9.]+/\d+`,
	// ZooKeeper's outstanding-request count can read -1 for a moment while connections close
	// (seen in CI against ZooKeeper 3.8.0).
	`Received: \d+`, `Sent: \d+`, `Connections: \d+`, `Outstanding: -?\d+`,
	`Zxid: 0x[0-9a-f]+`, modeLine, `Node count: \d+`,
	`Proposal sizes last/min/max: -?\d+/-?\d+/-?\d+`,
}

// mntrValues splits mntr's output into its keys and values (tab-separated, one pair a line).
func mntrValues(t *testing.T, out string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSuffix(out, "\n"), "\n") {
		k, v, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("mntr line %q has no tab", line)
		}
		m[k] = v
	}
	return m
}

// mntrSummary returns the mntr keys of one of ZooKeeper's summaries; advanced ones have
// percentiles too.
func mntrSummary(name string, advanced bool) []string {
	keys := []string{"zk_avg_" + name, "zk_min_" + name, "zk_max_" + name, "zk_cnt_" + name, "zk_sum_" + name}
	if advanced {
		keys = append(keys, "zk_p50_"+name, "zk_p95_"+name, "zk_p99_"+name, "zk_p999_"+name)
	}
	return keys
}

// mntrAgentKeys are the mntr keys that monitoring reads (Datadog's zk check, Telegraf's
// zookeeper input, the mntr Prometheus exporters, ZooKeeper's Grafana dashboard) and that both
// ZooKeeper 3.8 and zkd serve on every server.
var mntrAgentKeys = func() []string {
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
	}
	for _, s := range []string{"readlatency", "updatelatency", "propagation_latency", "commit_propagation_latency",
		"local_write_committed_time_ms"} {
		keys = append(keys, mntrSummary(s, true)...)
	}
	for _, s := range []string{"fsynctime", "snapshottime", "dbinittime", "election_time", "commit_process_time",
		"sync_processor_batch_size", "unavailable_time", "leader_unavailable_time", "follower_sync_time",
		"node_created_watch_count", "node_deleted_watch_count", "node_changed_watch_count", "node_children_watch_count"} {
		keys = append(keys, mntrSummary(s, false)...)
	}
	return keys
}()

// mntrLeaderKeys are the keys a leader serves on top of mntrAgentKeys, in ZooKeeper 3.8 and zkd.
var mntrLeaderKeys = []string{
	"zk_learners", "zk_synced_followers", "zk_synced_non_voting_followers", "zk_synced_observers",
	"zk_pending_syncs", "zk_leader_uptime", "zk_last_proposal_size", "zk_min_proposal_size", "zk_max_proposal_size",
}

func TestFourLetterWords(t *testing.T) {
	runChecks(t, "4lw", []check{
		{"ruok_answers_imok_without_newline", func(t *testing.T, e *env) {
			if out := e.flw("ruok"); out != "imok" {
				t.Fatalf("ruok = %q; want imok", out)
			}
		}},
		{"go_client_FLWRuok_is_true", func(t *testing.T, e *env) {
			if !e.tg.Caps.AllFourLetterWords {
				t.Skip("target does not whitelist ruok")
			}
			if ok := zk.FLWRuok(e.tg.Addrs, waitTimeout); len(ok) == 0 || !ok[0] {
				t.Fatalf("FLWRuok = %v", ok)
			}
		}},
		{"srvr_shape", func(t *testing.T, e *env) {
			out := e.flw("srvr")
			if !strings.HasPrefix(out, "Zookeeper version: ") {
				t.Fatalf("srvr does not start with the version line:\n%s", out)
			}
			wantLines(t, "srvr", out, srvrStatLines...)
			for _, key := range []string{"Latency min/avg/max: ", "Received: ", "Sent: ", "Connections: ", "Zxid: 0x", "Mode: ", "Node count: "} {
				if !strings.Contains(out, "\n"+key) {
					t.Fatalf("srvr lacks %q:\n%s", key, out)
				}
			}
		}},
		{"srvr_mode_matches_the_topology", func(t *testing.T, e *env) {
			out := e.flw("srvr")
			mode := regexp.MustCompile(`(?m)^Mode: (\w+)`).FindStringSubmatch(out)
			if mode == nil {
				t.Fatalf("no Mode line:\n%s", out)
			}
			if e.tg.Standalone() != (mode[1] == "standalone") {
				t.Fatalf("Mode %s for a target of %d servers", mode[1], len(e.tg.Addrs))
			}
		}},
		{"srvr_zxid_covers_the_last_write", func(t *testing.T, e *env) {
			r := e.raw()
			h, _ := rawCreate(t, r, e.p("n"), nil, jute.ModePersistent)
			out := e.flw("srvr")
			m := regexp.MustCompile(`(?m)^Zxid: 0x([0-9a-f]+)$`).FindStringSubmatch(out)
			var zxid int64
			if m == nil {
				t.Fatalf("no Zxid line:\n%s", out)
			}
			if _, err := fmt.Sscanf(m[1], "%x", &zxid); err != nil || zxid < h.Zxid {
				t.Fatalf("srvr Zxid 0x%s; last write 0x%x", m[1], h.Zxid)
			}
		}},
		{"stat_shape_has_a_clients_section", func(t *testing.T, e *env) {
			out := e.flw("stat")
			if !strings.HasPrefix(out, "Zookeeper version: ") || !strings.Contains(out, "\nClients:\n") {
				t.Fatalf("stat lacks the version line or Clients:\n%s", out)
			}
			wantLines(t, "stat", out, append([]string{`Clients:`, clientLine, ``}, srvrStatLines...)...)
		}},
		{"mntr_starts_with_version_and_state_then_tab_separated_keys", func(t *testing.T, e *env) {
			out := e.flw("mntr")
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if len(lines) < 2 || !strings.HasPrefix(lines[0], "zk_version\t") || !strings.HasPrefix(lines[1], "zk_server_state\t") {
				t.Fatalf("mntr does not start with zk_version and zk_server_state:\n%s", out)
			}
			wantLines(t, "mntr", out, `zk_[^\t]+\t.*`)
		}},
		{"mntr_has_the_keys_monitoring_tools_read", func(t *testing.T, e *env) {
			out := e.flw("mntr")
			for _, key := range []string{
				"zk_version", "zk_server_state", "zk_avg_latency", "zk_min_latency", "zk_max_latency",
				"zk_packets_received", "zk_packets_sent", "zk_num_alive_connections", "zk_outstanding_requests",
				"zk_znode_count", "zk_watch_count", "zk_ephemerals_count", "zk_approximate_data_size",
			} {
				if !regexp.MustCompile(`(?m)^` + key + `\t\S`).MatchString(out) {
					t.Fatalf("mntr lacks %s:\n%s", key, out)
				}
			}
		}},
		{"mntr_counts_are_integers", func(t *testing.T, e *env) {
			out := e.flw("mntr")
			for _, key := range []string{"zk_znode_count", "zk_watch_count", "zk_ephemerals_count", "zk_num_alive_connections", "zk_packets_received"} {
				if !regexp.MustCompile(`(?m)^` + key + `\t\d+$`).MatchString(out) {
					t.Fatalf("mntr %s is not a plain integer:\n%s", key, out)
				}
			}
		}},
		{"mntr_serves_the_keys_agents_and_dashboards_read", func(t *testing.T, e *env) {
			// A write first, so that a server that reports some keys only once it has seen
			// traffic has seen some.
			_, err := e.zk.Create(e.p("mntr"), []byte("x"), 0, zk.WorldACL(zk.PermAll))
			must(t, "create", err)
			m := mntrValues(t, e.flw("mntr"))
			want := append([]string(nil), mntrAgentKeys...)
			if !e.tg.Standalone() {
				want = append(want, "zk_peer_state", "zk_quorum_size")
			}
			if m["zk_server_state"] == "leader" {
				want = append(want, mntrLeaderKeys...)
			}
			for _, key := range want {
				if _, ok := m[key]; !ok {
					t.Errorf("mntr lacks %s", key)
				}
			}
		}},
		{"mntr_lines_parse_as_agents_parse_them", func(t *testing.T, e *env) {
			// Telegraf fails a whole collection on a line that does not match its pattern;
			// Datadog and the exporters read every value but the version and states as a number.
			// ZooKeeper's per-namespace summaries are left out: their keys embed a top-level
			// znode's name, whatever it is ("-" breaks Telegraf's pattern against ZooKeeper too).
			telegraf := regexp.MustCompile(`^zk_(\w+)\s+([\w\.\-]+)`)
			integer := regexp.MustCompile(`^-?\d+$`)
			out := e.flw("mntr")
			for line := range strings.SplitSeq(strings.TrimSuffix(out, "\n"), "\n") {
				if k, _, _ := strings.Cut(line, "\t"); !strings.HasSuffix(k, "_per_namespace") && !telegraf.MatchString(line) {
					t.Fatalf("mntr line %q does not match Telegraf's pattern", line)
				}
			}
			for key, v := range mntrValues(t, out) {
				switch {
				case key == "zk_version" || key == "zk_server_state" || key == "zk_peer_state":
				case strings.HasPrefix(key, "zk_avg_") || key == "zk_connection_drop_probability":
					if _, err := strconv.ParseFloat(v, 64); err != nil || !strings.Contains(v, ".") {
						t.Errorf("mntr %s = %q; want a decimal", key, v)
					}
				case !integer.MatchString(v):
					t.Errorf("mntr %s = %q; want an integer", key, v)
				}
			}
		}},
		{"conf_is_key_value_lines", func(t *testing.T, e *env) {
			out := e.flw("conf")
			wantLines(t, "conf", out, `[A-Za-z0-9_.]+=.*`, `membership: ?`, `server\.\d+=.*`, `version=[0-9a-f]+`)
			for _, key := range []string{"clientPort", "dataDir", "tickTime", "maxClientCnxns", "minSessionTimeout", "maxSessionTimeout", "serverId"} {
				if !regexp.MustCompile(`(?m)^` + key + `=`).MatchString(out) {
					t.Fatalf("conf lacks %s:\n%s", key, out)
				}
			}
		}},
		{"conf_client_port_matches_the_address", func(t *testing.T, e *env) {
			out := e.flw("conf")
			port := e.tg.Addrs[0][strings.LastIndex(e.tg.Addrs[0], ":")+1:]
			if !strings.Contains(out, "clientPort="+port+"\n") {
				t.Fatalf("conf clientPort differs from %s:\n%s", port, out)
			}
		}},
		{"cons_lines_parse_and_list_this_session", func(t *testing.T, e *env) {
			out := e.flw("cons")
			wantLines(t, "cons", out, clientLine, ``)
			sid := fmt.Sprintf("sid=0x%x,", e.zk.SessionID())
			if !strings.Contains(out, sid) {
				t.Fatalf("cons does not list session %s:\n%s", sid, out)
			}
		}},
		{"cons_and_stat_list_the_asking_connection_itself", func(t *testing.T, e *env) {
			// ZooKeeper usually counts the word itself (recved=1), but its count can lag the
			// listing: a CI run saw recved=0 from a real ensemble.
			own := regexp.MustCompile(`(?m)^ /[0-9a-fA-F.:\[\]]+:\d+\[0\]\(queued=0,recved=[01],sent=0\)$`)
			for _, word := range []string{"cons", "stat"} {
				if out := e.flw(word); !own.MatchString(out) {
					t.Fatalf("%s does not list its own connection as ZooKeeper does:\n%s", word, out)
				}
			}
		}},
		{"cons_line_of_an_active_session_matches_the_go_client_pattern", func(t *testing.T, e *env) {
			// go-zookeeper's FLWCons applies this pattern to every line; against real ZooKeeper it
			// fails on the line of the four-letter-word connection itself (no sid), so the check
			// applies it to this session's line only. ZooKeeper leaves lcxid out of the line of a
			// connection that has sent no request yet (as after the client reconnected), so the
			// session makes one first, and again if the client reconnected in between (seen once
			// against a ZooKeeper ensemble: the line had recved=0 and no lcxid).
			const goZKCons = `^ /((?:(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\.){3}(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?):(?:\d+))\[\d+\]` +
				`\(queued=(\d+),recved=(\d+),sent=(\d+),sid=(0x[A-Za-z0-9]+),lop=(\w+),est=(\d+),to=(\d+),` +
				`lcxid=(0x[A-Za-z0-9]+),lzxid=(0x[A-Za-z0-9]+),lresp=(\d+),llat=(\d+),minlat=(\d+),avglat=(\d+),maxlat=(\d+)\)`
			var line, out string
			testkit.Until(waitTimeout, func() bool { // the switch below says what is missing
				if _, _, err := e.zk.Exists("/"); err != nil {
					t.Fatal(err)
				}
				out = e.flw("cons")
				sid := fmt.Sprintf("sid=0x%x,", e.zk.SessionID())
				line = ""
				for l := range strings.SplitSeq(out, "\n") {
					if strings.Contains(l, sid) {
						line = l
					}
				}
				return strings.Contains(line, ",lcxid=")
			})
			switch {
			case line == "":
				t.Fatalf("cons does not list session 0x%x:\n%s", e.zk.SessionID(), out)
			case !regexp.MustCompile(goZKCons).MatchString(line):
				t.Fatalf("cons line %q does not match go-zookeeper's pattern", line)
			}
		}},
		{"isro_answers_rw", func(t *testing.T, e *env) {
			if out := e.flw("isro"); out != "rw" {
				t.Fatalf("isro = %q; want rw", out)
			}
		}},
		{"wchs_shape", func(t *testing.T, e *env) {
			_, _, _, err := e.zk.GetW(e.base)
			must(t, "getW", err)
			out := e.flw("wchs")
			m := regexp.MustCompile(`\A(\d+) connections watching (\d+) paths\nTotal watches:(\d+)\n\z`).FindStringSubmatch(out)
			if m == nil || m[1] == "0" {
				t.Fatalf("wchs %q; want the two-line shape with at least one watching connection", out)
			}
		}},
		{"wchc_lists_this_sessions_watch", func(t *testing.T, e *env) {
			_, _, _, err := e.zk.GetW(e.base)
			must(t, "getW", err)
			out := e.flw("wchc")
			wantLines(t, "wchc", out, `0x[0-9a-f]+`, `\t/.*`, ``)
			if !strings.Contains(out, fmt.Sprintf("0x%x\n", e.zk.SessionID())) || !strings.Contains(out, "\t"+e.base+"\n") {
				t.Fatalf("wchc lacks session 0x%x or %s:\n%s", e.zk.SessionID(), e.base, out)
			}
		}},
		{"wchp_lists_this_path", func(t *testing.T, e *env) {
			_, _, _, err := e.zk.GetW(e.base)
			must(t, "getW", err)
			out := e.flw("wchp")
			wantLines(t, "wchp", out, `/.*`, `\t0x[0-9a-f]+`, ``)
			if !strings.Contains(out, e.base+"\n\t"+fmt.Sprintf("0x%x\n", e.zk.SessionID())) {
				t.Fatalf("wchp lacks %s watched by 0x%x:\n%s", e.base, e.zk.SessionID(), out)
			}
		}},
		{"envi_shape", func(t *testing.T, e *env) {
			out := e.flw("envi")
			if !strings.HasPrefix(out, "Environment:\n") || !strings.Contains(out, "\nzookeeper.version=") {
				t.Fatalf("envi:\n%s", out)
			}
			wantLines(t, "envi", out, `Environment:`, `[a-z.]+=.*`)
		}},
		{"dirs_shape", func(t *testing.T, e *env) {
			out := e.flw("dirs")
			if !regexp.MustCompile(`\Adatadir_size: \d+\nlogdir_size: \d+\n\z`).MatchString(out) {
				t.Fatalf("dirs %q", out)
			}
		}},
		{"gtmk_is_a_decimal_without_newline", func(t *testing.T, e *env) {
			if out := e.flw("gtmk"); !regexp.MustCompile(`\A\d+\z`).MatchString(out) {
				t.Fatalf("gtmk %q", out)
			}
		}},
		{"crst_text", func(t *testing.T, e *env) {
			if out := e.flw("crst"); out != "Connection stats reset.\n" {
				t.Fatalf("crst %q", out)
			}
		}},
		{"srst_text", func(t *testing.T, e *env) {
			if out := e.flw("srst"); out != "Server stats reset.\n" {
				t.Fatalf("srst %q", out)
			}
		}},
		{"dump_lists_this_sessions_ephemeral", func(t *testing.T, e *env) {
			_, err := e.zk.Create(e.p("eph"), nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
			must(t, "create", err)
			out := e.flw("dump")
			if !strings.HasPrefix(out, "SessionTracker dump:\n") || !strings.Contains(out, "ephemeral nodes dump:\n") {
				t.Fatalf("dump sections missing:\n%s", out)
			}
			if !strings.Contains(out, fmt.Sprintf("0x%x:\n\t%s\n", e.zk.SessionID(), e.p("eph"))) {
				t.Fatalf("dump does not list %s under 0x%x:\n%s", e.p("eph"), e.zk.SessionID(), out)
			}
		}},
		{"unknown_word_closes_without_output", func(t *testing.T, e *env) {
			out, err := FourLetterWord(e.tg.Addrs[0], "zzzz", waitTimeout)
			if err != nil || out != "" {
				t.Fatalf("zzzz = %q, %v; want a close with no output", out, err)
			}
		}},
		{"four_letter_word_connection_is_closed_after_the_answer", func(t *testing.T, e *env) {
			r := e.dial()
			must(t, "write", r.WriteBytes([]byte("srvr")))
			out, err := r.ReadAll(waitTimeout)
			if err != nil || !strings.HasPrefix(string(out), "Zookeeper version: ") {
				t.Fatalf("srvr = %q, %v; want the answer then a close", out, err)
			}
		}},
		{"server_answers_a_word_quickly", func(t *testing.T, e *env) {
			start := time.Now()
			e.flw("srvr")
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("srvr took %v", d)
			}
		}},
	})
}
