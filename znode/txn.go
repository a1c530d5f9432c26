package znode

import "github.com/zkd-io/zkd/jute"

// Txn is one write to apply to the tree. Everything that must be the same on every replica is in it:
// the leader's wall-clock time, the session that sent it and that session's identities. Apply takes
// the zxid separately.
type Txn struct {
	// Time is the leader's wall clock in milliseconds since the Unix epoch. It becomes ctime/mtime
	// and is the "now" of TTL checks.
	Time int64
	// Session is the originating session id; 0 for internal transactions.
	Session int64
	// Auth holds the caller's identities (the implicit ip id, digest ids, and super if the caller
	// authenticated as the super user). ACL checks and the `auth` ACL scheme use them.
	Auth []jute.Id
	// Op selects the operation. Client writes use their op code with the matching jute request
	// record in Req (OpCreate/OpCreate2/OpCreateContainer: *jute.CreateRequest; OpCreateTTL:
	// *jute.CreateTTLRequest; OpDelete: *jute.DeleteRequest; OpSetData: *jute.SetDataRequest;
	// OpSetACL: *jute.SetACLRequest; OpMulti: *jute.MultiRequest).
	// Internal transactions: OpCreateSession with *CreateSession; OpCloseSession with nil (closes
	// Session) or *CloseSessions; OpDeleteContainer with *Reap.
	Op  jute.Op
	Req any
	// Attach identifies the connection (attachment) of Session that sent a client write: a token
	// the leader hands out whenever the session attaches to a connection, larger for every later
	// attachment. Seq is the write's position among the writes sent on that attachment, from 1.
	// Apply takes a session's writes only in that order (see Tree.Apply). Attach 0 means the
	// write is not ordered (internal transactions, and entries written before ordering existed).
	Attach uint64
	Seq    uint64
	// NoTTL refuses TTL nodes (zoo.cfg extendedTypesEnabled=false on the server that took the
	// write): creating one fails with Unimplemented, inside a multi too.
	NoTTL bool
	// SASLACL accepts the sasl scheme in ACLs (zoo.cfg authProvider.N naming ZooKeeper's
	// SASLAuthenticationProvider on the server that took the write); without it a sasl entry
	// is InvalidACL and sasl identities do not expand the auth scheme, as in ZooKeeper.
	SASLACL bool
}

// CreateSession registers a new session. The leader chooses the id and password, and the token of
// the attachment the session starts on (0: none).
type CreateSession struct {
	ID      int64
	Timeout int32 // negotiated timeout, ms
	Passwd  []byte
	Attach  uint64
}

// CloseSessions closes the listed sessions (expiry, decided by the leader), deleting all their
// ephemeral nodes in this one transaction. Unknown ids are skipped.
type CloseSessions struct {
	IDs []int64
}

// Reap deletes containers and TTL nodes that are still candidates when the transaction is applied
// (the leader found them with View.ReapCandidates; Apply checks again, so a node that gained a
// child or was written since is kept).
type Reap struct {
	Paths []string
	// NeverUsedInterval is znode.container.maxNeverUsedIntervalMs: a container that never had a
	// child is a candidate once this many ms have passed since its mtime; 0 means never.
	NeverUsedInterval int64
}

// Event is a change that watches may fire on. Apply returns them in the order the changes were made.
type Event struct {
	Type jute.EventType // NodeCreated, NodeDeleted, NodeDataChanged or NodeChildrenChanged
	Path string         // the node; for NodeChildrenChanged, the parent
	// ACL is the ACL of Path at the time of the change; the server drops the event for
	// connections without READ on it. The slice is shared with the tree: do not modify it.
	ACL []jute.ACL
}

// Result is the outcome of applying a Txn.
type Result struct {
	Zxid int64
	// Err is nil or a jute.Code. A failed write still used its zxid. A failed multi has Err nil
	// (ZooKeeper's header err is 0) and the per-op codes in its *jute.MultiResponse.
	Err error
	// Resp is the reply body when Err is nil, ready to encode (nil for ops without a body).
	Resp jute.Record
	// Events are the watch triggers of the change, empty when it failed.
	Events []Event
	// Closed lists the sessions the transaction closed (closeSession, expiry), in the order
	// closed: the servers end those sessions' connections.
	Closed []int64
}

// Session is a row of the session table.
type Session struct {
	ID      int64
	Timeout int32
	Passwd  []byte
}
