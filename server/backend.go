package server

import (
	"context"
	"errors"

	"github.com/zkd-io/zkd/consensus"
	"github.com/zkd-io/zkd/internal/metric"
	"github.com/zkd-io/zkd/znode"
)

// backend is the replicated state a Server serves: *consensus.Node in production, and its
// in-memory twin *consensus.Memory in tests that need no Raft. The server reaches the replicated
// state only through it; writes go in through Start and come back, on every server, through the
// apply hook (Server.onApply) before the writer's Pending completes.
type backend interface {
	// View returns the current immutable view of the tree. It is O(1) and safe from any goroutine.
	View() *znode.View
	// Start hands a client write to the leader and returns without waiting for it to commit.
	// Writes started one after another are applied in that order; an ordered write (Attach set)
	// is applied only right after its predecessor on the same attachment, or refused with
	// SessionMoved. An error means nothing was proposed (ErrBadRequest) or the outcome is
	// unknown (no leader, shutdown): the server answers MarshallingError or drops the connection.
	Start(ctx context.Context, p consensus.Proposal) (*consensus.Pending, error)
	// CreateSession replicates a new session with the negotiated timeout (ms) and returns it with
	// the token of the attachment (connection) it starts on.
	CreateSession(ctx context.Context, timeoutMs int32) (znode.Session, uint64, error)
	// ValidateSession asks the session's authority (the leader) whether id is still alive,
	// touching it and making this server its owner, and returns the token of the new attachment.
	ValidateSession(ctx context.Context, id int64) (live bool, attach uint64, err error)
	// Touch records activity on sessions this server owns.
	Touch(ids ...int64)
	// Sync returns once this server has applied everything committed when Sync was called.
	Sync(ctx context.Context) error
	// Serving reports whether this server may serve clients (it has a leader and caught up).
	Serving() bool
	// IsLeader reports whether this server is the established leader.
	IsLeader() bool
	// Leader returns the leader's id and peer address, empty when none is known.
	Leader() (id, addr string)
	// Members returns the voting members.
	Members() ([]consensus.Peer, error)
	// AddVoter and RemoveServer change the membership (through the leader).
	AddVoter(ctx context.Context, id, addr string) error
	RemoveServer(ctx context.Context, id string) error
	// Stats returns the consensus figures for mntr, metrics and admin commands.
	Stats() consensus.Stats
	// Metrics returns consensus' measurements (fsync, apply, elections, ...), which mntr and
	// /metrics list after the server's own.
	Metrics() *metric.Set
	// SessionActivity returns what is known of each session in ids besides the replicated
	// table (creation time; on the leader, last touch and attached server), for the lock report.
	SessionActivity(ids []int64) []consensus.SessionActivity
	// LastSnapshot returns the newest snapshot in the store (last_snapshot); ok is false if none.
	LastSnapshot() (info consensus.SnapshotInfo, ok bool, err error)
	// Shutdown stops it and releases what it holds.
	Shutdown() error
}

var (
	_ backend = (*consensus.Node)(nil)
	_ backend = (*consensus.Memory)(nil)
)

// errSessionGone reports that a session is expired, closed or unknown.
var errSessionGone = errors.New("server: session expired or unknown")

// errSessionMoved closes a connection whose session went on elsewhere, or whose write order broke.
var errSessionMoved = errors.New("server: session moved or write order broken")

// isBadRequest reports whether consensus refused a proposal as malformed (nothing was proposed).
func isBadRequest(err error) bool { return errors.Is(err, consensus.ErrBadRequest) }
