package consensus

import (
	"time"
)

// settleFastWait is how long the settler waits for the FSM to apply the proposal at the head of
// its queue before it hands the queue to per-proposal goroutines, which also watch the raft
// future: a proposal that is not applied by then may have failed (leadership lost, enqueue
// timeout) and only its future says so.
const settleFastWait = 100 * time.Millisecond

// settling is a proposal submitted on this node as leader, waiting to be settled.
type settling struct {
	c         *command
	pr        *proposal
	at        attempt
	pd        *Pending
	localOnly bool
	restored  *chan struct{}
}

// queueSettling hands a leader proposal to the settler. It reports false once the node is closing;
// the caller then settles the proposal itself. The queue holds at most MaxOutstanding proposals
// (each holds a slot), so the send never blocks.
func (n *Node) queueSettling(s *settling) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.closing {
		return false
	}
	n.settleq <- s
	return true
}

// runSettler settles the proposals this node submitted as leader. The FSM applies them in log
// order and delivers each result before raft answers its future, so in the common case a single
// goroutine settles every proposal as soon as it is applied, instead of one goroutine per write
// blocked on its future (and another to make that wait stoppable). A proposal still unapplied
// after settleFastWait goes, with every unapplied one queued behind it, to complete, which reads
// the future and handles failure, retry and shutdown. It stops with the node.
func (n *Node) runSettler() {
	t := time.NewTimer(settleFastWait)
	t.Stop()
	for {
		var s *settling
		select {
		case s = <-n.settleq:
		case <-n.stop:
			n.drainSettling()
			return
		}
		select {
		case <-s.pr.delivered:
			n.settleApplied(s)
			continue
		default:
		}
		t.Reset(settleFastWait)
		select {
		case <-s.pr.delivered:
			t.Stop()
			n.settleApplied(s)
		case <-t.C:
			n.settleSlowly(s)
			n.drainSettling()
		case <-n.stop:
			t.Stop()
			n.settleSlowly(s)
			n.drainSettling()
			return
		}
	}
}

// drainSettling settles every queued proposal now: applied ones at once, the others through
// complete.
func (n *Node) drainSettling() {
	for {
		select {
		case s := <-n.settleq:
			select {
			case <-s.pr.delivered:
				n.settleApplied(s)
			default:
				n.settleSlowly(s)
			}
		default:
			return
		}
	}
}

// settleApplied finishes a proposal the FSM applied: its result is the one delivered.
func (n *Node) settleApplied(s *settling) {
	s.pd.res, s.pd.cmd = *s.pr.res, s.pr.cmd
	n.settle(s.c)
	close(s.pd.done)
}

// settleSlowly hands a proposal to its own goroutine, complete, which waits on the raft future
// or the forwarded call's reply; once the node is closing it fails the proposal at once.
func (n *Node) settleSlowly(s *settling) {
	if !n.goTracked(func() { n.complete(s.c, s.pr, s.at, s.pd, s.localOnly, s.restored) }) {
		n.settle(s.c)
		s.pd.err = ErrUnknownOutcome
		close(s.pd.done)
	}
}
