package consensus

import "sync/atomic"

// Followers learn the commit index only from the leader's next AppendEntries: the one carrying a
// later entry, or the idle one sent every CommitTimeout (2-4ms). A write forwarded by a follower is
// answered there only once the follower applied it, so without help a lone client on a follower
// waits that whole interval on every write (5ms per write on 3 nodes against 0.9ms through the
// leader). The leader therefore nudges: once a forwarded entry is applied here and nothing newer
// has been appended since, it appends a Raft barrier, whose AppendEntries carries the commit
// index at once. Under load later entries do this anyway and the nudge is skipped; nudges never
// overlap, so there is at most one barrier per commit round.
type nudger struct {
	wake chan struct{}
	last atomic.Uint64 // the log's last index when the latest forwarded entry was applied
}

func newNudger() *nudger { return &nudger{wake: make(chan struct{}, 1)} }

// forwardedApplied records that a forwarded entry committed and was applied while the log ended
// at lastIndex.
func (g *nudger) forwardedApplied(lastIndex uint64) {
	// Keep the largest: replies finish concurrently, and a smaller value stored last would let
	// the nudger skip the newer entry's nudge as if something after it were already appended.
	for {
		old := g.last.Load()
		if lastIndex <= old || g.last.CompareAndSwap(old, lastIndex) {
			break
		}
	}
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// runNudger appends barriers until the node stops; it is the nudger's only goroutine.
func (n *Node) runNudger() {
	for {
		select {
		case <-n.nudge.wake:
		case <-n.stop:
			return
		}
		if !n.IsLeader() || n.raft.LastIndex() > n.nudge.last.Load() {
			continue // not ours to do, or a later entry will carry the commit index
		}
		n.stats.nudged.Add(1)
		// The barrier's own commit needs no nudge: nobody waits for it.
		if err := n.waitFuture(n.raft.Barrier(n.cfg.ApplyTimeout), 0); err != nil {
			n.log.Debug("commit nudge failed", "err", err)
		}
	}
}
