package server

import (
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/zkd-io/zkd/internal/metric"
	"github.com/zkd-io/zkd/jute"
)

// serverMetrics are the measurements the server makes itself, in the connection code and the
// request pipeline; consensus makes its own (backend.Metrics). mntr and /metrics are two views
// of both sets: neither keeps a figure of its own.
type serverMetrics struct {
	set metric.Set

	packetsReceived *metric.Counter
	packetsSent     *metric.Counter
	bytesReceived   *metric.Counter
	bytesSent       *metric.Counter
	authFailed      *metric.Counter
	connRejected    *metric.Counter
	connRequests    *metric.Counter
	acceptRetries   *metric.Counter
	revalidated     *metric.Counter
	sessionless     *metric.Counter
	stale           *metric.Counter
	largeRejected   *metric.Counter
	throttleWaits   *metric.Counter
	outboundWaits   *metric.Counter
	staleDropped    *metric.Counter
	inFlightWaits   *metric.Counter
	tokenDeficit    *metric.Summary
	tlsFailed       *metric.Counter
	// closed counts the connections that ended, by reason (closereason.go).
	closed [numCloseReasons]*metric.Counter

	read, update *metric.Summary
	// fired records, per watch event type that triggered any watch, how many connections it
	// notified: ZooKeeper's node_{created,deleted,changed,children}_watch_count.
	fired [4]*metric.Summary

	// The size in bytes of the last, smallest and largest reply; -1 before the first.
	respLast, respMin, respMax atomic.Int64

	// byOp is request latency by op as a Prometheus histogram; ops holds its children, made on
	// first use so that /metrics lists only the ops clients sent.
	byOp *prometheus.HistogramVec
	ops  [opSlots]atomic.Pointer[prometheus.Observer]
}

func newServerMetrics() *serverMetrics {
	m := &serverMetrics{}
	s := &m.set
	m.packetsReceived = s.Counter("packets_received", "Client packets received.")
	m.packetsSent = s.Counter("packets_sent", "Client packets sent.")
	m.bytesReceived = s.Counter("bytes_received_count", "Bytes received from clients.")
	m.bytesSent = s.Counter("response_bytes", "Bytes sent to clients.")
	m.authFailed = s.Counter("auth_failed_count", "Failed authentications.")
	m.connRejected = s.Counter("connection_rejected", "Client connections refused at accept (limits, shutdown).")
	m.connRequests = s.Counter("connection_request_count", "Client connections accepted.")
	m.acceptRetries = s.Counter("accept_retry_count", "Accepts that failed for the moment (no file descriptors or buffers left) and were retried after a pause.")
	m.revalidated = s.Counter("connection_revalidate_count", "Reconnects of an existing session validated with the leader.")
	m.sessionless = s.Counter("sessionless_connections_expired", "Connections closed because no session was established in time.")
	m.stale = s.Counter("stale_requests", "Requests admitted and never answered because their connection closed first.")
	m.staleDropped = s.Counter("stale_requests_dropped", "Requests the request throttler dropped unhandled because their connection closed while they waited.")
	m.largeRejected = s.Counter("large_requests_rejected", "Requests refused because their frame exceeds the maximum frame size (jute.maxbuffer), or because they would take the large requests in process over largeRequestMaxBytes.")
	m.tlsFailed = s.Counter("unsuccessful_handshake", "TLS handshakes with clients that failed (the connection was closed).")
	for r := range closeReason(numCloseReasons) {
		m.closed[r] = &metric.Counter{}
		// In /metrics as one labelled series, zkd_connections_closed_total (collector).
		s.Add(metric.Item{Name: "connections_closed_" + r.String(), Counter: m.closed[r], MntrOnly: true})
	}
	m.throttleWaits = s.Counter("request_throttle_wait_count", "Waits of up to the stall time for the request throttler (request_throttle_max_requests requests in process).")
	m.inFlightWaits = s.Counter("max_in_flight_wait_count", "Times a connection's reader waited because the connection had the maximum of requests in flight (zkd's per-connection limit).")
	m.tokenDeficit = s.Summary("connection_token_deficit", "Tokens the connection throttle's bucket lacked after each session request it let through.", metric.Count, metric.Basic)
	s.Add(metric.Item{Name: "connection_drop_count", Help: "Client connections the client closed (the server read the end of the stream).", Counter: m.closed[closeClientClosed]})
	m.outboundWaits = s.Counter("outbound_wait_count", "Times a connection's reader waited for its unread replies to drain (1 MiB queued, or anything while the server-wide outbound bound is exceeded).")
	m.read = s.Summary("readlatency", "Latency of requests that need no consensus (reads, pings, watch and session management), in milliseconds.", metric.Millis, metric.Advanced)
	m.update = s.Summary("updatelatency", "Latency of writes, from arrival to the reply after this server applied them, in milliseconds.", metric.Millis, metric.Advanced)
	for i, name := range []string{"node_created_watch_count", "node_deleted_watch_count", "node_changed_watch_count", "node_children_watch_count"} {
		m.fired[i] = s.Summary(name, "Connections notified per "+strings.TrimSuffix(name, "_watch_count")+" event that triggered a watch.", metric.Count, metric.Basic)
	}
	m.resetResponseSizes()
	m.byOp = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "zkd_request_duration_seconds",
		Help:    "Latency of client requests by op, from arrival to the reply being queued.",
		Buckets: prometheus.ExponentialBuckets(16e-6, 2, 22),
	}, []string{"op"})
	return m
}

// opSlots are the slots of serverMetrics.ops: the request ops 0..22 and 100..107, createSession,
// closeSession and one for anything else.
const opSlots = 23 + 8 + 3

func opSlot(op jute.Op) int {
	switch {
	case op >= 0 && op <= 22:
		return int(op)
	case op >= 100 && op <= 107:
		return 23 + int(op-100)
	case op == jute.OpCreateSession:
		return 31
	case op == jute.OpCloseSession:
		return 32
	}
	return 33
}

// request records one answered request: its latency by op and as a read or an update.
func (m *serverMetrics) request(op jute.Op, update bool, d time.Duration) {
	if update {
		m.update.ObserveDuration(d)
	} else {
		m.read.ObserveDuration(d)
	}
	slot := &m.ops[opSlot(op)]
	o := slot.Load()
	if o == nil {
		name := op.String()
		if opSlot(op) == opSlots-1 {
			name = "other"
		}
		obs := m.byOp.WithLabelValues(name)
		o = &obs
		slot.Store(o)
	}
	(*o).Observe(d.Seconds())
}

// response records the size of one reply frame.
func (m *serverMetrics) response(size int) {
	n := int64(size)
	m.respLast.Store(n)
	if cur := m.respMin.Load(); cur < 0 || n < cur {
		m.respMin.Store(n)
	}
	if n > m.respMax.Load() {
		m.respMax.Store(n)
	}
}

func (m *serverMetrics) resetResponseSizes() {
	m.respLast.Store(-1)
	m.respMin.Store(-1)
	m.respMax.Store(-1)
}

// watchFired records that an event of type typ notified n connections (n > 0).
func (m *serverMetrics) watchFired(typ jute.EventType, n int) {
	i := -1
	switch typ {
	case jute.EventNodeCreated:
		i = 0
	case jute.EventNodeDeleted:
		i = 1
	case jute.EventNodeDataChanged:
		i = 2
	case jute.EventNodeChildrenChanged:
		i = 3
	}
	if i >= 0 {
		m.fired[i].Observe(uint64(n))
	}
}

// resetStats is srst: every figure mntr shows starts again from zero, as in ZooKeeper. The
// totals /metrics exports keep counting (Prometheus counters never go down).
func (s *Server) resetStats() {
	s.m.set.Reset()
	s.cons.Metrics().Reset()
	s.m.resetResponseSizes()
}

// latency returns every request's latency since the last srst: reads and updates together,
// ZooKeeper's avg/min/max_latency.
func (s *Server) latency() metric.Snapshot {
	return metric.Merge(s.m.read.SinceReset(), s.m.update.SinceReset())
}

// figure is one value the server reports under ZooKeeper's name, in mntr and (unless text or
// mntrOnly) in /metrics. Counters and summaries are not figures: they live in metric sets.
type figure struct {
	name     string
	help     string
	value    float64
	double   bool   // mntr shows it as a Java double ("0.0"), else as an integer
	text     string // a text value (mntr and the admin monitor command only)
	mntrOnly bool
}

// figures returns the server's gauges in mntr order, from one consistent set of Stats.
func (s *Server) figures(st *Stats) []figure {
	ns := &st.Node
	var out []figure
	add := func(name, help string, v float64) { out = append(out, figure{name: name, help: help, value: v}) }
	text := func(name, v string) { out = append(out, figure{name: name, text: v}) }

	text("version", st.Version+", built on "+buildDate())
	text("server_state", st.Mode)
	cluster := len(s.members()) > 1
	if cluster {
		switch st.Mode {
		case "leader":
			text("peer_state", "leading - broadcast")
		default:
			text("peer_state", "following - broadcast")
		}
	}
	lat := s.latency()
	add("ephemerals_count", "Ephemeral znodes.", float64(st.EphemeralCount))
	add("num_alive_connections", "Open client connections.", float64(st.Connections))
	out = append(out, figure{name: "avg_latency", help: "Mean request latency since the last srst, in milliseconds.",
		value: round4(lat.Avg()), double: true})
	add("min_latency", "Smallest request latency since the last srst, in milliseconds.", math.Floor(lat.MinValue()))
	add("max_latency", "Largest request latency since the last srst, in milliseconds.", math.Ceil(lat.MaxValue()))
	add("outstanding_requests", "Requests admitted and not yet answered.", float64(st.Outstanding))
	out = append(out, figure{name: "connection_drop_probability", help: "Probability that the connection throttle refuses a new session at random (connection_throttle_freeze_time).",
		value: s.connThr.dropChance(), double: true})
	add("znode_count", "Znodes in the data tree.", float64(st.NodeCount))
	add("global_sessions", "Sessions in the replicated session table.", float64(st.Sessions))
	add("local_sessions", "Local sessions (zkd has none: every session is global).", 0)
	add("watch_count", "Watches set by this server's clients.", float64(st.WatchCount))
	add("approximate_data_size", "Bytes of znode paths and data.", float64(st.DataSize))
	add("open_file_descriptor_count", "File descriptors open in this process.", float64(openFDs()))
	add("max_file_descriptor_count", "The process's limit of open file descriptors.", float64(maxFDs()))
	add("uptime", "Milliseconds since the server started.", float64(st.Uptime.Milliseconds()))
	add("last_client_response_size", "Bytes of the last reply (-1: none since the last srst).", float64(s.m.respLast.Load()))
	add("min_client_response_size", "Bytes of the smallest reply since the last srst (-1: none).", float64(s.m.respMin.Load()))
	add("max_client_response_size", "Bytes of the largest reply since the last srst (-1: none).", float64(s.m.respMax.Load()))
	add("outbound_queued_bytes", "Reply and notification bytes queued for all clients, not yet written.", float64(s.outBudget.queuedBytes()))
	if cluster {
		add("quorum_size", "Voting members of the ensemble.", float64(len(s.members())))
	}
	if st.Mode == "leader" {
		pending := 0
		for _, f := range ns.Followers {
			if f.Syncing {
				pending++
			}
		}
		add("learners", "Followers of this leader.", float64(st.Followers))
		add("followers", "Followers of this leader.", float64(st.Followers))
		add("synced_followers", "Followers that answered within the election timeout and are not being sent a snapshot.", float64(st.SyncedFollowers))
		add("synced_non_voting_followers", "Non-voting followers in sync (zkd has none).", 0)
		add("synced_observers", "Observers in sync (zkd has none).", 0)
		add("pending_syncs", "Followers being sent a snapshot.", float64(pending))
		uptime := 0.0
		if !ns.LeaderSince.IsZero() {
			uptime = float64(time.Since(ns.LeaderSince).Milliseconds())
		}
		add("leader_uptime", "Milliseconds since this server became the leader.", uptime)
		add("last_proposal_size", "Bytes of the last entry this leader appended.", float64(ns.ProposalSizeLast))
		add("min_proposal_size", "Bytes of the smallest entry this leader appended.", float64(ns.ProposalSizeMin))
		add("max_proposal_size", "Bytes of the largest entry this leader appended.", float64(ns.ProposalSizeMax))
		for _, f := range ns.Followers {
			out = append(out, figure{name: f.ID + "_learner_lag", value: float64(f.Lag), mntrOnly: true})
		}
	}
	applyLag := 0.0
	if ns.CommitIndex > uint64(ns.LastZxid) {
		applyLag = float64(ns.CommitIndex - uint64(ns.LastZxid))
	}
	out = append(out,
		figure{name: "apply_lag", value: applyLag, mntrOnly: true},
		figure{name: "log_size", value: float64(ns.LogBytes), mntrOnly: true},
		figure{name: "snapshot_size", value: float64(ns.SnapshotBytes), mntrOnly: true},
		figure{name: "disk_full", value: b2f(ns.DiskFull), mntrOnly: true})
	return out
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// round4 rounds to 4 decimals, as ZooKeeper rounds the averages it reports.
func round4(v float64) float64 { return math.Round(v*10000) / 10000 }

// mntrPairs returns mntr's keys (without the zk_ prefix) and values in output order: the
// server's figures, then every counter and every summary of the server's and consensus' sets.
func (s *Server) mntrPairs() [][2]string {
	st := s.Stats()
	var kv [][2]string
	for _, f := range s.figures(&st) {
		switch {
		case f.text != "":
			kv = append(kv, [2]string{f.name, f.text})
		case f.double:
			kv = append(kv, [2]string{f.name, javaDouble(f.value)})
		default:
			kv = append(kv, [2]string{f.name, strconv.FormatInt(int64(f.value), 10)})
		}
	}
	sets := [][]metric.Item{s.m.set.Items(), s.cons.Metrics().Items()}
	for _, items := range sets {
		for _, it := range items {
			if it.Counter != nil {
				kv = append(kv, [2]string{it.Name, strconv.FormatInt(it.Counter.SinceReset(), 10)})
			}
		}
	}
	for _, items := range sets {
		for _, it := range items {
			if it.Summary == nil {
				continue
			}
			t := it.Summary.SinceReset()
			kv = append(kv,
				[2]string{"avg_" + it.Name, javaDouble(round4(t.Avg()))},
				[2]string{"min_" + it.Name, intOf(t.MinValue())},
				[2]string{"max_" + it.Name, intOf(math.Ceil(t.MaxValue()))},
				[2]string{"cnt_" + it.Name, strconv.FormatUint(t.Count, 10)},
				[2]string{"sum_" + it.Name, intOf(math.Round(t.SumValue()))})
			if it.Detail == metric.Advanced {
				for _, p := range percentiles {
					kv = append(kv, [2]string{p.key + "_" + it.Name, intOf(t.Quantile(p.q))})
				}
			}
		}
	}
	return kv
}

// percentiles are the ones ZooKeeper's advanced summaries report in mntr.
var percentiles = []struct {
	key string
	q   float64
}{{"p50", 0.5}, {"p95", 0.95}, {"p99", 0.99}, {"p999", 0.999}}

// intOf formats v as ZooKeeper formats its long figures: whole milliseconds. zkd measures in
// microseconds; mntr shows minimum and percentiles rounded down, maximum rounded up and the sum
// rounded, so that min <= pNN <= max and sum <= cnt * max hold as they do in ZooKeeper.
func intOf(v float64) string { return strconv.FormatInt(int64(v), 10) }

// collector exports the server's figures, its metric sets and consensus' on each scrape, under
// ZooKeeper's names, plus zkd's own Raft and histogram figures. It describes nothing up front
// (an unchecked collector): which followers and summaries exist changes over time.
type collector struct{ s *Server }

func (collector) Describe(chan<- *prometheus.Desc) {}

// Prometheus' naming rules want counters to end in "_total" and refuse "_count", "_sum" and
// "_bucket" endings on anything but histograms and summaries. ZooKeeper's names break them
// (packets_received, znode_count), and dashboards query those names, so such a series is
// exported as untyped: same name, no type claim to contradict.
func valueType(name string, counter bool) prometheus.ValueType {
	if counter && !strings.HasSuffix(name, "_total") {
		return prometheus.UntypedValue
	}
	for _, suffix := range []string{"_count", "_sum", "_bucket"} {
		if strings.HasSuffix(name, suffix) {
			return prometheus.UntypedValue
		}
	}
	if counter {
		return prometheus.CounterValue
	}
	return prometheus.GaugeValue
}

// histogramBounds are the bucket bounds (in milliseconds) of the duration histograms made from
// summaries: 16µs to about 33s, doubling, as zkd_request_duration_seconds has.
var histogramBounds = metric.OctaveBounds(metric.Millis, 4, 25)

func (c collector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	st := s.Stats()
	ns := &st.Node
	gauge := func(name, help string, v float64, labels ...string) {
		var keys, vals []string
		for i := 0; i+1 < len(labels); i += 2 {
			keys, vals = append(keys, labels[i]), append(vals, labels[i+1])
		}
		ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(name, help, keys, nil), valueType(name, false), v, vals...)
	}
	counter := func(name, help string, v float64) {
		ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(name, help, nil, nil), valueType(name, true), v)
	}
	for _, f := range s.figures(&st) {
		if f.text == "" && !f.mntrOnly {
			gauge(f.name, f.help, f.value)
		}
	}
	for _, items := range [][]metric.Item{s.m.set.Items(), s.cons.Metrics().Items()} {
		for _, it := range items {
			switch {
			case it.Counter != nil:
				if !it.MntrOnly {
					counter(it.Name, it.Help, float64(it.Counter.Total()))
				}
			case it.Summary != nil:
				t := it.Summary.Total()
				if !it.MntrOnly {
					var q map[float64]float64
					if it.Detail == metric.Advanced {
						q = map[float64]float64{0.5: t.Quantile(0.5), 0.9: t.Quantile(0.9), 0.99: t.Quantile(0.99)}
					}
					ch <- prometheus.MustNewConstSummary(prometheus.NewDesc(it.Name, it.Help, nil, nil), t.Count, t.SumValue(), q)
				}
				if it.Histogram != "" {
					counts := t.Cumulative(histogramBounds)
					buckets := make(map[float64]uint64, len(counts))
					for i, b := range histogramBounds {
						buckets[b/1000] = counts[i]
					}
					help := strings.Replace(it.Help, "in milliseconds", "in seconds", 1)
					ch <- prometheus.MustNewConstHistogram(prometheus.NewDesc(it.Histogram, help, nil, nil),
						t.Count, t.SumValue()/1000, buckets)
				}
			}
		}
	}

	// zkd's own figures, with Prometheus' conventions.
	gauge("zkd_build_info", "Always 1; the version zkd presents itself as is a label.", 1, "version", st.Version)
	gauge("zkd_serving", "1 while the server serves clients.", b2f(st.Serving))
	gauge("zkd_is_leader", "1 on the leader (and a standalone server).", b2f(st.Mode == "leader" || st.Mode == "standalone"))
	gauge("zkd_last_zxid", "Zxid (Raft index) of the last transaction applied here.", float64(st.LastZxid))
	gauge("zkd_raft_term", "Current Raft term.", float64(ns.Term))
	gauge("zkd_raft_commit_index", "Raft commit index as this server knows it.", float64(ns.CommitIndex))
	gauge("zkd_raft_applied_index", "Last Raft index applied to this server's data tree.", float64(ns.LastZxid))
	gauge("zkd_raft_last_index", "Last index in this server's Raft log.", float64(ns.LastIndex))
	applyLag := 0.0
	if ns.CommitIndex > uint64(ns.LastZxid) {
		applyLag = float64(ns.CommitIndex - uint64(ns.LastZxid))
	}
	gauge("zkd_raft_apply_lag", "Committed entries not yet applied here.", applyLag)
	counter("zkd_raft_leader_changes_total", "Leaders this server has learnt of since it started.", float64(ns.LeaderChanges))
	for _, f := range ns.Followers {
		gauge("zkd_raft_follower_lag", "Entries the leader holds that a follower is not known to hold (on the leader).",
			float64(f.Lag), "follower", f.ID)
		contact := -1.0
		if f.LastContact >= 0 {
			contact = f.LastContact.Seconds()
		}
		gauge("zkd_raft_follower_last_contact_seconds", "Seconds since a follower last answered the leader (-1: not in this leadership).",
			contact, "follower", f.ID)
	}
	closedDesc := prometheus.NewDesc("zkd_connections_closed_total", "Client connections that ended, by why they ended.", []string{"reason"}, nil)
	for r, c := range s.m.closed {
		ch <- prometheus.MustNewConstMetric(closedDesc, prometheus.CounterValue, float64(c.Total()), closeReason(r).String())
	}
	counter("zkd_proposals_total", "Writes this server proposed (its own and forwarded).", float64(ns.Proposed))
	counter("zkd_proposals_forwarded_total", "Writes this server forwarded to the leader.", float64(ns.Forwarded))
	counter("zkd_proposals_unknown_outcome_total", "Writes answered with connection loss because their outcome was unknown.", float64(ns.Unknown))
	gauge("zkd_log_size_bytes", "Disk space of the Raft log.", float64(ns.LogBytes))
	gauge("zkd_snapshot_size_bytes", "Disk space of the snapshots.", float64(ns.SnapshotBytes))
	gauge("zkd_disk_full", "1 when the data directory's disk is full and writes cannot be made durable.", b2f(ns.DiskFull))
	gauge("zkd_watched_paths", "Paths with at least one watch.", float64(st.WatchedPaths))
	gauge("zkd_watching_connections", "Connections with at least one watch.", float64(st.WatchingConnections))
}

// newRegistry returns the server's own Prometheus registry: its figures (collector), request
// latency by op, and the Go runtime and process collectors. Nothing is registered globally, so
// any number of servers can run in one process.
func newRegistry(s *Server) *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		s.m.byOp,
		collector{s},
	)
	return r
}

// Gatherer returns the server's Prometheus registry, for an embedder that serves metrics itself
// (the admin server's /metrics serves the same registry).
func (s *Server) Gatherer() prometheus.Gatherer { return s.registry }
