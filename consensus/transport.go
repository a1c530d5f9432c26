package consensus

import (
	"cmp"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkd-io/zkd/internal/peernet"
	"github.com/zkd-io/zkd/internal/third_party/raft"
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
//
// It also keeps the log readable: raft logged an error for every failed attempt (325 lines a
// minute for one dead follower). A peer that cannot be reached is logged once when that starts,
// then summarised every peernet.LogEvery, and once more when it is reached again.
type retryTransport struct {
	*raft.NetworkTransport
	raft     atomic.Pointer[raft.Raft]
	stop     <-chan struct{}
	log      *slog.Logger
	logEvery time.Duration // zero means peernet.LogEvery
	metrics  *metrics      // the leader's view of its followers (metrics.go); nil in some tests
	mu       sync.Mutex
	down     map[raft.ServerID]*peerDown
}

// peerDown is an unreachable peer: since when, how many dials failed, when it was last logged.
type peerDown struct {
	since, logged time.Time
	dials         int
	err           error
}

// unreachable records a failed dial of id and logs as described on retryTransport.
func (t *retryTransport) unreachable(id raft.ServerID, target raft.ServerAddress, err error) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.down == nil {
		t.down = make(map[raft.ServerID]*peerDown)
	}
	d := t.down[id]
	if d == nil {
		d = &peerDown{since: now, logged: now}
		t.down[id] = d
		t.log.Warn("cannot reach peer; retrying every 100ms until it is back", "peer", id, "addr", target, "err", err)
	}
	d.dials++
	d.err = err
	if every := cmp.Or(t.logEvery, peernet.LogEvery); now.Sub(d.logged) >= every {
		d.logged = now
		t.log.Warn("peer still unreachable", "peer", id, "addr", target, "for", now.Sub(d.since).Round(time.Second),
			"failedDials", d.dials, "err", err)
	}
}

// reached records that id answered; if it had been unreachable, that is logged.
func (t *retryTransport) reached(id raft.ServerID, target raft.ServerAddress) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if d := t.down[id]; d != nil {
		delete(t.down, id)
		t.log.Info("peer reachable again", "peer", id, "addr", target, "after", time.Since(d.since).Round(time.Millisecond),
			"failedDials", d.dials)
	}
}

// peerRedial is how often an unreachable peer is dialled again; peernet.DialTimeout bounds each
// dial, so a peer behind a partition that heals is reached within about a second.
const peerRedial = 100 * time.Millisecond

func (t *retryTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	for {
		err := t.NetworkTransport.AppendEntries(id, target, args, resp)
		var de peernet.DialError
		if err == nil {
			t.reached(id, target)
			if t.metrics != nil {
				t.metrics.followers.appended(id, args, resp)
			}
			return nil
		}
		if !errors.As(err, &de) {
			return err
		}
		t.unreachable(id, target, err)
		if !t.worthWaiting(id, args.Term) {
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
