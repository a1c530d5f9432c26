package consensus

import "github.com/zkd-io/zkd/internal/peernet"

// Peer networking belongs to internal/peernet; these are its names that the node's configuration
// carries.

// Network opens the peer listener and dials peers. Both Raft and the cluster RPC use it, so a
// fault-injecting implementation (tests) affects both alike.
type Network = peernet.Network

// TCPNetwork is the default Network: plain TCP.
type TCPNetwork = peernet.TCPNetwork

// PeerTLS puts the peer port (Raft and the cluster RPC) under mutual TLS, ZooKeeper's
// sslQuorum; see peernet.TLSConfig.
type PeerTLS = peernet.TLSConfig
