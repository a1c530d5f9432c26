package server

import (
	"context"
	"errors"

	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/znode"
)

// backend is what the client server needs from the replicated state: the consensus node in
// production. Keeping it small keeps the connection code independent of Raft.
type backend interface {
	// View returns the current immutable view of the tree. It is O(1) and safe from any goroutine.
	View() *znode.View
	// Start hands a client write to the leader and returns without waiting for it to commit.
	// Writes started one after another are applied in that order; an ordered write (w.attach set)
	// is applied only right after its predecessor on the same attachment, or refused with
	// SessionMoved. An error means nothing was proposed (bad request) or the outcome is unknown
	// (no leader, shutdown): the server answers MarshallingError or drops the connection.
	Start(ctx context.Context, w write) (pendingWrite, error)
	// CreateSession replicates a new session with the negotiated timeout (ms) and returns it with
	// the token of the attachment (connection) it starts on.
	CreateSession(ctx context.Context, timeout int32) (znode.Session, uint64, error)
	// ValidateSession asks the session's authority (the leader) whether id is still alive,
	// touching it and making this server its owner, and returns the token of the new attachment.
	// errSessionGone means expired or unknown.
	ValidateSession(ctx context.Context, id int64, timeout int32) (uint64, error)
	// Touch records activity on a session this server owns.
	Touch(id int64)
	// Sync returns once this server has applied everything committed when Sync was called.
	Sync(ctx context.Context) error
	// Serving reports whether this server may serve clients (it has a leader and caught up).
	Serving() bool
	// Leader reports whether this server is the Raft leader.
	Leader() bool
}

// write is a client write on its way to the leader.
type write struct {
	session int64
	// attach is the token of the connection's attachment to the session; seq is the write's
	// position among the writes the connection started, from 1.
	attach, seq uint64
	auth        []jute.Id // the connection's identities when the request arrived
	op          jute.Op
	req         jute.Record // nil for closeSession
}

// pendingWrite is a started write. Wait returns its result once this server applied it (the
// apply hook has queued its watch events by then); an error means its outcome is unknown.
type pendingWrite interface {
	Wait(ctx context.Context) (znode.Result, error)
}

// errSessionGone reports that a session is expired, closed or unknown.
var errSessionGone = errors.New("server: session expired or unknown")

// errSessionMoved closes a connection whose session went on elsewhere, or whose write order broke.
var errSessionMoved = errors.New("server: session moved or write order broken")
