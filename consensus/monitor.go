package consensus

import (
	"context"
	"errors"
	"fmt"
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
			epoch := n.lead.leaderEpoch.Add(1)
			n.lead.readyTerm.Store(0)
			if leader {
				n.goTracked(func() { n.lead.establish(epoch) })
			}
			n.lead.updateServing()
		case <-servingTick.C:
			n.lead.updateServing()
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

// Serving reports the serving signal: true on an established leader, and on a follower that
// hears from its leader and has caught up (a read-index completed) since it last stopped serving.
// A server refuses client connections while it is false.
func (n *Node) Serving() bool { return n.lead.serving.Load() }

// Sync implements ZooKeeper's sync: it asks the leader for its commit point (a read index: note
// the commit index, confirm leadership with a heartbeat round) and waits until this node applied
// it. Afterwards this node's view holds every write that completed before Sync was called.
func (n *Node) Sync(ctx context.Context) error { return n.lead.sync(ctx, true) }

// errFutureTimeout is returned by waitFuture when the future did not resolve in time.
var errFutureTimeout = errors.New("consensus: raft did not answer in time")

// waitFuture waits for a hashicorp/raft future until it resolves, the timeout passes (zero: no
// limit) or stop closes (the node shuts down). hashicorp/raft v1.7.3 leaves some apply futures
// unanswered when it shuts down (those still in the buffered apply channel or handed to the FSM
// goroutine; the fork answers queued verify futures), so no goroutine of the node may wait on one
// without also watching for shutdown. The helper goroutine that calls Error is the one goroutine this package does not
// own: it ends when raft answers, or stays parked on a dead future after Shutdown, holding nothing.
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
