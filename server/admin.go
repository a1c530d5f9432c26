package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// startAdmin starts the admin HTTP server when one is configured: /metrics (Prometheus text
// format from this server's own figures), /ready (200 while serving clients, else 503) and
// /commands/<name> (JSON like ZooKeeper's AdminServer).
func (s *Server) startAdmin() error {
	ln := s.cfg.AdminListener
	if ln == nil {
		if s.cfg.AdminAddr == "" {
			return nil
		}
		var err error
		if ln, err = net.Listen("tcp", s.cfg.AdminAddr); err != nil {
			return fmt.Errorf("server: admin listen %s: %w", s.cfg.AdminAddr, err)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", s.serveMetrics)
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, _ *http.Request) {
		if s.cons.Serving() {
			_, _ = io.WriteString(w, "ready\n")
			return
		}
		http.Error(w, "not serving", http.StatusServiceUnavailable)
	})
	prefix := strings.TrimSuffix(s.cfg.AdminCommandURL, "/")
	mux.HandleFunc("GET "+prefix, s.serveCommandList)
	mux.HandleFunc("GET "+prefix+"/{name}", s.serveCommand)
	mux.HandleFunc("POST "+prefix+"/{name}", s.serveCommand)
	if s.cfg.EnablePprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	s.adminLn = ln
	s.admin = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 30 * time.Second}
	s.wg.Go(func() {
		if err := s.admin.Serve(ln); err != nil && err != http.ErrServerClosed {
			s.log.Error("admin server stopped", "err", err)
		}
	})
	return nil
}

// adminCommands maps every admin command name and alias to its primary name.
var adminCommands = map[string]string{
	"configuration": "configuration", "conf": "configuration", "config": "configuration",
	"connection_stat_reset": "connection_stat_reset", "crst": "connection_stat_reset",
	"connections": "connections", "cons": "connections",
	"dirs":        "dirs",
	"dump":        "dump",
	"environment": "environment", "env": "environment", "envi": "environment",
	"is_read_only": "is_read_only", "isro": "is_read_only",
	"leader": "leader", "lead": "leader",
	"monitor": "monitor", "mntr": "monitor",
	"ruok":         "ruok",
	"server_stats": "server_stats", "srvr": "server_stats",
	"stat_reset": "stat_reset", "srst": "stat_reset",
	"stats": "stats", "stat": "stats",
	"watch_summary": "watch_summary", "wchs": "watch_summary",
	"watches": "watches", "wchc": "watches",
	"watches_by_path": "watches_by_path", "wchp": "watches_by_path",
	"voting_view": "voting_view",
	// ZooKeeper 3.9's later commands and zkd's locks (admin_commands.go), snapshot (backup.go)
	"snapshot": "snapshot", "snap": "snapshot",
	"hash":          "hash",
	"last_snapshot": "last_snapshot", "lsnp": "last_snapshot",
	"initial_configuration": "initial_configuration", "icfg": "initial_configuration",
	"get_trace_mask": "get_trace_mask", "gtmk": "get_trace_mask",
	"set_trace_mask": "set_trace_mask", "stmk": "set_trace_mask",
	"system_properties": "system_properties", "sysp": "system_properties",
	"zabstate":  "zabstate",
	"observers": "observers", "obsr": "observers",
	"observer_connection_stat_reset": "observer_connection_stat_reset", "orst": "observer_connection_stat_reset",
	"locks": "locks", "lcks": "locks",
	"lock_break": "lock_break",
}

func (s *Server) serveCommandList(w http.ResponseWriter, _ *http.Request) {
	var names []string
	for k, v := range adminCommands {
		if k == v {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	w.Header().Set("Content-Type", "text/html")
	prefix := strings.TrimSuffix(s.cfg.AdminCommandURL, "/")
	for _, n := range names {
		_, _ = fmt.Fprintf(w, "<a href=\"%s/%s\">%s</a><br/>\n", prefix, n, n)
	}
}

// serveCommand answers /commands/<name> with a JSON object ending in "command" (the primary
// name of the command an alias names) and "error", as ZooKeeper's AdminServer does (HTTP 200 even
// for an unknown command). The query string holds the command's arguments.
func (s *Server) serveCommand(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	out := map[string]any{}
	primary, ok := adminCommands[name]
	switch {
	case !ok:
		out["error"] = "Unknown command: " + name
		primary = name
	case r.Method == http.MethodPost && primary != "lock_break":
		// Only the commands that change something take a POST.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusMethodNotAllowed)
		_ = json.NewEncoder(w).Encode(map[string]any{"command": primary, "error": primary + " is read with a GET"})
		return
	case primary == "snapshot":
		if s.serveSnapshot(w, r, out) {
			return
		}
	case primary == "lock_break":
		if s.serveLockBreak(w, r, out) {
			return
		}
	case s.fillMoreCommand(primary, r.URL.Query(), out):
	default:
		s.fillCommand(primary, out)
	}
	out["command"] = primary
	if _, set := out["error"]; !set {
		out["error"] = nil
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(out)
}

func (s *Server) fillCommand(name string, out map[string]any) {
	switch name {
	case "ruok", "is_read_only", "configuration", "dirs", "environment":
	default:
		if !s.cons.Serving() {
			out["error"] = strings.TrimSuffix(notServing, "\n")
			return
		}
	}
	switch name {
	case "ruok":
	case "is_read_only":
		out["read_only"] = false
	case "configuration":
		out["client_port"], _ = strconv.Atoi(lastPort(s.Addr()))
		out["data_dir"] = s.cfg.Dir
		out["data_log_dir"] = s.cfg.Dir
		out["tick_time"] = s.cfg.TickTime.Milliseconds()
		out["max_client_cnxns"] = max(s.cfg.MaxClientConns, 0)
		out["min_session_timeout"] = s.cfg.MinSessionTimeout.Milliseconds()
		out["max_session_timeout"] = s.cfg.MaxSessionTimeout.Milliseconds()
		out["server_id"] = s.cfg.ServerID
		out["client_port_listen_backlog"] = -1
	case "dirs":
		d := dirSize(s.cfg.Dir)
		out["datadir_size"], out["logdir_size"] = d, d
	case "environment":
		for _, line := range strings.Split(s.envi(), "\n")[1:] {
			if k, v, ok := strings.Cut(line, "="); ok {
				out[k] = v
			}
		}
	case "connection_stat_reset":
		s.resetConnStats()
	case "stat_reset":
		s.resetStats()
	case "leader":
		if len(s.cfg.Peers) <= 1 {
			out["error"] = "server is not initialized"
			return
		}
		out["is_leader"] = s.cons.IsLeader()
		id, addr := s.cons.Leader()
		out["leader_id"], _ = strconv.ParseInt(id, 10, 64)
		out["leader_ip"] = addr
	case "monitor":
		for _, kv := range s.mntrPairs() {
			if n, err := strconv.ParseInt(kv[1], 10, 64); err == nil {
				out[kv[0]] = n
			} else if f, err := strconv.ParseFloat(kv[1], 64); err == nil {
				out[kv[0]] = f
			} else {
				out[kv[0]] = kv[1]
			}
		}
	case "connections":
		out["connections"] = s.connectionsJSON()
		out["secure_connections"] = []any{}
	case "server_stats", "stats":
		st := s.Stats()
		out["version"] = st.Version + ", built on " + buildDate()
		out["read_only"] = false
		out["node_count"] = st.NodeCount
		out["server_stats"] = map[string]any{
			"packets_sent":                 st.PacketsSent,
			"packets_received":             st.PacketsReceived,
			"server_state":                 st.Mode,
			"last_processed_zxid":          st.LastZxid,
			"outstanding_requests":         st.Outstanding,
			"avg_latency":                  st.AvgLatency,
			"max_latency":                  st.MaxLatency,
			"min_latency":                  st.MinLatency,
			"num_alive_client_connections": st.Connections,
			"uptime":                       st.Uptime.Milliseconds(),
			"auth_failed_count":            st.AuthFailed,
			"data_dir_size":                dirSize(s.cfg.Dir),
			"log_dir_size":                 dirSize(s.cfg.Dir),
			"provider_null":                false,
		}
		if name == "stats" {
			out["connections"] = s.connectionsJSON()
			out["secure_connections"] = []any{}
		}
	case "watch_summary":
		ws := s.watches.summary()
		out["num_connections"] = ws.Connections
		out["num_paths"] = ws.Paths
		out["num_total_watches"] = ws.Total
	case "watches":
		m := map[string][]string{}
		for id, paths := range s.watches.bySession() {
			m[strconv.FormatInt(id, 10)] = paths
		}
		out["session_id_to_watched_paths"] = m
	case "watches_by_path":
		out["path_to_session_ids"] = s.watches.byPath()
	case "dump":
		v := s.view()
		eph := map[string][]string{}
		for _, ss := range v.Sessions() {
			if e := v.Ephemerals(ss.ID); len(e) > 0 {
				eph[strconv.FormatInt(ss.ID, 10)] = e
			}
		}
		out["session_id_to_ephemeral_paths"] = eph
		out["expiry_time_to_session_ids"] = map[string][]int64{}
	case "voting_view":
		cur := map[string]any{}
		if len(s.cfg.Peers) > 1 {
			for _, p := range s.cfg.Peers {
				cur[strconv.FormatInt(p.ID, 10)] = map[string]any{
					"server_addresses":   []string{p.PeerAddr},
					"election_addresses": []string{p.PeerAddr},
					"client_address":     p.ClientAddr,
					"learner_type":       "participant",
				}
			}
		}
		out["current_config"] = cur
	}
}

func (s *Server) connectionsJSON() []map[string]any {
	var list []map[string]any
	for _, c := range s.sortedConns() {
		st := &c.stats
		avg := int64(0)
		if n := st.count.Load(); n > 0 {
			avg = st.sumLatency.Load() / n
		}
		list = append(list, map[string]any{
			"remote_socket_address": c.remote,
			"interest_ops":          c.interestOps(),
			"outstanding_requests":  c.queued.Load(),
			"packets_received":      st.received.Load(),
			"packets_sent":          st.sent.Load(),
			"session_id":            c.session(),
			"last_operation":        opAbbrev(opOf(st.lastOp.Load())),
			"established":           st.established.UnixMilli(),
			"session_timeout":       c.timeout.Load(),
			"last_cxid":             st.lastCxid.Load(),
			"last_zxid":             st.lastZxid.Load(),
			"last_response_time":    st.lastResp.Load(),
			"last_latency":          st.lastLatency.Load(),
			"min_latency":           st.minLatency.Load(),
			"avg_latency":           avg,
			"max_latency":           st.maxLatency.Load(),
		})
	}
	if list == nil {
		list = []map[string]any{}
	}
	return list
}

func lastPort(addr string) string {
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		return addr[i+1:]
	}
	return addr
}

// serveMetrics serves the server's Prometheus registry (metrics.go): ZooKeeper's metric names
// where ZooKeeper has one, zkd's Raft and latency histograms, and the Go runtime and process
// collectors.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
}
