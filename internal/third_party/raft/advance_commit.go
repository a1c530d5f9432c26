// zkd change: this file is not in upstream hashicorp/raft (see ZKD.md).

package raft

import "errors"

var (
	// ErrCommitNotStored is AdvanceCommit's answer when the follower's log does not reach the
	// committed index yet.
	ErrCommitNotStored = errors.New("raft: the committed entry is not in the log yet")
	// ErrCommitMismatch is AdvanceCommit's answer when the follower's entry at the committed
	// index has another term: its log differs from the leader's there.
	ErrCommitMismatch = errors.New("raft: the log's entry at the committed index has another term")
)

// advanceCommitFuture carries one AdvanceCommit call to the follower loop.
type advanceCommitFuture struct {
	deferError
	index, term uint64
}

// AdvanceCommit tells a follower that the leader has committed the log through the entry at
// index, whose term is term: what the leader's next AppendEntries would tell it, learned sooner
// by other means (zkd's leader says so in its answer to a forwarded write and after each applied
// batch). If this node's log holds an entry at index with that term, its log is the leader's up
// to there (Raft's log matching property), so it commits and applies through index exactly as
// that AppendEntries would make it. Otherwise it changes nothing and says why:
// ErrCommitNotStored (the entry has not arrived yet) or ErrCommitMismatch. The caller must
// only pass on what a leader said it committed.
//
// Only a follower takes it: the call waits while the node is a candidate or leader, and returns
// ErrRaftShutdown when Raft shuts down or stop is closed. It does not count as contact from the
// leader.
func (r *Raft) AdvanceCommit(index, term uint64, stop <-chan struct{}) error {
	f := &advanceCommitFuture{index: index, term: term}
	f.init()
	f.ShutdownCh = r.shutdownCh
	select {
	case r.advanceCommitCh <- f:
		return f.Error()
	case <-r.shutdownCh:
		return ErrRaftShutdown
	case <-stop:
		return ErrRaftShutdown
	}
}

// advanceCommit runs AdvanceCommit on the follower loop.
func (r *Raft) advanceCommit(f *advanceCommitFuture) {
	if f.index <= r.getCommitIndex() {
		f.respond(nil)
		return
	}
	lastIndex, lastTerm := r.getLastEntry()
	term := lastTerm
	switch {
	case f.index > lastIndex:
		f.respond(ErrCommitNotStored)
		return
	case f.index < lastIndex:
		var l Log
		if err := r.logs.GetLog(f.index, &l); err != nil {
			f.respond(err)
			return
		}
		term = l.Term
	}
	if term != f.term {
		f.respond(ErrCommitMismatch)
		return
	}
	// As appendEntries does with the leader's commit index.
	r.setCommitIndex(f.index)
	if r.configurations.latestIndex <= f.index {
		r.setCommittedConfiguration(r.configurations.latest, r.configurations.latestIndex)
	}
	r.processLogs(f.index, nil)
	f.respond(nil)
}
