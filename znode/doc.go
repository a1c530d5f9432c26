// Package znode is zkd's data tree: the znodes with ZooKeeper's exact Stat semantics, sequential
// counters, ephemeral nodes by session, containers and TTL nodes, ACL storage and checks, path
// validation, multi atomicity, the session table, and snapshots.
//
// The package is pure: it performs no I/O beyond the io.Reader and io.Writer given to the snapshot
// functions, reads no clock, uses no randomness and starts no goroutines. Time, session ids and
// zxids are inputs (Txn.Time, Txn.Session, the zxid passed to Apply), so every replica that applies
// the same transactions reaches the same state and writes byte-identical snapshots.
//
// # Concurrency
//
// One goroutine calls Tree.Apply (consensus serialises it). Any goroutine may call Tree.View at any
// time: it is O(1) and returns an immutable point-in-time View. Nodes are never modified once
// published; Apply copies the changed node and its ancestors (path copying over persistent B-trees)
// and publishes the new root with an atomic store. So reads and snapshot writing run in parallel
// with Apply without locks, and a multi is all-or-nothing by building on a working copy that is
// dropped if an op fails. Within a multi, the copies made by its earlier ops are changed in place
// by later ones (they are not published yet), so a path is copied once per multi, not per op.
//
// # Errors
//
// Every rejection is a jute.Code, which implements error, so errors.Is(err, jute.CodeNoNode) works
// and each failure maps to ZooKeeper's wire code by construction. The Err… variables below name the
// codes znode produces.
//
// # Transactions
//
// Apply takes the client write ops with their jute request records (see Txn), plus the internal
// createSession, closeSession and deleteContainer (Reap, or a client's DeleteContainerRequest).
// A top-level check, and any op that is not a write, gives Unimplemented; a request record of the
// wrong type gives MarshallingError. Every call, failed or not, advances LastZxid to its zxid. TTL
// creates are always accepted: refusing them when extended types are off is the server's job.
// Session ids are opaque: node kinds are stored apart from the owner, so any id is allowed.
//
// # Snapshots
//
// View.WriteSnapshot streams a versioned binary format (see snapshot.go) with a CRC-32C trailer;
// ReadSnapshot restores it and refuses anything malformed with ErrCorruptSnapshot.
//
// # Quotas
//
// The tree keeps ZooKeeper's quota accounting (see quota.go): a node zookeeper_limits under
// /zookeeper/quota/<path> makes <path> a quota root, and every create, delete and setData under
// the longest such root updates the "count=N,bytes=M" text of its zookeeper_stats node in place
// (no version, mzxid or mtime change, no watch event). View.Quotas reports limits and usage.
// Limits are never enforced, as in ZooKeeper without enforceQuota.
//
// # Counting
//
// NodeCount follows ZooKeeper's znode_count, which counts a "" alias of the root: a fresh tree
// reports 5 for its 4 nodes. DataSize follows approximate_data_size (path plus data lengths; 44 for a
// fresh tree). getAllChildrenNumber counts all descendants (3 for "/" on a fresh tree).
package znode

import "github.com/zkd-io/zkd/jute"

// Errors returned by Apply (in Result.Err or per multi op) and View.Read. Each is the jute.Code
// ZooKeeper answers with.
var (
	ErrNoNode                  error = jute.CodeNoNode
	ErrNodeExists              error = jute.CodeNodeExists
	ErrBadVersion              error = jute.CodeBadVersion
	ErrNotEmpty                error = jute.CodeNotEmpty
	ErrNoChildrenForEphemerals error = jute.CodeNoChildrenForEphemerals
	ErrBadArguments            error = jute.CodeBadArguments
	ErrNoAuth                  error = jute.CodeNoAuth
	ErrInvalidACL              error = jute.CodeInvalidACL
	ErrSessionExpired          error = jute.CodeSessionExpired
	ErrMarshallingError        error = jute.CodeMarshallingError
	ErrUnimplemented           error = jute.CodeUnimplemented
)
