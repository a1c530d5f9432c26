package consensus

import (
	"errors"
	"sync"
	"time"

	"github.com/zkd-io/zkd/internal/third_party/raft"
)

// A follower learns the commit index only from the leader's AppendEntries: the next one carrying
// a later entry, or the idle one sent every CommitTimeout. A write forwarded by a follower is
// answered there only once the follower applied it, so without help a lone client on a follower
// waits that interval on every write.
//
// So the leader tells its followers what it commits, as ZooKeeper's leader sends COMMIT: its reply
// to a forwarded write carries the entry's index and the leader's term, and after applying
// entries with nothing newer appended (so no AppendEntries is about to carry the commit index) it
// sends the same pair to every other server over the cluster RPC (announce), except a server
// whose forwarded write was the last entry applied: its answer carried the same pair. A follower
// hands that fact to its own Raft (raft.Raft.AdvanceCommit, in the raft fork, which owns the
// rule and its safety argument): if its log holds entry C with term T, its log matches the
// leader's up to C (the log matching property), and C is committed (the leader said so), so
// Raft commits and applies through C exactly as the leader's next AppendEntries would make it;
// otherwise Raft changes nothing. No fsync and no round trip to the leader stand between the
// reply and the local apply.
//
// When the reply arrives before the entry itself (this follower was not in the commit's quorum),
// the relay waits until the local log store holds the entry: earlier, Raft would refuse it.

// commitNote holds the newest commit (index, term) reported to one consuming goroutine, and wakes
// it.
type commitNote struct {
	wake        chan struct{}
	mu          sync.Mutex
	index, term uint64 // index 0: nothing pending
}

func newCommitNote() commitNote { return commitNote{wake: make(chan struct{}, 1)} }

func (c *commitNote) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// offer records (index, term) unless a newer commit is already noted, and wakes the consumer.
func (c *commitNote) offer(index, term uint64) {
	c.mu.Lock()
	if index > c.index {
		c.index, c.term = index, term
	}
	c.mu.Unlock()
	c.signal()
}

// announcement is the leader's latest applied batch to announce, and the server, if any, whose
// forwarded write was that batch's last entry: the answer to the forward carried the same
// commit, so announcing it to that server too would only cost it a read and its Raft a message.
type announcement struct {
	n *Node
	commitNote
	told string // guarded by mu
}

// offerExcept records (index, term), noting that server told already knows it ("" for none),
// unless a newer commit is already noted, and wakes the announcer.
func (a *announcement) offerExcept(index, term uint64, told string) {
	a.mu.Lock()
	if index > a.index {
		a.index, a.term, a.told = index, term, told
	}
	a.mu.Unlock()
	a.signal()
}

func (a *announcement) loadExcept() (index, term uint64, told string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.index, a.term, a.told
}

// relay notes the highest commit reported by the leader and not yet relayed or applied, and how
// far the local log reaches.
type relay struct {
	n *Node
	commitNote
	stored uint64 // the last index the local log store holds; guarded by mu
}

func newRelay(n *Node) *relay { return &relay{n: n, commitNote: newCommitNote()} }

// storedThrough records that the local log now ends at index.
func (r *relay) storedThrough(index uint64) {
	r.mu.Lock()
	r.stored = index
	ready := r.index != 0 && r.index <= index
	r.mu.Unlock()
	if ready {
		r.signal()
	}
}

// next returns the commit to relay now, or index 0 if there is none or its entry is not stored
// yet (then it stays pending). applied is the local Raft's last applied index.
func (r *relay) next(applied uint64) (index, term uint64, waited bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.index <= applied {
		r.index, r.term = 0, 0
		return 0, 0, false
	}
	if r.stored < r.index {
		return 0, 0, true
	}
	index, term = r.index, r.term
	r.index, r.term = 0, 0
	return index, term, false
}

// run passes the forwarded commits on to the local Raft until the node stops; it is the
// relay's only goroutine, so at most one relayed message is in flight.
func (r *relay) run() {
	n := r.n
	for {
		select {
		case <-r.wake:
		case <-n.stop:
			return
		}
		index, term, waiting := r.next(n.raft.AppliedIndex())
		if waiting {
			n.stats.relayWaited.Add(1)
		}
		if index == 0 {
			continue
		}
		switch err := n.raft.AdvanceCommit(index, term, n.stop); {
		case err == nil:
			n.stats.relayed.Add(1)
		case errors.Is(err, raft.ErrRaftShutdown):
			return
		default:
			n.stats.relayRefused.Add(1)
		}
	}
}

// relayedLogs is the node's Raft log store; it tells the relay how far the log reaches.
type relayedLogs struct {
	raft.LogStore
	r *relay
}

func (l relayedLogs) StoreLog(log *raft.Log) error {
	return l.StoreLogs([]*raft.Log{log})
}

func (l relayedLogs) StoreLogs(logs []*raft.Log) error {
	if err := l.LogStore.StoreLogs(logs); err != nil {
		return err
	}
	if len(logs) > 0 {
		l.r.storedThrough(logs[len(logs)-1].Index)
	}
	return nil
}

// StageLogs and UnstageLogs pass a leader's staging of its new entries (raft.StagingLogStore,
// in the raft fork) to the log cache beneath, so replication starts while the leader's own
// append is being written and fsynced.
func (l relayedLogs) StageLogs(logs []*raft.Log) bool { return stageLogs(l.LogStore, logs) }
func (l relayedLogs) UnstageLogs(logs []*raft.Log)    { unstageLogs(l.LogStore, logs) }

// stageLogs and unstageLogs pass staging on to inner when it stages (see relayedLogs).
func stageLogs(inner raft.LogStore, logs []*raft.Log) bool {
	s, ok := inner.(raft.StagingLogStore)
	return ok && s.StageLogs(logs)
}

func unstageLogs(inner raft.LogStore, logs []*raft.Log) {
	if s, ok := inner.(raft.StagingLogStore); ok {
		s.UnstageLogs(logs)
	}
}

func (l relayedLogs) DeleteRange(min, max uint64) error {
	err := l.LogStore.DeleteRange(min, max)
	if last, lerr := l.LogStore.LastIndex(); lerr == nil {
		l.r.storedThrough(last)
	}
	return err
}

// IsMonotonic passes on the store's answer: raft treats a monotonic store differently after a
// snapshot restore.
func (l relayedLogs) IsMonotonic() bool {
	m, ok := l.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// startedRaft returns this node's Raft, or nil before it exists. Unlike n.raft, it is safe on
// the goroutines Raft itself runs (the FSM's, the log store's), which start before open assigns
// n.raft: it reads Raft through the transport's atomic pointer.
func (n *Node) startedRaft() *raft.Raft {
	if n.rtrans == nil {
		return nil // before open, or bootstrapping
	}
	return n.rtrans.raft.Load()
}

// raftLeads reports whether this node's Raft is in the leader state now; safe where startedRaft
// is.
func (n *Node) raftLeads() bool {
	r := n.startedRaft()
	return r != nil && r.State() == raft.Leader
}

// run sends the leader's commits to the other servers until the node stops; it is the
// announcement's only goroutine besides one sender per peer while that peer has something to be
// sent, so a peer that is slow to dial delays only its own announcements.
func (a *announcement) run() {
	n := a.n
	var (
		sent    uint64
		peers   []raft.Server
		peersAt time.Time
		states  = map[string]*peerAnnouncement{}
	)
	for {
		select {
		case <-a.wake:
		case <-n.stop:
			return
		}
		index, term, told := a.loadExcept()
		if index <= sent || n.raft.State() != raft.Leader || n.raft.LastIndex() > index {
			continue // announced, not ours to do, or a later entry's AppendEntries will carry it
		}
		if peers == nil || time.Since(peersAt) > time.Second {
			peers, peersAt = a.peers(), time.Now()
		}
		sent = index
		n.stats.announced.Add(1)
		for _, s := range peers {
			if string(s.ID) == told {
				continue
			}
			addr := string(s.Address)
			p := states[addr]
			if p == nil {
				p = &peerAnnouncement{addr: addr}
				states[addr] = p
			}
			if p.offer(index, term) && !n.goTracked(func() { a.announceTo(p) }) {
				return
			}
		}
	}
}

// peerAnnouncement is what one peer is still to be told.
type peerAnnouncement struct {
	addr        string
	mu          sync.Mutex
	sending     bool   // a sender goroutine runs for this peer
	index, term uint64 // the latest commit to announce
	sent        uint64 // the latest commit announced
}

// offer records a newer commit and reports whether a sender must be started for it.
func (p *peerAnnouncement) offer(index, term uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.index, p.term = index, term
	start := !p.sending
	p.sending = true
	return start
}

// announceTo sends p its latest commit until nothing newer is left, so a commit offered while
// an earlier one was being sent is not lost.
func (a *announcement) announceTo(p *peerAnnouncement) {
	n := a.n
	for {
		p.mu.Lock()
		if p.index <= p.sent {
			p.sending = false
			p.mu.Unlock()
			return
		}
		index, term := p.index, p.term
		p.sent = index
		p.mu.Unlock()
		if cl, err := n.rpcClientFor(p.addr); err == nil {
			// One-way: a reply would cost each follower a write and the leader a read per commit.
			_ = cl.send(n.ctx, rpcCommitted, encodeMsg(&commitMsg{Index: index, Term: term}), nil)
		}
	}
}

// peers returns the other servers in the latest configuration.
func (a *announcement) peers() []raft.Server {
	n := a.n
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	var peers []raft.Server
	for _, s := range f.Configuration().Servers {
		if s.ID != raft.ServerID(n.cfg.ID) {
			peers = append(peers, s)
		}
	}
	return peers
}
