package consensus

import (
	"time"
)

// settleFastWait is how long the watcher waits for the FSM to apply the write at the head of its
// queue before it reads raft futures instead: a write that is not applied by then may have failed
// (leadership lost, enqueue timeout) and only its future says so.
const settleFastWait = 100 * time.Millisecond

// leaderQueue holds the writes this node proposed as leader, in proposal order, for runWatcher.
// Each holds a proposal slot, so with room for MaxOutstanding a push never blocks.
type leaderQueue chan *Pending

func (q leaderQueue) push(p *Pending) { q <- p }

// runWatcher learns the failures of writes proposed here as leader. The FSM applies them in log
// order and completes each (Node.deliver) before raft answers its future, so in the common case
// the watcher only sees completed writes go by, instead of a goroutine per write blocked on its
// future. A write still unapplied after settleFastWait gets, with every unapplied one queued
// behind it, a goroutine that reads its future (watchFuture). It stops with the node; Shutdown
// fails whatever is left.
func (ps *proposals) runWatcher() {
	n := ps.n
	t := time.NewTimer(settleFastWait)
	t.Stop()
	for {
		var p *Pending
		select {
		case p = <-ps.leaderq:
		case <-n.stop:
			return
		}
		select {
		case <-p.done:
			continue
		default:
		}
		t.Reset(settleFastWait)
		select {
		case <-p.done:
			t.Stop()
			continue
		case <-t.C:
		case <-n.stop:
			t.Stop()
			return
		}
		ps.watchFuture(p)
		for more := true; more; {
			select {
			case q := <-ps.leaderq:
				ps.watchFuture(q)
			default:
				more = false
			}
		}
	}
}

// watchFuture reads the raft future of a write proposed here as leader on a goroutine of its own
// and acts on its outcome, unless the write completes first.
func (ps *proposals) watchFuture(p *Pending) {
	n := ps.n
	ps.mu.Lock()
	fut, finished := p.fut, p.finished
	ps.mu.Unlock()
	if finished || fut == nil {
		return
	}
	n.goTracked(func() {
		err := waitFuture(fut, 0, n.stop)
		select {
		case <-p.done:
			return
		default:
		}
		ps.leaderOutcome(p, fut, err)
	})
}
