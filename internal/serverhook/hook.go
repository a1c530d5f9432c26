// Package serverhook gives server/zkdtest the switches only tests need, which package server
// keeps out of its public API. Package server sets these functions once, in its init, and
// nothing else writes them. Their arguments and results are package server's types (a server.Config, a
// *server.Server), passed as any because this package cannot import server.
package serverhook

var (
	// StartWithoutRaft is server.Start on consensus.Memory, the in-memory twin of the consensus
	// node: the same entries, apply path and session rules with no Raft, no peers and no disk,
	// each write applied as it is started.
	StartWithoutRaft func(cfg any) (srv any, err error)
	// DropClients closes every client connection of a server; their sessions live on.
	DropClients func(srv any)
)
