package consensus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zkd-io/zkd/internal/third_party/raft"
)

// AddVoter adds a voting member (or updates its address). A non-leader forwards to the leader.
// The new member must be started with the same Peers list or none plus a Dir without state; it
// catches up from the log or a snapshot.
func (n *Node) AddVoter(ctx context.Context, id, addr string) error {
	return n.leaderOp(ctx, rpcAddVoter, &memberMsg{ID: id, Addr: addr}, func() error { return n.leaderAddVoter(ctx, id, addr) })
}

// RemoveServer removes a member. A non-leader forwards to the leader. A leader may remove itself;
// it steps down once the change commits.
func (n *Node) RemoveServer(ctx context.Context, id string) error {
	return n.leaderOp(ctx, rpcRemoveServer, &memberMsg{ID: id}, func() error { return n.leaderRemoveServer(ctx, id) })
}

// TransferLeadership asks the leader to hand leadership to the most up-to-date follower.
// Writes are refused (and retried by Start) while the transfer runs.
func (n *Node) TransferLeadership(ctx context.Context) error {
	return n.leaderOp(ctx, rpcTransfer, noMsg{}, n.leaderTransfer)
}

// Members returns the current Raft configuration.
func (n *Node) Members() ([]Peer, error) {
	f := n.raft.GetConfiguration()
	if err := waitFuture(f, 0, n.stop); err != nil {
		return nil, fmt.Errorf("consensus: configuration: %w", err)
	}
	var out []Peer
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			out = append(out, Peer{ID: string(s.ID), Addr: string(s.Address)})
		}
	}
	return out, nil
}

// leaderOp runs a membership change on the leader: local when this node leads, else kind with
// req forwarded to it.
func (n *Node) leaderOp(ctx context.Context, kind byte, req msg, local func() error) error {
	return n.onLeader(ctx, true, local, func(addr string) error {
		return n.callLeader(ctx, addr, kind, req, noMsg{})
	})
}

func raftTimeout(ctx context.Context, def time.Duration) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return max(time.Until(d), time.Millisecond)
	}
	return def
}

func wrapLeaderErr(err error) error {
	if errors.Is(err, raft.ErrNotLeader) {
		return fmt.Errorf("%w: %w", ErrNotLeader, err)
	}
	return err
}

func (n *Node) leaderAddVoter(ctx context.Context, id, addr string) error {
	if n.raft.State() != raft.Leader {
		return ErrNotLeader
	}
	err := waitFuture(n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, raftTimeout(ctx, n.cfg.HoldTimeout)), 0, n.stop)
	if err != nil {
		return fmt.Errorf("consensus: add voter %s: %w", id, wrapLeaderErr(err))
	}
	return nil
}

func (n *Node) leaderRemoveServer(ctx context.Context, id string) error {
	if n.raft.State() != raft.Leader {
		return ErrNotLeader
	}
	err := waitFuture(n.raft.RemoveServer(raft.ServerID(id), 0, raftTimeout(ctx, n.cfg.HoldTimeout)), 0, n.stop)
	if err != nil {
		return fmt.Errorf("consensus: remove server %s: %w", id, wrapLeaderErr(err))
	}
	return nil
}

func (n *Node) leaderTransfer() error {
	if n.raft.State() != raft.Leader {
		return ErrNotLeader
	}
	if err := waitFuture(n.raft.LeadershipTransfer(), 0, n.stop); err != nil {
		return fmt.Errorf("consensus: leadership transfer: %w", wrapLeaderErr(err))
	}
	return nil
}

// Stats is a point-in-time summary of a node, for four-letter words and metrics.
type Stats struct {
	ID           string
	State        string // Leader, Follower, Candidate or Shutdown
	LeaderID     string
	LeaderAddr   string
	Term         uint64
	Ready        bool // an established leader
	Serving      bool
	LastZxid     int64  // last transaction applied by this node's FSM
	CommitIndex  uint64 // Raft's commit index as this node knows it
	LastIndex    uint64 // last index in this node's log
	Outstanding  int    // proposals of this node not yet settled
	Proposed     int64  // proposals submitted (locally or forwarded)
	Forwarded    int64  // proposals forwarded to another leader
	Retried      int64  // calls through the leader (writes, reads of its index, validations) tried again because nothing was done
	Unknown      int64  // proposals answered with ErrUnknownOutcome
	Applied      int64  // transactions applied by this node's FSM since start
	Expired      int64  // sessions this node expired as leader
	Reaped       int64  // nodes this node reaped as leader
	Announced    int64  // commits announced to the followers as leader (relay.go)
	Relayed      int64  // forwarded commits this follower passed on to its own Raft (relay.go)
	Heard        int64  // commit announcements this follower received from the leader (relay.go)
	RelayWaited  int64  // times a forwarded commit waited for its entry to reach the local log
	RelayRefused int64  // relayed commits the local Raft refused (its entry there has another term)
	Tracked      int    // sessions with a liveness deadline on this node
	// LeaderChanges counts the leaders this node has learnt of since it started.
	LeaderChanges int64
	// LeaderSince is when this node became the leader; zero when it is not.
	LeaderSince time.Time
	// Followers is the leader's view of each other voter (nil on a follower).
	Followers []FollowerStats
	// ProposalSizeLast, Min and Max are the sizes in bytes of the entries this node appended as
	// leader (0 before the first).
	ProposalSizeLast, ProposalSizeMin, ProposalSizeMax int64
	// LogBytes and SnapshotBytes are the disk space of the Raft log and of the snapshots (0 in
	// memory).
	LogBytes, SnapshotBytes int64
	// DiskFull reports that the data directory's disk is full, so writes cannot be made
	// durable. It is false until disk-full detection sets it.
	DiskFull bool
}

// Stats returns the node's counters.
func (n *Node) Stats() Stats {
	addr, id := n.raft.LeaderWithID()
	last := n.raft.LastIndex()
	logBytes, snapBytes := diskUsage(n.cfg.Dir)
	m := n.metrics
	var since time.Time
	if ns := m.leaderSince.Load(); ns != 0 {
		since = time.Unix(0, ns)
	}
	return Stats{
		ID:           n.cfg.ID,
		State:        n.raft.State().String(),
		LeaderID:     string(id),
		LeaderAddr:   string(addr),
		Term:         n.raft.CurrentTerm(),
		Ready:        n.IsLeader(),
		Serving:      n.Serving(),
		LastZxid:     n.LastZxid(),
		CommitIndex:  n.raft.CommitIndex(),
		LastIndex:    last,
		Outstanding:  len(n.props.slots),
		Proposed:     n.stats.proposed.Load(),
		Forwarded:    n.stats.forwarded.Load(),
		Retried:      n.stats.retried.Load(),
		Unknown:      n.stats.unknown.Load(),
		Applied:      n.fsm.applies.Load(),
		Expired:      n.stats.expired.Load(),
		Reaped:       n.stats.reaped.Load(),
		Announced:    n.stats.announced.Load(),
		Relayed:      n.stats.relayed.Load(),
		Heard:        n.stats.heard.Load(),
		RelayWaited:  n.stats.relayWaited.Load(),
		RelayRefused: n.stats.relayRefused.Load(),
		Tracked:      n.sessions.len(),

		LeaderChanges:    m.leaderChanges.Load(),
		LeaderSince:      since,
		Followers:        n.metrics.followerStats(n.raft, n.cfg.ID, n.cfg.ElectionTimeout, last),
		ProposalSizeLast: m.propLast.Load(),
		ProposalSizeMin:  m.propMin.Load(),
		ProposalSizeMax:  m.propMax.Load(),
		LogBytes:         logBytes,
		SnapshotBytes:    snapBytes,
		DiskFull:         n.disk.full.Load(),
	}
}

// runSnapshotter takes the snapshots the FSM asks for when SnapshotBytes of entries were applied
// since the last one; it is that request's only goroutine and stops with the node.
func (n *Node) runSnapshotter() {
	for {
		select {
		case <-n.snap:
		case <-n.stop:
			return
		}
		if err := n.Snapshot(); err != nil {
			n.log.Warn("snapshot by log size failed", "err", err)
			n.fsm.resetSnapCount() // ask again after another SnapshotBytes
		}
	}
}

// Snapshot takes a snapshot now (normally Raft takes one every SnapshotThreshold entries) and
// compacts the log behind it.
func (n *Node) Snapshot() error {
	if err := waitFuture(n.raft.Snapshot(), 0, n.stop); err != nil {
		return fmt.Errorf("consensus: snapshot: %w", err)
	}
	return nil
}
