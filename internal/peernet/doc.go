// Package peernet owns a node's peer port: the Network it listens and dials on (plain TCP, or a
// fault-injecting one in tests), the socket options of peer connections (Tune), mutual TLS
// between members with the membership checks ZooKeeper's sslQuorum makes (TLSConfig, TLS), and
// the StreamLayer that hands Raft its connections. It knows the protocol of the port only as far
// as its first byte: ConnRaft or ConnRPC, or the start of a TLS handshake.
//
// Use: a node listens through its Network, reads each accepted connection's first byte within
// HandshakeTimeout, passes a TLS one through TLS.Accept (ReplayConn gives the byte back), and
// hands Raft connections to StreamLayer.Handoff; it dials through Network, Tune and TLS.Dial,
// then writes the connection type. A failed dial before anything was sent is a DialError.
// FailLog keeps repeated failures of one peer to a line a minute.
//
// Concurrency: TLS, StreamLayer and FailLog are safe for concurrent use; TLS uses its
// configurations as given for every connection, so certificates a loader reloads stay current.
package peernet
