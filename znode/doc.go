// Package znode is zkd's data tree: znodes with ZooKeeper's exact Stat semantics, sequential
// counters, ephemeral nodes by session, containers and TTL nodes, ACL storage and checks, path
// validation, multi atomicity, the session table, quota accounting, and snapshots.
//
// The package is pure: no I/O beyond the io.Reader and io.Writer given to the snapshot functions,
// no clock, no randomness, no goroutines. Time, session ids and zxids are inputs (Txn.Time,
// Txn.Session, the zxid passed to Apply), so every replica that applies the same transactions
// reaches the same state and writes byte-identical snapshots.
//
// # Concurrency
//
// One goroutine applies (consensus serialises it): Tree.Apply, or Tree.Batch, whose Apply calls
// are published together by Publish. Any goroutine may call Tree.View at any time: it is O(1) and
// returns an immutable point-in-time View, safe to read without locks while applies go on.
// Published nodes are never modified (path copying; see docs/architecture.md, "znode: an
// immutable tree"); a multi is all-or-nothing.
//
// # Transactions and errors
//
// Apply takes the client write ops with their jute request records (see Txn), plus the internal
// createSession, closeSession and deleteContainer (Reap, or a client's DeleteContainerRequest).
// A top-level check, and any op that is not a write, gives Unimplemented; a request record of the
// wrong type gives MarshallingError. Every call, failed or not, advances LastZxid to its zxid. TTL
// creates are always accepted: refusing them when extended types are off is the server's job.
// Session ids are opaque (node kinds are stored apart from the owner, so any id is allowed).
// Every rejection is a jute.Code, which implements error, so
// errors.Is(err, jute.CodeNoNode) works; the Err… variables below name the codes znode produces.
//
// # Snapshots, quotas, counting
//
// View.WriteSnapshot streams a versioned binary format (snapshot.go) with a CRC-32C trailer;
// ReadSnapshot refuses anything malformed with ErrCorruptSnapshot. A zookeeper_limits node under
// /zookeeper/quota/<path> makes <path> a quota root; creates, deletes and setData under the longest
// such root update its zookeeper_stats text in place (no version, mzxid or mtime change, no watch
// event); View.Quotas reports limits and usage, which are never enforced (quota.go). NodeCount
// follows ZooKeeper's znode_count, which counts a "" alias of the root (5 for a fresh tree's 4
// nodes); DataSize follows approximate_data_size (path plus data lengths; 44 for a fresh tree);
// getAllChildrenNumber counts all descendants (3 for "/" on a fresh tree).
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
