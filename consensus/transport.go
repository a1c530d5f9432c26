package consensus

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// hashicorp/raft backs off exponentially after failed AppendEntries to a follower: up to 10s
// between attempts once a few dozen have failed (replication.go, failureWait 10ms, scale 12),
// and the backoff sleep cannot be interrupted. So a member that was down for a minute, or cut
// off, waited up to 10s after it came back before the leader tried it again, and served clients
// only after that. ZooKeeper's leader reconnects within a tick or two.
//
// retryTransport removes the cause, not the backoff: an AppendEntries whose connection could not
// even be dialled (nothing was sent) is not reported as a failure while there is a point in
// waiting. It dials again every peerRedial for as long as this node is still the leader of the
// request's term and the peer is still a member. The replication and heartbeat goroutines for
// that peer block in the call meanwhile, which is all they would do anyway, and the call
// completes as soon as the peer accepts a connection again. Errors after something was sent
// (a reset or a timed-out reply) are reported as before: raft then redials at once.
type retryTransport struct {
	*raft.NetworkTransport
	raft atomic.Pointer[raft.Raft]
	stop <-chan struct{}
}

// peerRedial is how often an unreachable peer is dialled again; peerDialTimeout bounds each dial,
// so a peer behind a partition that heals is reached within about a second.
const (
	peerRedial      = 100 * time.Millisecond
	peerDialTimeout = time.Second
)

// peerDialError marks a dial that failed before anything was sent.
type peerDialError struct{ error }

func (e peerDialError) Unwrap() error { return e.error }

func (t *retryTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	for {
		err := t.NetworkTransport.AppendEntries(id, target, args, resp)
		var de peerDialError
		if err == nil || !errors.As(err, &de) || !t.worthWaiting(id, args.Term) {
			return err
		}
		timer := time.NewTimer(peerRedial)
		select {
		case <-timer.C:
		case <-t.stop:
			timer.Stop()
			return err
		}
	}
}

// worthWaiting reports whether an AppendEntries of term to peer id should wait for the peer
// rather than fail: this node still leads in that term and id is still a member.
func (t *retryTransport) worthWaiting(id raft.ServerID, term uint64) bool {
	r := t.raft.Load()
	if r == nil || r.State() != raft.Leader || r.CurrentTerm() != term {
		return false
	}
	f := r.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if s.ID == id {
			return true
		}
	}
	return false
}
