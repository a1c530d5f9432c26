package consensus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/zkd-io/zkd/internal/third_party/raft"
)

// monitor is the node's housekeeping goroutine: leadership changes, the serving signal, session
// touches, and on the leader session expiry and reaping.
func (n *Node) monitor() {
	servingTick := time.NewTicker(n.cfg.servingTick)
	defer servingTick.Stop()
	sessionTick := time.NewTicker(max(n.cfg.TickTime/2, time.Millisecond))
	defer sessionTick.Stop()
	var reapC <-chan time.Time
	if n.cfg.ReapInterval > 0 {
		reap := time.NewTicker(n.cfg.ReapInterval)
		defer reap.Stop()
		reapC = reap.C
	}
	for {
		select {
		case <-n.stop:
			return
		case leader := <-n.notify:
			epoch := n.leaderEpoch.Add(1)
			n.readyTerm.Store(0)
			if leader {
				n.goTracked(func() { n.establish(epoch) })
			}
			n.updateServing()
		case <-servingTick.C:
			n.updateServing()
		case <-sessionTick.C:
			n.keeper.flushTouches()
			if n.IsLeader() {
				// Off the monitor: proposing may wait for a free proposal slot.
				n.goTracked(n.keeper.expireSessions)
			}
		case <-reapC:
			if n.IsLeader() {
				n.goTracked(n.keeper.reap)
			}
		}
	}
}

// establish finishes a takeover: a barrier so the FSM holds every committed entry, then every
// session gets a full timeout (ZooKeeper's new leader does the same), then the node is ready.
func (n *Node) establish(epoch int64) {
	for n.leaderEpoch.Load() == epoch && n.raft.State() == raft.Leader {
		term := n.raft.CurrentTerm()
		err := waitFuture(n.raft.Barrier(n.cfg.HoldTimeout), 0, n.stop)
		if err == nil && n.raft.CurrentTerm() != term {
			err = errors.New("consensus: term changed during the barrier")
		}
		if err == nil {
			n.sessions.reset(n.View().Sessions(), time.Now())
			if n.leaderEpoch.Load() == epoch {
				// Ready for this term only: the barrier committed in it, so from now on the
				// commit index covers everything committed by earlier leaders.
				n.readyTerm.Store(term)
				n.log.Info("leadership established", "zxid", n.LastZxid())
				n.updateServing()
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

// Serving reports the serving signal: true on an established leader, and on a follower that
// hears from its leader and has caught up (a read-index completed) since it last stopped serving.
// A server refuses client connections while it is false.
func (n *Node) Serving() bool { return n.serving.Load() }

func (n *Node) setServing(v bool) {
	if n.serving.Swap(v) != v {
		n.metrics.servingChanged(v, n.raft.State() == raft.Leader, time.Now())
		n.log.Info("serving changed", "serving", v, "zxid", n.LastZxid())
		if n.cfg.OnServing != nil {
			n.cfg.OnServing(v)
		}
	}
}

// updateServing recomputes the serving signal; catching up runs on its own goroutine.
func (n *Node) updateServing() {
	n.checkMembership()
	if n.member.Load() == memberOut {
		n.setServing(false) // removed by a reconfig: it no longer serves clients
		return
	}
	switch n.raft.State() {
	case raft.Leader:
		n.setServing(n.IsLeader())
		return
	case raft.Follower:
	default:
		n.setServing(false)
		return
	}
	_, id := n.raft.LeaderWithID()
	if id == "" || time.Since(n.raft.LastContact()) > 2*n.cfg.HeartbeatTimeout {
		n.setServing(false)
		return
	}
	if n.serving.Load() || !n.catchingUp.CompareAndSwap(false, true) {
		return
	}
	if !n.goTracked(func() {
		defer n.catchingUp.Store(false)
		ctx, cancel := context.WithTimeout(n.ctx, 4*n.cfg.HeartbeatTimeout)
		defer cancel()
		start := time.Now()
		if err := n.sync(ctx, false); err != nil {
			n.log.Debug("catch-up failed", "err", err)
			return
		}
		n.metrics.followSync.ObserveDuration(time.Since(start))
		n.setServing(true)
	}) {
		n.catchingUp.Store(false)
	}
}

// Values of Node.member.
const (
	memberUnknown = iota
	memberIn
	memberOut
)

// checkMembership logs, once per change (the first check included, so a removed server that
// restarts says so again), when the latest configuration stops or starts listing this node: a
// member removed by a reconfig stops serving, and its operator should hear why in plain words
// rather than guess from "serving changed".
func (n *Node) checkMembership() {
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
		n.removed.Store(false) // replicated to again: this node's configuration is current
	} else if in && n.raft.State() != raft.Leader {
		if n.removed.Load() {
			in = false // a peer knows a newer configuration without this node
		} else {
			n.askMembership(servers)
		}
	}
	state := int32(memberOut)
	if in {
		state = memberIn
	}
	if n.member.Swap(state) == state {
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
func (n *Node) askMembership(servers []raft.Server) {
	now := time.Now().UnixNano()
	if now-n.askedAt.Load() < int64(2*time.Second) || !n.asking.CompareAndSwap(false, true) {
		return
	}
	n.askedAt.Store(now)
	if !n.goTracked(func() {
		defer n.asking.Store(false)
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
				n.removed.Store(true)
				return
			}
		}
	}) {
		n.asking.Store(false)
	}
}

// Sync implements ZooKeeper's sync: it asks the leader for its commit point (a read index: note
// the commit index, confirm leadership with a heartbeat round) and waits until this node applied
// it. Afterwards this node's view holds every write that completed before Sync was called.
func (n *Node) Sync(ctx context.Context) error { return n.sync(ctx, true) }

func (n *Node) sync(ctx context.Context, hold bool) error {
	idx, err := n.readIndex(ctx, hold)
	if err != nil {
		return err
	}
	return n.WaitApplied(ctx, idx)
}

// readIndex returns a committed command index at or after the leader's commit index at the time
// of the call; it retries while no leader is known (for up to HoldTimeout if hold).
func (n *Node) readIndex(ctx context.Context, hold bool) (int64, error) {
	var idx int64
	err := n.onLeader(ctx, hold, func() (err error) {
		idx, err = n.leaderReadIndex()
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
func (n *Node) leaderReadIndex() (int64, error) {
	// ReadIndex needs a leader that committed an entry of its own term (the barrier in
	// establish); a node re-elected before the monitor saw it step down must not answer from the
	// older term's readiness, whose commit index may miss writes of the leader in between.
	term := n.readyTerm.Load()
	if term == 0 || n.raft.State() != raft.Leader || n.raft.CurrentTerm() != term {
		return 0, ErrNotLeader
	}
	commit := n.raft.CommitIndex() // before verifying (hashicorp/raft#603)
	if err := n.verifyLeader(); err != nil {
		return 0, err
	}
	if n.raft.CurrentTerm() != term {
		return 0, fmt.Errorf("%w: term changed during the read index", ErrNotLeader)
	}
	return n.lastCommandUpTo(commit), nil
}

// lastCommandUpTo returns the zxid to wait for so that everything committed up to index commit
// is applied here. The FSM never sees no-op, configuration or barrier entries, so it is the
// newest command at or below commit; everything at or below the applied zxid is a known command
// boundary.
func (n *Node) lastCommandUpTo(commit uint64) int64 {
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
func (n *Node) verifyLeader() error {
	err := waitFuture(n.raft.VerifyLeader(), max(4*n.cfg.HeartbeatTimeout, time.Second), n.stop)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotLeader, err)
	}
	return nil
}

// errFutureTimeout is returned by waitFuture when the future did not resolve in time.
var errFutureTimeout = errors.New("consensus: raft did not answer in time")

// waitFuture waits for a hashicorp/raft future until it resolves, the timeout passes (zero: no
// limit) or stop closes (the node shuts down). hashicorp/raft v1.7.3 leaves some futures unanswered when it
// shuts down (apply futures still in the buffered apply channel or handed to the FSM goroutine,
// and verify futures), so no goroutine of the node may wait on one without also watching for
// shutdown. The helper goroutine that calls Error is the one goroutine this package does not
// own: it ends when raft answers, or stays parked on a dead future after Shutdown, holding
// nothing.
func waitFuture(f raft.Future, timeout time.Duration, stop <-chan struct{}) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	var tc <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		tc = t.C
	}
	select {
	case err := <-done:
		return err
	case <-tc:
		return errFutureTimeout
	case <-stop:
		select {
		case err := <-done:
			return err
		default:
			return ErrShutdown
		}
	}
}

// Touch records that the sessions' clients are alive (a ping or any request). Touches reach the
// leader in batches every TickTime/2 and are never logged.
func (n *Node) Touch(ids ...int64) { n.keeper.touch(ids) }

// ValidateSession asks the leader whether session id is alive (known and not being expired), and
// touches it. A server calls it whenever a client attaches to a session it already has (a
// reconnect, here or elsewhere): the leader then records this server as the session's owner and
// hands out the token of the new attachment (Proposal.Attach), larger than any it or an earlier
// leader gave out before, so the session's writes from connections it has left are refused.
func (n *Node) ValidateSession(ctx context.Context, id int64) (ok bool, attach uint64, err error) {
	err = n.onLeader(ctx, true, func() (err error) {
		ok, attach, err = n.keeper.leaderValidate(id, n.cfg.ID)
		return err
	}, func(addr string) error {
		var m attachMsg
		err := n.callLeader(ctx, addr, rpcAttach, &attachReq{Session: id, Server: n.cfg.ID}, &m)
		if errors.Is(err, errConnLost) {
			// Validating again only touches the session again and hands out a newer token.
			err = dialError{err}
		}
		ok, attach = m.OK, m.Attach
		return err
	})
	if err != nil {
		return false, 0, fmt.Errorf("consensus: validate session: %w", err)
	}
	return ok, attach, nil
}
