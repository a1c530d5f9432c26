package consensus

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/hashicorp/raft"

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
	// Body is the jute-encoded request record.
	Body []byte
}

// Pending is a proposal on its way. Wait returns its result.
type Pending struct {
	done chan struct{}
	res  znode.Result
	cmd  *command // the applied entry (CreateSession reads the leader's id and password from it)
	err  error
	// delivered is closed by this node's FSM when it applied the entry (nil if never submitted);
	// from then on the outcome is *pr.res, whatever the settling goroutine still waits for.
	delivered <-chan struct{}
	pr        *proposal
}

// Done is closed when the settling of the proposal is finished. Wait may return earlier: as
// soon as this node applied the entry.
func (p *Pending) Done() <-chan struct{} { return p.done }

// Wait returns the result once this node's own FSM applied the entry (the apply hook has run for
// it), or an error. A ctx that ends first yields ErrUnknownOutcome: the write may still commit.
// A domain failure (NoNode, BadVersion, ...) is not an error here: it is in Result.Err.
func (p *Pending) Wait(ctx context.Context) (znode.Result, error) {
	res, _, err := p.wait(ctx)
	return res, err
}

// wait is Wait that also returns the applied command. The local apply is the fast path: it
// answers without waiting for the raft future and the settling goroutine (two goroutine hand-offs
// fewer per write); an entry applied here has exactly the result delivered with it.
func (p *Pending) wait(ctx context.Context) (znode.Result, *command, error) {
	select {
	case <-p.delivered:
		return *p.pr.res, p.pr.cmd, nil
	case <-p.done:
		return p.res, p.cmd, p.err
	case <-ctx.Done():
		return znode.Result{}, nil, fmt.Errorf("%w: %w", ErrUnknownOutcome, ctx.Err())
	}
}

// proposal is the node-side record of a Pending: the FSM delivers the result here.
type proposal struct {
	delivered chan struct{}
	res       *znode.Result
	cmd       *command
}

// attempt is one submission: a local raft future on the leader, or a forwarded call's reply.
type attempt struct {
	fut   raft.ApplyFuture
	reply <-chan rpcReply
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
// it never retries once something may have been proposed.
func (n *Node) Start(ctx context.Context, p Proposal) (*Pending, error) {
	if !clientWriteOp(p.Op) {
		return nil, fmt.Errorf("%w: op %v is not a client write", ErrBadRequest, p.Op)
	}
	if len(p.Body) > maxFrame-(1<<16) {
		return nil, fmt.Errorf("%w: body of %d bytes", ErrBadRequest, len(p.Body))
	}
	if p.Op == jute.OpCloseSession {
		if len(p.Body) != 0 || p.Session == 0 {
			return nil, fmt.Errorf("%w: closeSession needs a session and no body", ErrBadRequest)
		}
	} else if err := checkTxn(p.Op, p.Body); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	if p.Attach != 0 && p.Seq == 0 {
		return nil, fmt.Errorf("%w: an ordered write needs a position", ErrBadRequest)
	}
	return n.start(ctx, &command{session: p.Session, op: p.Op, auth: p.Auth, body: p.Body, attach: p.Attach, aseq: p.Seq}, false)
}

// CreateSession creates a session with the negotiated timeout (ms). The leader picks the id
// (ZooKeeper's layout: a server byte, then a time-based counter; never 0 or negative), a random
// 16-byte password, and the token of the attachment the session starts on (Proposal.Attach).
func (n *Node) CreateSession(ctx context.Context, timeoutMs int32) (znode.Session, uint64, error) {
	if timeoutMs <= 0 {
		return znode.Session{}, 0, fmt.Errorf("%w: session timeout %d", ErrBadRequest, timeoutMs)
	}
	body := binary.BigEndian.AppendUint32(nil, uint32(timeoutMs))
	pd, err := n.start(ctx, &command{op: jute.OpCreateSession, body: body}, false)
	if err != nil {
		return znode.Session{}, 0, err
	}
	res, cmd, err := pd.wait(ctx)
	if err != nil {
		return znode.Session{}, 0, err
	}
	if res.Err != nil {
		return znode.Session{}, 0, fmt.Errorf("consensus: create session: %w", res.Err)
	}
	req, err := txnRequest(jute.OpCreateSession, cmd.body)
	if err != nil {
		return znode.Session{}, 0, err
	}
	cs := req.(*znode.CreateSession)
	return znode.Session{ID: cs.ID, Timeout: cs.Timeout, Passwd: cs.Passwd}, cs.Attach, nil
}

// start registers a proposal, submits it and starts the goroutine that settles it.
// localOnly proposals (leader housekeeping) are never forwarded.
func (n *Node) start(ctx context.Context, c *command, localOnly bool) (*Pending, error) {
	select {
	case n.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-n.stop:
		return nil, ErrShutdown
	}
	c.typ = cmdTxn
	c.origin = n.origin
	c.seq = n.seq.Add(1)
	pr := &proposal{delivered: make(chan struct{})}
	n.mu.Lock()
	if n.mu.closing {
		n.mu.Unlock()
		<-n.slots
		return nil, ErrShutdown
	}
	n.mu.pending[c.seq] = pr
	if c.session != 0 {
		n.mu.lastSeq[c.session] = c.seq
		n.mu.unsettled[c.session]++
	}
	n.mu.Unlock()

	restored := n.restoredCh.Load()
	at, err := n.submit(ctx, c, localOnly)
	if err != nil {
		n.settle(c)
		return nil, err
	}
	n.stats.proposed.Add(1)
	pd := &Pending{done: make(chan struct{}), delivered: pr.delivered, pr: pr}
	s := &settling{c: c, pr: pr, at: at, pd: pd, localOnly: localOnly, restored: restored}
	// A leader's own proposal goes to the settler; a forwarded one (or any once the node is
	// closing) to its own settling goroutine, which fails it if the node is closing.
	if at.fut == nil || !n.queueSettling(s) {
		n.settleSlowly(s)
	}
	return pd, nil
}

// settle forgets a proposal and frees its slot.
func (n *Node) settle(c *command) {
	n.mu.Lock()
	delete(n.mu.pending, c.seq)
	if c.session != 0 {
		if n.mu.lastSeq[c.session] == c.seq {
			delete(n.mu.lastSeq, c.session)
		}
		if n.mu.unsettled[c.session]--; n.mu.unsettled[c.session] <= 0 {
			delete(n.mu.unsettled, c.session)
		}
	}
	n.mu.Unlock()
	<-n.slots
}

// deliver is called by the FSM with the result of an entry this node proposed.
func (n *Node) deliver(seq uint64, c *command, r *znode.Result) {
	n.mu.Lock()
	pr, ok := n.mu.pending[seq]
	delete(n.mu.pending, seq)
	n.mu.Unlock()
	if ok {
		pr.res, pr.cmd = r, c
		close(pr.delivered)
	}
}

// submit hands c to the leader, retrying while nothing was proposed and HoldTimeout allows.
func (n *Node) submit(ctx context.Context, c *command, localOnly bool) (attempt, error) {
	deadline := time.Now().Add(n.cfg.HoldTimeout)
	for {
		addr, id := n.raft.LeaderWithID()
		var err error
		switch {
		case id == raft.ServerID(n.cfg.ID):
			fut, e := n.leaderApply(c)
			if e == nil {
				return attempt{fut: fut}, nil
			}
			if errors.Is(e, ErrSessionMoved) {
				return attempt{}, e
			}
			err = e
		case localOnly:
			return attempt{}, ErrNotLeader
		case id != "":
			cl, e := n.rpcClientFor(string(addr))
			if e != nil {
				return attempt{}, e
			}
			ch, _, e := cl.send(ctx, rpcSubmit, c.marshal())
			if e == nil {
				n.stats.forwarded.Add(1)
				return attempt{reply: ch}, nil
			}
			if errors.Is(e, ErrShutdown) {
				return attempt{}, e
			}
			err = e
		default:
			err = ErrNoLeader
		}
		if !time.Now().Before(deadline) {
			if errors.Is(err, ErrNoLeader) {
				return attempt{}, err
			}
			return attempt{}, fmt.Errorf("%w: %w", ErrNoLeader, err)
		}
		n.stats.retried.Add(1)
		t := time.NewTimer(time.Duration(10+rand.IntN(30)) * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return attempt{}, fmt.Errorf("%w: %w", ErrNoLeader, ctx.Err())
		case <-n.stop:
			t.Stop()
			return attempt{}, ErrShutdown
		}
	}
}

// complete waits for the outcome of a submitted proposal and settles pd.
// restored is the restore signal as it was before c was submitted.
func (n *Node) complete(c *command, pr *proposal, at attempt, pd *Pending, localOnly bool, restored *chan struct{}) {
	defer close(pd.done)
	defer n.settle(c)
	for {
		var status byte
		var detail error
		if at.fut != nil {
			detail = n.waitFuture(at.fut, 0)
			status, _ = classifyApply(detail)
		} else {
			select {
			case r := <-at.reply:
				status, detail = r.status, r.err
				switch {
				case r.err != nil:
					status = statusUnknown
				case r.status != statusOK:
					detail = errors.New(string(r.payload))
				default:
					n.relay.offerPayload(r.payload)
				}
			case <-pr.delivered:
				status = statusOK
			case <-n.stop:
				status, detail = statusUnknown, ErrShutdown
			}
		}
		switch status {
		case statusOK:
			// The FSM delivers before raft answers the future, so on the leader the result is
			// almost always here already: take it without arming the apply timer.
			select {
			case <-pr.delivered:
				pd.res, pd.cmd = *pr.res, pr.cmd
				return
			default:
			}
			t := time.NewTimer(n.cfg.ApplyTimeout)
			select {
			case <-pr.delivered:
				pd.res, pd.cmd = *pr.res, pr.cmd
			case <-*restored:
				// Committed, but this node jumped past it with a snapshot: no result here.
				select {
				case <-pr.delivered:
					pd.res, pd.cmd = *pr.res, pr.cmd
				default:
					n.stats.unknown.Add(1)
					pd.err = fmt.Errorf("%w: committed; a snapshot install skipped its result here", ErrUnknownOutcome)
				}
			case <-t.C:
				n.stats.unknown.Add(1)
				pd.err = fmt.Errorf("%w: committed but not applied here within %v", ErrUnknownOutcome, n.cfg.ApplyTimeout)
			case <-n.stop:
				pd.err = fmt.Errorf("%w: %w", ErrUnknownOutcome, ErrShutdown)
			}
			t.Stop()
			return
		case statusMoved:
			pd.err = ErrSessionMoved
			return
		case statusNotProposed:
			if n.mayRetry(c) {
				next, err := n.submit(n.ctx, c, localOnly)
				if err == nil {
					n.stats.retried.Add(1)
					at = next
					continue
				}
				pd.err = err
				return
			}
			pd.err = fmt.Errorf("%w: %w", ErrNoLeader, detail)
			return
		default:
			select {
			case <-pr.delivered: // it committed and applied here after all
				pd.res, pd.cmd = *pr.res, pr.cmd
				return
			default:
			}
			n.stats.unknown.Add(1)
			pd.err = fmt.Errorf("%w: %w", ErrUnknownOutcome, detail)
			return
		}
	}
}

// mayRetry reports whether a proposal that was not proposed may be submitted again: only if it is
// its session's one unsettled proposal here (no later one was started, and every earlier one has
// its outcome). A write that follows one whose outcome is unknown is never resubmitted alone: it
// fails, and the server closes the client's connection, so the client learns what happened.
// (Every replica also refuses a session's write out of order, so even a wrong retry could not
// make a write take effect before its predecessor; see znode.Txn.Attach.)
func (n *Node) mayRetry(c *command) bool {
	if c.session == 0 {
		return true
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.lastSeq[c.session] == c.seq && n.mu.unsettled[c.session] == 1
}

// classifyApply maps a raft apply error to an RPC status.
func classifyApply(err error) (byte, []byte) {
	switch {
	case err == nil:
		return statusOK, nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrEnqueueTimeout),
		errors.Is(err, raft.ErrLeadershipTransferInProgress), errors.Is(err, ErrNotLeader):
		return statusNotProposed, []byte(err.Error())
	default:
		return statusUnknown, []byte(err.Error())
	}
}

// leaderApply stamps c (time; for createSession the id and password) and proposes it. It fails
// with ErrNotLeader, having proposed nothing, on a node that is not the leader.
func (n *Node) leaderApply(c *command) (raft.ApplyFuture, error) {
	if n.raft.State() != raft.Leader {
		return nil, ErrNotLeader
	}
	cc := *c
	cc.time = time.Now().UnixMilli()
	server := originServer(cc.origin)
	if cc.op != jute.OpCreateSession && cc.session != 0 && !n.sessions.owns(cc.session, server) {
		return nil, ErrSessionMoved
	}
	if cc.op == jute.OpCreateSession {
		if len(cc.body) != 4 {
			return nil, fmt.Errorf("%w: createSession proposal body", ErrBadRequest)
		}
		timeout := int32(binary.BigEndian.Uint32(cc.body))
		// The password is the session's only secret: whoever knows id and password can take the
		// session over, so it comes from the operating system's CSPRNG.
		passwd := make([]byte, 16)
		crand.Read(passwd)
		attach, err := n.newAttach()
		if err != nil {
			return nil, err
		}
		id := n.newSessionID()
		n.sessions.claim(id, server)
		cc.body = createSessionBody(znode.CreateSession{ID: id, Timeout: timeout, Passwd: passwd, Attach: attach})
	}
	enqueue := min(n.cfg.HoldTimeout, time.Second)
	return n.raft.ApplyLog(raft.Log{Data: cc.marshal()}, enqueue), nil
}

// newSessionID picks a session id the way ZooKeeper lays them out: the top byte names the server
// (here 1..127 from a hash of the server id, so ids are positive and never 0x8000000000000000),
// the other 56 bits start from the clock and count up. Ids are unique among the sessions this
// leader knows and increase while it leads.
func (n *Node) newSessionID() int64 {
	h := fnv.New32a()
	h.Write([]byte(n.cfg.ID))
	prefix := uint64(h.Sum32()%127 + 1)
	base := int64(prefix<<56 | (uint64(time.Now().UnixMilli())<<24)>>8)
	n.sidMu.Lock()
	defer n.sidMu.Unlock()
	id := max(base, n.lastSID+1)
	v := n.View()
	for {
		if _, taken := v.Session(id); !taken && id > 0 {
			break
		}
		id++
	}
	n.lastSID = id
	return id
}

// originServer returns the server id part of a command's origin tag ("<server id>/<incarnation>").
func originServer(origin string) string {
	if i := strings.LastIndexByte(origin, '/'); i >= 0 {
		return origin[:i]
	}
	return origin
}
