package server

import (
	"math"
	"sort"
	"time"

	"github.com/zkd-io/zkd/consensus"
	"github.com/zkd-io/zkd/jute"
)

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
	// MinLatency, AvgLatency and MaxLatency are request latencies in milliseconds since start or
	// the last srst.
	MinLatency, MaxLatency int64
	AvgLatency             float64
	// Connections is the number of open client connections.
	Connections int
	// Outstanding is the number of requests admitted and not yet answered, server-wide (what
	// the request throttler and the global outstanding limit count).
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
	// Followers and SyncedFollowers are set on a leader of a cluster: its followers, and those
	// that answered within the election timeout and are not being sent a snapshot.
	Followers, SyncedFollowers int
	// Node is the consensus node's own figures, taken with the others.
	Node consensus.Stats
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
		PacketsReceived:     s.m.packetsReceived.SinceReset(),
		PacketsSent:         s.m.packetsSent.SinceReset(),
		NodeCount:           v.NodeCount(),
		WatchCount:          ws.Total,
		WatchedPaths:        ws.Paths,
		WatchingConnections: ws.Connections,
		EphemeralCount:      v.EphemeralCount(),
		DataSize:            v.DataSize(),
		Sessions:            len(v.Sessions()),
		AuthFailed:          s.m.authFailed.SinceReset(),
		ConnectionsRejected: s.m.connRejected.SinceReset(),
		Uptime:              time.Since(s.started),
		Node:                s.cons.Stats(),
	}
	lat := s.latency()
	st.MinLatency, st.MaxLatency, st.AvgLatency = int64(lat.MinValue()), int64(math.Ceil(lat.MaxValue())), lat.Avg()
	st.Connections = len(s.connections())
	st.Outstanding = s.gate.inProcess.Load() // ZooKeeper's outstanding_requests: its requests in process
	if st.Mode == "leader" {
		st.Followers = len(st.Node.Followers)
		for _, f := range st.Node.Followers {
			if f.Synced {
				st.SyncedFollowers++
			}
		}
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
