package consensus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/zkd-io/zkd/internal/third_party/raft"
)

// leadership is what this node knows of its standing in the cluster, and acts on: whether it
// leads with its takeover finished (readyTerm: establish), whether it serves clients (the serving
// signal: update), whether the latest configuration still lists it (checkMembership), and the
// read index, which rests on an established leader.
type leadership struct {
	n           *Node
	readyTerm   atomic.Uint64 // term in which this leader's FSM caught up and sessions were reset; 0: not ready
	leaderEpoch atomic.Int64  // bumped on every leadership change notification
	serving     atomic.Bool
	catchingUp  atomic.Bool
	// member is whether the latest configuration this node knows lists it (checkMembership):
	// memberUnknown until first checked, then memberIn or memberOut.
	member atomic.Int32
	// removed is set when a peer that follows a leader, and whose log reaches further than
	// this node's, has a configuration without this node (askMembership); cleared when this node
	// hears from a leader again.
	removed atomic.Bool
	// askedAt is when askMembership last ran (unix nanoseconds); asking is one goroutine at a time.
	askedAt atomic.Int64
	asking  atomic.Bool
}

// Values of leadership.member.
const (
	memberUnknown = iota
	memberIn
	memberOut
)

// establish finishes a takeover: a barrier so the FSM holds every committed entry, then every
// session gets a full timeout (ZooKeeper's new leader does the same), then the node is ready.
func (ls *leadership) establish(epoch int64) {
	n := ls.n
	for ls.leaderEpoch.Load() == epoch && n.raft.State() == raft.Leader {
		term := n.raft.CurrentTerm()
		err := waitFuture(n.raft.Barrier(n.cfg.HoldTimeout), 0, n.stop)
		if err == nil && n.raft.CurrentTerm() != term {
			err = errors.New("consensus: term changed during the barrier")
		}
		if err == nil {
			n.sessions.reset(n.View().Sessions(), time.Now())
			if ls.leaderEpoch.Load() == epoch {
				// Ready for this term only: the barrier committed in it, so from now on the
				// commit index covers everything committed by earlier leaders.
				ls.readyTerm.Store(term)
				n.log.Info("leadership established", "zxid", n.LastZxid())
				ls.updateServing()
			}
			return
		}
		n.log.Warn("leader barrier failed", "err", err)
		select {
		case <-n.stop:
			return
		case <-time.After(n.cfg.HeartbeatTimeout / 4):
		}
	}
}

func (ls *leadership) setServing(v bool) {
	n := ls.n
	if ls.serving.Swap(v) != v {
		n.metrics.servingChanged(v, n.raft.State() == raft.Leader, time.Now())
		n.log.Info("serving changed", "serving", v, "zxid", n.LastZxid())
		if n.cfg.OnServing != nil {
			n.cfg.OnServing(v)
		}
	}
}

// updateServing recomputes the serving signal; catching up runs on its own goroutine.
func (ls *leadership) updateServing() {
	n := ls.n
	ls.checkMembership()
	if ls.member.Load() == memberOut {
		ls.setServing(false) // removed by a reconfig: it no longer serves clients
		return
	}
	switch n.raft.State() {
	case raft.Leader:
		ls.setServing(n.IsLeader())
		return
	case raft.Follower:
	default:
		ls.setServing(false)
		return
	}
	_, id := n.raft.LeaderWithID()
	if id == "" || time.Since(n.raft.LastContact()) > 2*n.cfg.HeartbeatTimeout {
		ls.setServing(false)
		return
	}
	if ls.serving.Load() || !ls.catchingUp.CompareAndSwap(false, true) {
		return
	}
	if !n.goTracked(func() {
		defer ls.catchingUp.Store(false)
		ctx, cancel := context.WithTimeout(n.ctx, 4*n.cfg.HeartbeatTimeout)
		defer cancel()
		start := time.Now()
		if err := ls.sync(ctx, false); err != nil {
			n.log.Debug("catch-up failed", "err", err)
			return
		}
		n.metrics.followSync.ObserveDuration(time.Since(start))
		ls.setServing(true)
	}) {
		ls.catchingUp.Store(false)
	}
}

// checkMembership logs, once per change (the first check included, so a removed server that
// restarts says so again), when the latest configuration stops or starts listing this node: a
// member removed by a reconfig stops serving, and its operator should hear why in plain words
// rather than guess from "serving changed".
func (ls *leadership) checkMembership() {
	n := ls.n
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	servers := f.Configuration().Servers
	if len(servers) == 0 {
		return // a member-to-be (NoBootstrap) before it is added
	}
	in := false
	for _, s := range servers {
		if s.ID == raft.ServerID(n.cfg.ID) {
			in = true
		}
	}
	if _, id := n.raft.LeaderWithID(); id != "" {
		ls.removed.Store(false) // replicated to again: this node's configuration is current
	} else if in && n.raft.State() != raft.Leader {
		if ls.removed.Load() {
			in = false // a peer knows a newer configuration without this node
		} else {
			ls.askMembership(servers)
		}
	}
	state := int32(memberOut)
	if in {
		state = memberIn
	}
	if ls.member.Swap(state) == state {
		return
	}
	if in {
		n.log.Info("this server is a member of the cluster", "members", len(servers))
		return
	}
	n.log.Warn("this server was removed from the cluster by a membership change (reconfig): it no longer "+
		"votes or serves clients; stop it, or add it back with reconfig -add", "members", len(servers))
}

// askMembership asks the other members of this node's configuration, at most every two seconds
// and in the background, for theirs. The leader stops replicating to a server as soon as it
// proposes that server's removal, so the removed server may never receive the entry that removes
// it: it then keeps its old configuration and campaigns forever. A peer that follows a leader and
// knows a configuration without this node, and whose log reaches at least as far as this node's
// (so that configuration is not an older one that predates this node's joining), tells it so,
// and checkMembership says it was removed.
func (ls *leadership) askMembership(servers []raft.Server) {
	n := ls.n
	now := time.Now().UnixNano()
	if now-ls.askedAt.Load() < int64(2*time.Second) || !ls.asking.CompareAndSwap(false, true) {
		return
	}
	ls.askedAt.Store(now)
	if !n.goTracked(func() {
		defer ls.asking.Store(false)
		ctx, cancel := context.WithTimeout(n.ctx, 2*n.cfg.HeartbeatTimeout)
		defer cancel()
		for _, s := range servers {
			if s.ID == raft.ServerID(n.cfg.ID) {
				continue
			}
			var m membersMsg
			if err := n.callLeader(ctx, string(s.Address), rpcMembers, noMsg{}, &m); err != nil {
				continue // an older peer, or one without a leader either
			}
			if m.Index >= n.raft.LastIndex() && len(m.IDs) > 0 && !slices.Contains(m.IDs, n.cfg.ID) {
				ls.removed.Store(true)
				return
			}
		}
	}) {
		ls.asking.Store(false)
	}
}

func (ls *leadership) sync(ctx context.Context, hold bool) error {
	n := ls.n
	idx, err := ls.readIndex(ctx, hold)
	if err != nil {
		return err
	}
	return n.WaitApplied(ctx, idx)
}

// readIndex returns a committed command index at or after the leader's commit index at the time
// of the call; it retries while no leader is known (for up to HoldTimeout if hold).
func (ls *leadership) readIndex(ctx context.Context, hold bool) (int64, error) {
	n := ls.n
	var idx int64
	err := n.onLeader(ctx, hold, func() (err error) {
		idx, err = ls.leaderReadIndex()
		return err
	}, func(addr string) error {
		var m readIndexMsg
		err := n.callLeader(ctx, addr, rpcReadIndex, noMsg{}, &m)
		if errors.Is(err, errConnLost) {
			// A read index has no effect: asking again is safe.
			err = dialError{err}
		}
		idx = m.Index
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("consensus: read index: %w", err)
	}
	return idx, nil
}

// leaderReadIndex is the leader's half of readIndex.
func (ls *leadership) leaderReadIndex() (int64, error) {
	n := ls.n
	// ReadIndex needs a leader that committed an entry of its own term (the barrier in
	// establish); a node re-elected before the monitor saw it step down must not answer from the
	// older term's readiness, whose commit index may miss writes of the leader in between.
	term := ls.readyTerm.Load()
	if term == 0 || n.raft.State() != raft.Leader || n.raft.CurrentTerm() != term {
		return 0, ErrNotLeader
	}
	commit := n.raft.CommitIndex() // before verifying (hashicorp/raft#603)
	if err := ls.verifyLeader(); err != nil {
		return 0, err
	}
	if n.raft.CurrentTerm() != term {
		return 0, fmt.Errorf("%w: term changed during the read index", ErrNotLeader)
	}
	return ls.lastCommandUpTo(commit), nil
}

// lastCommandUpTo returns the zxid to wait for so that everything committed up to index commit
// is applied here. The FSM never sees no-op, configuration or barrier entries, so it is the
// newest command at or below commit; everything at or below the applied zxid is a known command
// boundary.
func (ls *leadership) lastCommandUpTo(commit uint64) int64 {
	n := ls.n
	applied := n.LastZxid()
	for i := commit; int64(i) > applied; i-- {
		var l raft.Log
		if err := n.logs.GetLog(i, &l); err != nil {
			break
		}
		if l.Type == raft.LogCommand {
			return int64(i)
		}
	}
	return applied
}

// verifyLeader confirms leadership with a heartbeat round, bounded in time.
func (ls *leadership) verifyLeader() error {
	n := ls.n
	err := waitFuture(n.raft.VerifyLeader(), max(4*n.cfg.HeartbeatTimeout, time.Second), n.stop)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotLeader, err)
	}
	return nil
}
