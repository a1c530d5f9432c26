package server

import (
	"sort"
	"sync/atomic"
	"time"

	"github.com/zkd-io/zkd/consensus"
	"github.com/zkd-io/zkd/jute"
)

// serverStats are the server-wide counters, all atomics on the instance.
type serverStats struct {
	packetsReceived    atomic.Int64
	packetsSent        atomic.Int64
	bytesSent          atomic.Int64
	authFailed         atomic.Int64
	connectionRejected atomic.Int64
	minLatency         atomic.Int64
	maxLatency         atomic.Int64
	sumLatency         atomic.Int64
	count              atomic.Int64
}

func (st *serverStats) recordLatency(ms int64) {
	st.sumLatency.Add(ms)
	if n := st.count.Add(1); n == 1 || ms < st.minLatency.Load() {
		st.minLatency.Store(ms)
	}
	if ms > st.maxLatency.Load() {
		st.maxLatency.Store(ms)
	}
}

func (st *serverStats) reset() {
	st.packetsReceived.Store(0)
	st.packetsSent.Store(0)
	st.minLatency.Store(0)
	st.maxLatency.Store(0)
	st.sumLatency.Store(0)
	st.count.Store(0)
}

// Stats is a point-in-time summary of a server, the source of the four-letter words, the admin
// commands and /metrics.
type Stats struct {
	// Version is the version string srvr reports.
	Version string
	// Mode is standalone, leader or follower.
	Mode string
	// Serving reports whether the server accepts clients.
	Serving bool
	// ServerID is the server's myid.
	ServerID int64
	// LastZxid is the zxid of the last transaction applied here.
	LastZxid int64
	// PacketsReceived and PacketsSent count client packets since start or the last srst.
	PacketsReceived, PacketsSent int64
	// MinLatency, AvgLatency and MaxLatency are request latencies in milliseconds.
	MinLatency, MaxLatency int64
	AvgLatency             float64
	// Connections is the number of open client connections.
	Connections int
	// Outstanding is the number of requests admitted and not yet answered.
	Outstanding int64
	// NodeCount is ZooKeeper's znode_count.
	NodeCount int
	// WatchCount is the number of watches; WatchedPaths the number of paths with a watch.
	WatchCount, WatchedPaths, WatchingConnections int
	// EphemeralCount is the number of ephemeral nodes.
	EphemeralCount int
	// DataSize is approximate_data_size.
	DataSize int64
	// Sessions is the number of sessions in the replicated session table.
	Sessions int
	// AuthFailed counts failed auth packets; ConnectionsRejected connections refused at accept.
	AuthFailed, ConnectionsRejected int64
	// Uptime is the time since Start.
	Uptime time.Duration
	// Followers and SyncedFollowers are set on a leader of a cluster.
	Followers, SyncedFollowers int
	// Snapshots counts and times the snapshots this server persisted since it started.
	Snapshots consensus.SnapshotTimes
}

// Version is the ZooKeeper version zkd presents itself as, with zkd's own suffix. The build itself
// (revision, time) is in ReadBuildInfo.
const Version = "3.9.5-zkd-0.1.0"

// Stats returns the server's current figures.
func (s *Server) Stats() Stats {
	v := s.view()
	ws := s.watches.summary()
	st := Stats{
		Version:             Version,
		Mode:                s.mode(),
		Serving:             s.cons.Serving(),
		ServerID:            s.cfg.ServerID,
		LastZxid:            v.Zxid(),
		PacketsReceived:     s.stats.packetsReceived.Load(),
		PacketsSent:         s.stats.packetsSent.Load(),
		MinLatency:          s.stats.minLatency.Load(),
		MaxLatency:          s.stats.maxLatency.Load(),
		NodeCount:           v.NodeCount(),
		WatchCount:          ws.Total,
		WatchedPaths:        ws.Paths,
		WatchingConnections: ws.Connections,
		EphemeralCount:      v.EphemeralCount(),
		DataSize:            v.DataSize(),
		Sessions:            len(v.Sessions()),
		AuthFailed:          s.stats.authFailed.Load(),
		ConnectionsRejected: s.stats.connectionRejected.Load(),
		Uptime:              time.Since(s.started),
	}
	if n := s.stats.count.Load(); n > 0 {
		st.AvgLatency = float64(s.stats.sumLatency.Load()) / float64(n)
	}
	for _, c := range s.connections() {
		st.Connections++
		st.Outstanding += int64(len(c.reqs))
	}
	st.Snapshots = s.cons.Stats().Snapshots
	if st.Mode == "leader" {
		st.Followers = len(s.cfg.Peers) - 1
		st.SyncedFollowers = st.Followers
	}
	return st
}

// mode is standalone for a one-voter server, else leader or follower.
func (s *Server) mode() string {
	if len(s.members()) <= 1 {
		return "standalone"
	}
	if s.cons.IsLeader() {
		return "leader"
	}
	return "follower"
}

// resetConnStats clears every connection's counters (crst).
func (s *Server) resetConnStats() {
	for _, c := range s.connections() {
		c.stats.reset()
	}
}

// sortedConns returns the open client connections, four-letter-word connections included (as
// ZooKeeper lists them), ordered by remote address, for stable output.
func (s *Server) sortedConns() []*conn {
	cs := s.connections()
	sort.Slice(cs, func(i, j int) bool { return cs[i].remote < cs[j].remote })
	return cs
}

// opOf converts a stored op code back to a jute.Op.
func opOf(v int32) jute.Op { return jute.Op(v) }
