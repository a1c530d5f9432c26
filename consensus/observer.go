package consensus

import "github.com/zkd-io/zkd/znode"

// nodeObserver is a Node's fsmObserver: it hands the FSM's news to the proposers, the forwarded
// writes, the commit announcer, the snapshot trigger and the server's hooks (Config.OnApply,
// Config.OnRestore).
type nodeObserver struct{ n *Node }

func (o nodeObserver) applied(zxid int64, r *znode.Result, v *znode.View) {
	if o.n.cfg.OnApply != nil {
		o.n.cfg.OnApply(zxid, r, v)
	}
}

func (o nodeObserver) delivered(seq uint64, c *command, r *znode.Result) {
	o.n.props.deliver(seq, c, r)
}

func (o nodeObserver) forwardApplied(origin string, seq, index, term uint64) {
	o.n.fwd.forwardApplied(origin, seq, index, term)
}

// batchApplied sends the batch's answers to forwarded writes and, on a leader, offers the batch's
// commit to the announcer, except to the follower whose answer already carries it.
func (o nodeObserver) batchApplied(index, term uint64) {
	n := o.n
	n.fwd.flushForwards()
	if !n.raftLeads() {
		return // only a leader announces (announcement.run checks again): no wake-up for nothing
	}
	told := ""
	if n.fwd.last.index == index {
		told = n.fwd.last.server // its answer carries this very commit
	}
	n.announce.offerExcept(index, term, told)
}

func (o nodeObserver) restored(zxid int64, v *znode.View) {
	o.n.props.restoredTree(zxid)
	if o.n.cfg.OnRestore != nil {
		o.n.cfg.OnRestore(v)
	}
}

// snapshotDue wakes the snapshot loop, unless a wake-up is already pending.
func (o nodeObserver) snapshotDue() {
	select {
	case o.n.snap <- struct{}{}:
	default:
	}
}

func (o nodeObserver) snapshotStarting(bytes, entries uint64, dataSize int64) {
	o.n.trailFor(bytes, entries, dataSize)
}
