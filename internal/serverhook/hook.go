// Package serverhook gives the rest of this module what package server keeps out of its public
// API: switches only tests need (server/zkdtest) and the load figures the zkd binary paces its
// processors by (cmd/zkd). Package server sets these functions once, in its init, and nothing
// else writes them. Their arguments and results are package server's types (a server.Config, a
// *server.Server), passed as any because this package cannot import server.
package serverhook

import "github.com/zkd-io/zkd/internal/metric"

var (
	// StartWithoutRaft is server.Start on consensus.Memory, the in-memory twin of the consensus
	// node: the same entries, apply path and session rules with no Raft, no peers and no disk,
	// each write applied as it is started.
	StartWithoutRaft func(cfg any) (srv any, err error)
	// DropClients closes every client connection of a server; their sessions live on.
	DropClients func(srv any)
	// Packets returns the client packets a server has received and sent since it started
	// (requests, replies and watch notifications); unlike the statistics, srst does not reset it.
	Packets func(srv any) uint64
	// Latencies returns the running totals of every request's latency since a server started,
	// reads and writes together (srst does not reset them); metric.Snapshot.Since gives a window.
	Latencies func(srv any) metric.Snapshot
)
