package consensus

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkd-io/zkd/internal/third_party/raft"

	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/znode"
)

// Proposal is a client write handed to the node by the server.
type Proposal struct {
	// Session is the originating session id.
	Session int64
	// Auth holds the caller's identities; ACL checks run at apply time against them.
	Auth []jute.Id
	// Attach is the token of the session's attachment (its connection) the write was sent on, as
	// CreateSession or ValidateSession returned it; Seq is the write's position among the writes
	// sent on that attachment, from 1, counting only those that Start accepted. Every replica
	// applies a session's ordered writes only in that order (see znode.Txn): a write whose
	// predecessor never took effect, or that comes from an attachment the session has left, is
	// refused with SessionMoved. Attach 0 means unordered.
	Attach uint64
	Seq    uint64
	// Op is the write: create, create2, createContainer, createTTL, delete, setData, setACL,
	// multi, or closeSession (with an empty Body; it closes Session).
	Op jute.Op
	// Body is the request record exactly as the client sent it (the frame after its header).
	// It is copied into the log entry before Start returns, and decoded only when the entry is
	// applied: a body that does not decode is a failed write (MarshallingError), as in ZooKeeper.
	Body []byte
	// NoTTL refuses TTL nodes (zoo.cfg extendedTypesEnabled=false): a create of one fails with
	// Unimplemented when applied.
	NoTTL bool
	// SASLACL accepts the sasl scheme in ACLs (zoo.cfg's SASLAuthenticationProvider).
	SASLACL bool
}

// Pending is one write on its way, and the only record of it from Start to its outcome. It is
// completed exactly once, by whichever part of the node learns the outcome first: this node's FSM
// applying the entry (the result), or the submission failing (an error). Wait returns it.
type Pending struct {
	c     *command
	entry []byte // the marshalled log entry; the leader stamps its time in place
	done  chan struct{}

	// Written before done is closed, read after.
	res     znode.Result
	applied *command // the entry as applied (CreateSession reads what the leader stamped)
	err     error

	// Guarded by proposals.mu.
	finished  bool
	index     uint64      // the entry's index once it is known to be committed (0 before)
	applyWait *time.Timer // committed, not yet applied here: fails the write after ApplyTimeout
	localOnly bool        // leader housekeeping: never forwarded
	started   time.Time   // when Start took it (local_write_committed_time_ms)
	fut       raft.ApplyFuture
}

// Done is closed once the write's outcome is known.
func (p *Pending) Done() <-chan struct{} { return p.done }

// Wait returns the result once this node's own FSM applied the entry (the apply hook has run for
// it), or an error. A ctx that ends first yields ErrUnknownOutcome: the write may still commit.
// A domain failure (NoNode, BadVersion, ...) is not an error here: it is in Result.Err.
func (p *Pending) Wait(ctx context.Context) (znode.Result, error) {
	select {
	case <-p.done:
		return p.res, p.err
	case <-ctx.Done():
		return znode.Result{}, fmt.Errorf("%w: %w", ErrUnknownOutcome, ctx.Err())
	}
}

// proposals is the node's table of writes on their way, from Start to their outcome: each
// write's Pending, the proposal slots (Config.MaxOutstanding), each session's latest and unsettled
// writes (the retry rule, mayRetry), and the queue of writes proposed here as leader (runWatcher).
// A write leaves the table exactly once, in finish.
type proposals struct {
	n       *Node
	seq     atomic.Uint64 // the last command seq handed out
	slots   chan struct{} // one per outstanding write
	leaderq leaderQueue

	mu struct {
		sync.Mutex
		closed  bool                // the node is shutting down: start refuses
		pending map[uint64]*Pending // by command seq
		// restoredThrough is the zxid of the newest snapshot installed here: writes committed
		// at or below it were never applied here one by one.
		restoredThrough uint64
		lastSeq         map[int64]uint64 // session → seq of its latest proposal (retry rule)
		// unsettled counts each session's proposals started here and not yet settled.
		unsettled map[int64]int
	}
}

func newProposals(n *Node, max int) *proposals {
	ps := &proposals{n: n, slots: make(chan struct{}, max), leaderq: make(leaderQueue, max)}
	ps.mu.pending = make(map[uint64]*Pending)
	ps.mu.lastSeq = make(map[int64]uint64)
	ps.mu.unsettled = make(map[int64]int)
	return ps
}

// close makes start refuse new writes; failAll then fails those still pending.
func (ps *proposals) close() {
	ps.mu.Lock()
	ps.mu.closed = true
	ps.mu.Unlock()
}

// Propose replicates a client write and returns its result after this node applied it.
// It is Start followed by Wait.
func (n *Node) Propose(ctx context.Context, p Proposal) (znode.Result, error) {
	pd, err := n.Start(ctx, p)
	if err != nil {
		return znode.Result{}, err
	}
	return pd.Wait(ctx)
}

// Start proposes a client write and returns once it has been handed to the leader (proposed
// locally, or written to the leader's connection); Pending.Wait then waits for the result.
//
// Order: the entries of calls to Start made one after another (not concurrently) for the same
// session get increasing zxids, so a session pipeline calls Start in request order and waits
// afterwards. Start blocks while Config.MaxOutstanding proposals are outstanding and retries,
// with jitter, for up to Config.HoldTimeout while no leader is known (ErrNoLeader after that);
// once something may have been proposed it resubmits only a write the leader did not take and
// that is its session's one unsettled write here (mayRetry).
func (n *Node) Start(ctx context.Context, p Proposal) (*Pending, error) {
	c, err := p.command()
	if err != nil {
		return nil, err
	}
	return n.props.start(ctx, c, false)
}

// command checks p and returns the command that carries it.
func (p *Proposal) command() (*command, error) {
	if !p.Op.IsClientWrite() {
		return nil, fmt.Errorf("%w: op %v is not a client write", ErrBadRequest, p.Op)
	}
	if len(p.Body) > maxFrame-(1<<16) {
		return nil, fmt.Errorf("%w: body of %d bytes", ErrBadRequest, len(p.Body))
	}
	if p.Op == jute.OpCloseSession && (len(p.Body) != 0 || p.Session == 0) {
		return nil, fmt.Errorf("%w: closeSession needs a session and no body", ErrBadRequest)
	}
	if p.Attach != 0 && p.Seq == 0 {
		return nil, fmt.Errorf("%w: an ordered write needs a position", ErrBadRequest)
	}
	c := &command{session: p.Session, op: p.Op, auth: p.Auth, body: p.Body, attach: p.Attach, aseq: p.Seq}
	if p.NoTTL {
		c.flags |= cmdNoTTL
	}
	if p.SASLACL {
		c.flags |= cmdSASLACL
	}
	return c, nil
}

// CreateSession creates a session with the negotiated timeout (ms). The leader picks the id
// (ZooKeeper's layout: a server byte, then a time-based counter; never 0 or negative), a random
// 16-byte password, and the token of the attachment the session starts on (Proposal.Attach).
func (n *Node) CreateSession(ctx context.Context, timeoutMs int32) (znode.Session, uint64, error) {
	if timeoutMs <= 0 {
		return znode.Session{}, 0, fmt.Errorf("%w: session timeout %d", ErrBadRequest, timeoutMs)
	}
	body := binary.BigEndian.AppendUint32(nil, uint32(timeoutMs))
	pd, err := n.props.start(ctx, &command{op: jute.OpCreateSession, body: body}, false)
	if err != nil {
		return znode.Session{}, 0, err
	}
	res, err := pd.Wait(ctx)
	if err != nil {
		return znode.Session{}, 0, err
	}
	if res.Err != nil {
		return znode.Session{}, 0, fmt.Errorf("consensus: create session: %w", res.Err)
	}
	req, err := txnRequest(jute.OpCreateSession, pd.applied.body)
	if err != nil {
		return znode.Session{}, 0, err
	}
	cs := req.(*znode.CreateSession)
	return znode.Session{ID: cs.ID, Timeout: cs.Timeout, Passwd: cs.Passwd}, cs.Attach, nil
}

// start registers c, marshals it once and submits it.
func (ps *proposals) start(ctx context.Context, c *command, localOnly bool) (*Pending, error) {
	n := ps.n
	select {
	case ps.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-n.stop:
		return nil, ErrShutdown
	}
	c.typ = cmdTxn
	c.origin = n.origin
	c.seq = ps.seq.Add(1)
	p := &Pending{c: c, entry: c.marshal(), done: make(chan struct{}), localOnly: localOnly, started: time.Now()}
	// The entry holds a copy of the body: the caller may reuse its buffer once Start returns.
	c.body = nil
	ps.mu.Lock()
	if ps.mu.closed {
		ps.mu.Unlock()
		<-ps.slots
		return nil, ErrShutdown
	}
	ps.mu.pending[c.seq] = p
	if c.session != 0 {
		ps.mu.lastSeq[c.session] = c.seq
		ps.mu.unsettled[c.session]++
	}
	ps.mu.Unlock()

	if err := ps.submit(ctx, p); err != nil {
		ps.finish(p, nil, nil, err)
		return nil, err
	}
	n.stats.proposed.Add(1)
	return p, nil
}

// finish completes p with a result (applied here) or an error, once: later calls do nothing. It
// frees p's slot and forgets it. It reports whether this call completed p.
func (ps *proposals) finish(p *Pending, res *znode.Result, applied *command, err error) bool {
	n := ps.n
	ps.mu.Lock()
	if p.finished {
		ps.mu.Unlock()
		return false
	}
	p.finished = true
	c := p.c
	delete(ps.mu.pending, c.seq)
	if c.session != 0 {
		if ps.mu.lastSeq[c.session] == c.seq {
			delete(ps.mu.lastSeq, c.session)
		}
		if ps.mu.unsettled[c.session]--; ps.mu.unsettled[c.session] <= 0 {
			delete(ps.mu.unsettled, c.session)
		}
	}
	if p.applyWait != nil {
		p.applyWait.Stop()
	}
	ps.mu.Unlock()
	if res != nil {
		p.res = *res
	}
	p.applied, p.err = applied, err
	if err != nil && errors.Is(err, ErrUnknownOutcome) {
		n.stats.unknown.Add(1)
	}
	close(p.done)
	<-ps.slots
	return true
}

// deliver is called by the FSM with the result of an entry this node proposed.
func (ps *proposals) deliver(seq uint64, c *command, r *znode.Result) {
	n := ps.n
	ps.mu.Lock()
	p := ps.mu.pending[seq]
	ps.mu.Unlock()
	if p != nil && ps.finish(p, r, c, nil) {
		n.metrics.localCommit.ObserveDuration(time.Since(p.started))
	}
}

// committed records that p's entry committed at index: from now on only this node's apply (or a
// snapshot that skips it) decides its outcome. An entry not applied here within ApplyTimeout, or
// skipped by a snapshot install, fails with ErrUnknownOutcome: it took effect, but this node
// cannot tell the result.
func (ps *proposals) committed(p *Pending, index uint64) {
	n := ps.n
	ps.mu.Lock()
	if p.finished {
		ps.mu.Unlock()
		return
	}
	p.index = index
	skipped := index <= ps.mu.restoredThrough
	if !skipped {
		p.applyWait = time.AfterFunc(n.cfg.ApplyTimeout, func() {
			ps.finish(p, nil, nil, fmt.Errorf("%w: committed but not applied here within %v", ErrUnknownOutcome, n.cfg.ApplyTimeout))
		})
	}
	ps.mu.Unlock()
	if skipped {
		ps.finish(p, nil, nil, fmt.Errorf("%w: committed; a snapshot install skipped its result here", ErrUnknownOutcome))
	}
}

// restoredTree is called by the FSM after a snapshot replaced the tree up to zxid: writes that
// committed at or below it were never applied here one by one, so their results are lost.
func (ps *proposals) restoredTree(zxid int64) {
	ps.mu.Lock()
	ps.mu.restoredThrough = max(ps.mu.restoredThrough, uint64(zxid))
	var skipped []*Pending
	for _, p := range ps.mu.pending {
		if p.index != 0 && p.index <= uint64(zxid) {
			skipped = append(skipped, p)
		}
	}
	ps.mu.Unlock()
	for _, p := range skipped {
		ps.finish(p, nil, nil, fmt.Errorf("%w: committed; a snapshot install skipped its result here", ErrUnknownOutcome))
	}
}

// failAll completes every write still pending with err (shutdown).
func (ps *proposals) failAll(err error) {
	ps.mu.Lock()
	all := make([]*Pending, 0, len(ps.mu.pending))
	for _, p := range ps.mu.pending {
		all = append(all, p)
	}
	ps.mu.Unlock()
	for _, p := range all {
		ps.finish(p, nil, nil, err)
	}
}

// submit hands p to the leader: proposes it here when this node leads, else forwards it. It
// retries, with jitter, while nothing was proposed and HoldTimeout allows.
func (ps *proposals) submit(ctx context.Context, p *Pending) error {
	n := ps.n
	return n.onLeader(ctx, true, func() error {
		fut, err := ps.leaderApply(p.entry)
		if err != nil {
			return err
		}
		ps.mu.Lock()
		p.fut = fut
		ps.mu.Unlock()
		ps.leaderq.push(p)
		return nil
	}, func(addr string) error {
		if p.localOnly {
			return ErrNotLeader
		}
		cl, err := n.rpcClientFor(addr)
		if err != nil {
			return err
		}
		if err := cl.send(ctx, rpcSubmit, p.entry, func(r rpcReply) { ps.submitted(p, r) }); err != nil {
			return err
		}
		n.stats.forwarded.Add(1)
		return nil
	})
}

// submitted handles the leader's reply to a forwarded write. It runs on the RPC client's reader
// and must not block.
func (ps *proposals) submitted(p *Pending, r rpcReply) {
	n := ps.n
	switch {
	case r.err != nil:
		ps.finish(p, nil, nil, fmt.Errorf("%w: %w", ErrUnknownOutcome, r.err))
	case r.status == statusOK:
		var cm commitMsg
		if err := decodeMsg(r.payload, &cm); err != nil || cm.Index == 0 {
			ps.finish(p, nil, nil, fmt.Errorf("%w: bad submit reply: %v", ErrUnknownOutcome, err))
			return
		}
		n.relay.offer(cm.Index, cm.Term)
		n.metrics.learnerComms.Inc()
		ps.committed(p, cm.Index)
	case r.status == statusMoved:
		ps.finish(p, nil, nil, ErrSessionMoved)
	case r.status == statusDiskFull:
		ps.finish(p, nil, nil, ErrDiskFull)
	case r.status == statusNotProposed:
		ps.notProposed(p, errors.New(string(r.payload)))
	default:
		ps.finish(p, nil, nil, fmt.Errorf("%w: %s", ErrUnknownOutcome, r.payload))
	}
}

// leaderOutcome handles the raft future of a write proposed here as leader, once it resolved.
func (ps *proposals) leaderOutcome(p *Pending, fut raft.ApplyFuture, err error) {
	switch {
	case err == nil:
		ps.committed(p, fut.Index())
	case errors.Is(err, ErrShutdown):
		ps.finish(p, nil, nil, fmt.Errorf("%w: %w", ErrUnknownOutcome, err))
	case notProposed(err):
		ps.notProposed(p, err)
	default:
		ps.finish(p, nil, nil, fmt.Errorf("%w: %w", ErrUnknownOutcome, err))
	}
}

// notProposed handles a write the leader refused without proposing it: it is submitted again if
// mayRetry allows, else it fails.
func (ps *proposals) notProposed(p *Pending, why error) {
	n := ps.n
	if !ps.mayRetry(p.c) {
		ps.finish(p, nil, nil, fmt.Errorf("%w: %w", ErrNoLeader, why))
		return
	}
	// A raft future may still hold the entry's bytes; the retry gets its own copy.
	p.entry = append([]byte(nil), p.entry...)
	ps.mu.Lock()
	p.fut = nil
	ps.mu.Unlock()
	if !n.goTracked(func() {
		if err := ps.submit(n.ctx, p); err != nil {
			ps.finish(p, nil, nil, err)
			return
		}
		n.stats.retried.Add(1)
	}) {
		ps.finish(p, nil, nil, fmt.Errorf("%w: %w", ErrUnknownOutcome, ErrShutdown))
	}
}

// mayRetry reports whether a proposal that was not proposed may be submitted again: only if it is
// its session's one unsettled proposal here (no later one was started, and every earlier one has
// its outcome). A write that follows one whose outcome is unknown is never resubmitted alone: it
// fails, and the server closes the client's connection, so the client learns what happened.
// (Every replica also refuses a session's write out of order, so even a wrong retry could not
// make a write take effect before its predecessor; see znode.Txn.Attach.)
func (ps *proposals) mayRetry(c *command) bool {
	if c.session == 0 {
		return true
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.mu.lastSeq[c.session] == c.seq && ps.mu.unsettled[c.session] == 1
}

// notProposed reports whether a raft apply error means the entry was never proposed.
func notProposed(err error) bool {
	return errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrEnqueueTimeout) ||
		errors.Is(err, raft.ErrLeadershipTransferInProgress) || errors.Is(err, ErrNotLeader)
}

// classifyApply maps a raft apply error to an RPC status.
func classifyApply(err error) (byte, []byte) {
	switch {
	case err == nil:
		return statusOK, nil
	case notProposed(err):
		return statusNotProposed, []byte(err.Error())
	default:
		return statusUnknown, []byte(err.Error())
	}
}

// leaderApply stamps a marshalled entry (time; for createSession the id, password and attachment)
// and proposes it. It fails with ErrNotLeader, having proposed nothing, on a node that is not the
// leader, and with ErrSessionMoved when the session is attached through another server.
func (ps *proposals) leaderApply(entry []byte) (raft.ApplyFuture, error) {
	n := ps.n
	if n.raft.State() != raft.Leader {
		return nil, ErrNotLeader
	}
	h, err := peekCommand(entry)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	return ps.leaderApplyPeeked(entry, h)
}

// leaderApplyPeeked is leaderApply for an entry whose header the caller has read already.
func (ps *proposals) leaderApplyPeeked(entry []byte, h entryHeader) (raft.ApplyFuture, error) {
	n := ps.n
	if n.raft.State() != raft.Leader {
		return nil, ErrNotLeader
	}
	var err error
	if h.op != jute.OpCloseSession && h.op.IsClientWrite() && n.disk.full.Load() {
		return nil, ErrDiskFull
	}
	server := originServer(h.origin)
	if h.op != jute.OpCreateSession && h.session != 0 && !n.sessions.owns(h.session, server) {
		return nil, ErrSessionMoved
	}
	if h.op == jute.OpCreateSession {
		if entry, err = n.keeper.stampSession(entry, server); err != nil {
			return nil, err
		}
	}
	stampTime(entry, time.Now().UnixMilli())
	enqueue := min(n.cfg.HoldTimeout, time.Second)
	return n.raft.ApplyLog(raft.Log{Data: entry}, enqueue), nil
}

// originServer returns the server id part of a command's origin tag ("<server id>/<incarnation>").
func originServer(origin string) string {
	if i := strings.LastIndexByte(origin, '/'); i >= 0 {
		return origin[:i]
	}
	return origin
}
