package server

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/url"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
)

// The admin commands ZooKeeper 3.9 has beyond the first set (hash, last_snapshot,
// initial_configuration, get_trace_mask, set_trace_mask, system_properties, zabstate, observers,
// observer_connection_stat_reset), zkd's own locks, and the four-letter words that go with them
// (hash, lcks; gtmk and stmk read and set the same trace mask). snapshot and restore are not here:
// they come with backup and restore (docs/differences.md).

// defaultTraceMask is ZooKeeper's default text trace mask (ZooTrace): the value gtmk reports on a
// fresh server.
const defaultTraceMask = 306

// introspection holds the state of these commands.
type introspection struct {
	// traceMask is what get_trace_mask and gtmk report and set_trace_mask and stmk set. zkd has
	// no trace levels of its own (request tracing is its Debug log), so the mask is kept for
	// tools that set and read it and changes nothing else.
	traceMask atomic.Int64
	// digest is the last tree digest computed, reused while the tree is at its zxid.
	digest atomic.Pointer[treeDigest]
}

// digestVersion identifies zkd's digest: SHA-256 of the tree's snapshot encoding. ZooKeeper's
// digests (its version 2) are computed differently and cannot be compared with zkd's.
const digestVersion = 1

type treeDigest struct {
	zxid, digest int64
}

// treeDigest returns the digest of the tree at the zxid it has now: the first 8 bytes of the
// SHA-256 of its snapshot encoding (znode.View.WriteSnapshot), which depends only on the tree's
// content and the session table, so every member at the same zxid computes the same value. It
// costs a walk of the whole tree (no lock is held: the view is immutable), unless the tree has
// not changed since the last call.
func (s *Server) treeDigest() treeDigest {
	v := s.view()
	if d := s.intro.digest.Load(); d != nil && d.zxid == v.Zxid() {
		return *d
	}
	h := sha256.New()
	_ = v.WriteSnapshot(h) // a hash.Hash never fails a write
	d := &treeDigest{zxid: v.Zxid(), digest: int64(binary.BigEndian.Uint64(h.Sum(nil)))}
	s.intro.digest.Store(d)
	return *d
}

// fillMoreCommand runs one of these commands into out and reports whether name was one of them.
func (s *Server) fillMoreCommand(name string, args url.Values, out map[string]any) bool {
	switch name {
	case "get_trace_mask", "set_trace_mask", "system_properties", "zabstate":
		// These answer while the server does not serve, as in ZooKeeper.
	case "hash", "last_snapshot", "initial_configuration", "observers", "observer_connection_stat_reset", "locks":
		if !s.cons.Serving() {
			out["error"] = strings.TrimSuffix(notServing, "\n")
			return true
		}
	default:
		return false
	}
	switch name {
	case "hash":
		d := s.treeDigest()
		out["digests"] = []map[string]any{{"zxid": d.zxid, "digest": d.digest, "digest_version": digestVersion}}
	case "last_snapshot":
		info, ok, err := s.cons.LastSnapshot()
		switch {
		case err != nil:
			out["error"] = err.Error()
		case !ok:
			// ZooKeeper's answer when it has none: -1 for both, the zxid in hex.
			out["zxid"], out["timestamp"] = strconv.FormatUint(^uint64(0), 16), int64(-1)
		default:
			out["zxid"] = strconv.FormatUint(info.Index, 16)
			out["timestamp"] = int64(-1)
			if !info.Time.IsZero() {
				out["timestamp"] = info.Time.Unix()
			}
		}
	case "initial_configuration":
		out["initial_configuration"] = s.cfg.InitialConfig
	case "get_trace_mask":
		out["tracemask"] = s.intro.traceMask.Load()
	case "set_trace_mask":
		v, present := args["traceMask"]
		if !present || len(v) == 0 {
			out["error"] = "setTraceMask requires long traceMask argument"
			break
		}
		mask, err := strconv.ParseInt(v[0], 10, 64)
		if err != nil {
			out["error"] = "setTraceMask requires long traceMask argument, got " + v[0]
			break
		}
		s.intro.traceMask.Store(mask)
		out["tracemask"] = mask
	case "system_properties":
		for k, v := range s.systemProperties() {
			out[k] = v
		}
	case "zabstate":
		out["voting"], out["zabstate"] = s.zabState()
	case "observers":
		// zkd has no observers: the answer ZooKeeper gives when none are connected.
		out["synced_observers"] = 0
		out["observers"] = []any{}
	case "observer_connection_stat_reset":
		// No observers, so no observer connections to reset.
	case "locks":
		threshold := 0
		if v := args.Get("threshold"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				out["error"] = "locks: threshold must be a positive integer, got " + v
				break
			}
			threshold = n
		}
		rep := s.Locks(threshold)
		out["zxid"], out["locks"], out["herd_threshold"], out["herds"] = rep.Zxid, rep.Locks, rep.HerdThreshold, rep.Herds
	}
	return true
}

// zabState maps the server's consensus state onto zabstate's answer. A standalone server answers
// as ZooKeeper's does (not voting, no phase). In a cluster, a member is voting when the current
// membership lists it, and its phase is broadcast while it serves, election while Raft has no
// leader it follows, and synchronization while it has one but has not caught up.
func (s *Server) zabState() (voting bool, phase string) {
	ms := s.members()
	if len(ms) <= 1 {
		return false, ""
	}
	for _, m := range ms {
		voting = voting || m.id == s.cfg.ServerID
	}
	st := s.cons.Stats()
	switch {
	case s.cons.Serving():
		phase = "broadcast"
	case st.State == "Candidate" || st.LeaderID == "":
		phase = "election"
	default:
		phase = "synchronization"
	}
	return voting, phase
}

// systemProperties is zkd's answer to system_properties, which lists a JVM's system properties in
// ZooKeeper: the Go runtime's settings, the server's effective configuration (zoo.cfg's names
// under zkd.) and the environment variables that configure zkd (ZOO_*, ZKD_*, and the Go
// runtime's GO* knobs), never any other variable and never the value of one whose name suggests
// a secret.
func (s *Server) systemProperties() map[string]string {
	c := s.cfg
	w := c.connThrottleWeights()
	wd, _ := os.Getwd()
	p := map[string]string{
		"go.version":                                    runtime.Version(),
		"go.os":                                         runtime.GOOS,
		"go.arch":                                       runtime.GOARCH,
		"go.numcpu":                                     strconv.Itoa(runtime.NumCPU()),
		"go.maxprocs":                                   strconv.Itoa(runtime.GOMAXPROCS(0)),
		"go.memlimit":                                   strconv.FormatInt(debug.SetMemoryLimit(-1), 10),
		"go.gcpercent":                                  strconv.FormatInt(gcPercent(), 10),
		"process.pid":                                   strconv.Itoa(os.Getpid()),
		"user.dir":                                      wd,
		"zkd.version":                                   Version,
		"zkd.clientAddr":                                s.Addr(),
		"zkd.dataDir":                                   c.Dir,
		"zkd.serverId":                                  strconv.FormatInt(c.ServerID, 10),
		"zkd.tickTime":                                  strconv.FormatInt(c.TickTime.Milliseconds(), 10),
		"zkd.minSessionTimeout":                         strconv.FormatInt(c.MinSessionTimeout.Milliseconds(), 10),
		"zkd.maxSessionTimeout":                         strconv.FormatInt(c.MaxSessionTimeout.Milliseconds(), 10),
		"zkd.maxClientCnxns":                            strconv.Itoa(max(c.MaxClientConns, 0)),
		"zkd.maxCnxns":                                  strconv.Itoa(max(c.MaxConns, 0)),
		"zkd.clientTcpKeepAlive":                        strconv.FormatBool(c.ClientTCPKeepAlive),
		"zkd.jute.maxbuffer":                            strconv.Itoa(c.MaxFrameSize),
		"zkd.maxInFlight":                               strconv.Itoa(c.MaxInFlight),
		"zkd.maxOutboundBytes":                          strconv.Itoa(c.MaxOutboundBytes),
		"zkd.maxTotalOutboundBytes":                     strconv.FormatInt(c.MaxTotalOutboundBytes, 10),
		"zkd.largeRequestThreshold":                     map[bool]string{true: strconv.Itoa(c.LargeRequestThreshold), false: "-1"}[c.LargeRequestThreshold > 0],
		"zkd.largeRequestMaxBytes":                      strconv.Itoa(c.LargeRequestMaxBytes),
		"zkd.globalOutstandingLimit":                    strconv.Itoa(max(c.GlobalOutstandingLimit, 0)),
		"zkd.request_throttle_max_requests":             strconv.Itoa(c.RequestThrottleMaxRequests),
		"zkd.request_throttle_stall_time":               strconv.FormatInt(c.RequestThrottleStallTime.Milliseconds(), 10),
		"zkd.request_throttle_drop_stale":               strconv.FormatBool(!c.RequestThrottleKeepStale),
		"zkd.connection_throttle_tokens":                strconv.Itoa(c.ConnThrottleTokens),
		"zkd.connection_throttle_fill_time":             strconv.FormatInt(max(c.ConnThrottleFillTime.Milliseconds(), 1), 10),
		"zkd.connection_throttle_fill_count":            strconv.Itoa(c.ConnThrottleFillCount),
		"zkd.connection_throttle_freeze_time":           map[bool]string{true: strconv.FormatInt(c.ConnThrottleFreezeTime.Milliseconds(), 10), false: "-1"}[c.ConnThrottleFreezeTime > 0],
		"zkd.connection_throttle_drop_increase":         strconv.FormatFloat(c.ConnThrottleDropIncrease, 'g', -1, 64),
		"zkd.connection_throttle_drop_decrease":         strconv.FormatFloat(c.ConnThrottleDropDecrease, 'g', -1, 64),
		"zkd.connection_throttle_decrease_ratio":        strconv.FormatFloat(c.ConnThrottleDecreaseRatio, 'g', -1, 64),
		"zkd.connection_throttle_weight_enabled":        strconv.FormatBool(c.ConnThrottleWeightEnabled),
		"zkd.connection_throttle_global_session_weight": strconv.Itoa(w.global),
		"zkd.connection_throttle_local_session_weight":  strconv.Itoa(w.local),
		"zkd.connection_throttle_renew_session_weight":  strconv.Itoa(w.renew),
		"zkd.nio.sessionlessCnxnTimeout":                strconv.FormatInt(c.SessionlessTimeout.Milliseconds(), 10),
		"zkd.4lw.commands.whitelist":                    strings.Join(c.FourLetterWords, ","),
		"zkd.admin.commandURL":                          c.AdminCommandURL,
		"zkd.extendedTypesEnabled":                      strconv.FormatBool(c.ExtendedTypesEnabled),
		"zkd.reconfigEnabled":                           strconv.FormatBool(c.ReconfigEnabled),
		"zkd.slowRequestThresholdMs":                    strconv.FormatInt(max(c.SlowRequestThreshold.Milliseconds(), 0), 10),
		"zkd.herdWatchThreshold":                        strconv.Itoa(c.HerdWatchThreshold),
		"zkd.superDigest":                               map[bool]string{true: "(set)", false: ""}[c.SuperDigest != ""],
		"zkd.members":                                   strconv.Itoa(max(len(c.Peers), 1)),
	}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if !configEnv(k) {
			continue
		}
		if secretName(k) {
			v = "(redacted)"
		}
		p["env."+k] = v
	}
	return p
}

// gcPercent is the GC percent in force (-1 with the collector off): the zkd binary's pacer
// (internal/runtimepolicy) moves it with the live heap.
func gcPercent() int64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}

// configEnv reports whether an environment variable configures zkd or its runtime.
func configEnv(k string) bool {
	return strings.HasPrefix(k, "ZOO_") || strings.HasPrefix(k, "ZKD_") ||
		slices.Contains([]string{"GOGC", "GOMEMLIMIT", "GOMAXPROCS", "GODEBUG", "GOTRACEBACK"}, k)
}

// secretName reports whether a variable's name suggests that its value is a secret.
func secretName(k string) bool {
	u := strings.ToUpper(k)
	for _, w := range []string{"PASS", "SECRET", "TOKEN", "KEY", "DIGEST", "CREDENTIAL", "AUTH"} {
		if strings.Contains(u, w) {
			return true
		}
	}
	return false
}

// moreFourLetterOutput answers the four-letter words these commands add (the server serves).
func (s *Server) moreFourLetterOutput(word string) string {
	switch word {
	case "lcks":
		return s.locksText()
	case "hash":
		// ZooKeeper's format: one "<zxid in hex>: <digest>" line per digest.
		d := s.treeDigest()
		return fmt.Sprintf("%x: %d\n", d.zxid, d.digest)
	}
	return ""
}
