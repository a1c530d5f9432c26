package consensus

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/zkd-io/zkd/internal/storage"
	"github.com/zkd-io/zkd/internal/third_party/raft"

	"github.com/zkd-io/zkd/internal/metric"
	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/znode"
)

// fsm is the replicated state machine: a znode.Tree driven by committed log entries.
//
// The four rules of hashicorp/raft's FSM hold here:
//   - Apply/ApplyBatch are deterministic: everything that differs between servers (time, session
//     ids, passwords, expiry decisions) is stamped into the entry by the leader.
//   - Snapshot is O(1): it takes an immutable znode.View.
//   - Persist runs concurrently with later applies; it only reads that view.
//   - Restore replaces everything, including the last applied zxid, which the snapshot carries.
//
// Apply, ApplyBatch, Snapshot and Restore run on raft's single FSM goroutine. Other goroutines read
// the tree through view() (an atomic pointer to the current tree, whose View is safe anywhere).
type fsm struct {
	log      *slog.Logger
	origin   string // this node incarnation's origin tag; results of its own entries are delivered
	tree     atomic.Pointer[znode.Tree]
	lastZxid atomic.Int64
	applied  applyWait
	// obs is told what the FSM did (fsmObserver); never nil.
	obs fsmObserver
	// sessions observes session creation and closing on every node (the leader keeps deadlines).
	sessions *sessionTracker
	applies  atomic.Int64
	// sinceSnap counts the entry bytes applied since the last snapshot, opsSinceSnap the
	// operations (a multi's each). Past snapBytes (or twice the tree's data size if snapByTree
	// and that is larger), or past snapOps operations, it calls wantSnapshot once: snapAsked is
	// set until a snapshot (or a failed one) resets the counts. snapAsks counts the calls.
	sinceSnap     atomic.Uint64
	opsSinceSnap  atomic.Uint64
	entsSinceSnap atomic.Uint64 // entries applied since the last snapshot
	snapAsked     atomic.Bool
	snapAsks      atomic.Uint64
	snapBytes     uint64
	snapByTree    bool
	snapOps       uint64
	// snapshots is set when the FSM is to ask for snapshots (obs.snapshotDue); a Memory takes
	// none.
	snapshots bool
	// metrics receives the apply, propagation and snapshot times (metrics.go); nil in some tests.
	metrics *metrics
	// paced counts the snapshot chunks written out early (storage.PersistSnapshot).
	paced atomic.Int64
	// done is ApplyBatch's scratch list of the entries it applied.
	done []appliedEntry
}

var (
	_ raft.FSM         = (*fsm)(nil)
	_ raft.BatchingFSM = (*fsm)(nil)
)

// fsmObserver is told what the FSM does, on the FSM goroutine, in this order for each batch:
// applied for each transaction, then delivered or forwardApplied for each, then batchApplied.
// Implementations must not block for long: they delay every later apply. nopObserver does
// nothing; *Node's is nodeObserver, a Memory's memoryObserver.
type fsmObserver interface {
	// applied is Config.OnApply's call (see there): every transaction in zxid order, v nil but
	// for the batch's last.
	applied(zxid int64, r *znode.Result, v *znode.View)
	// delivered hands the result of an entry this node incarnation proposed to its proposer.
	delivered(seq uint64, c *command, r *znode.Result)
	// forwardApplied is told the index and term of an applied entry another node proposed.
	forwardApplied(origin string, seq, index, term uint64)
	// batchApplied is told the index and term of the last entry of every applied batch.
	batchApplied(index, term uint64)
	// restored follows a snapshot that replaced the tree, with the zxid it restored to (entries
	// up to it were never applied one by one, so their proposers get no result) and its view.
	restored(zxid int64, v *znode.View)
	// snapshotDue asks for a snapshot: enough was applied since the last (fsm.snapshots only).
	snapshotDue()
	// snapshotStarting is told, at the start of every snapshot, the bytes and entries applied
	// since the last one and the tree's data size.
	snapshotStarting(bytes, entries uint64, dataSize int64)
}

// nopObserver is an fsmObserver that does nothing; embed it to implement only some calls.
type nopObserver struct{}

func (nopObserver) applied(int64, *znode.Result, *znode.View)     {}
func (nopObserver) delivered(uint64, *command, *znode.Result)     {}
func (nopObserver) forwardApplied(string, uint64, uint64, uint64) {}
func (nopObserver) batchApplied(uint64, uint64)                   {}
func (nopObserver) restored(int64, *znode.View)                   {}
func (nopObserver) snapshotDue()                                  {}
func (nopObserver) snapshotStarting(uint64, uint64, int64)        {}

func newFSM(log *slog.Logger, origin string) *fsm {
	f := &fsm{log: log, origin: origin, obs: nopObserver{}}
	f.tree.Store(znode.New())
	return f
}

func (f *fsm) view() *znode.View { return f.tree.Load().View() }

// Apply applies one committed entry.
func (f *fsm) Apply(l *raft.Log) any {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch applies committed entries in order and returns one response per entry: a
// *znode.Result for transactions, nil for configuration entries and skipped unknown types.
//
// The batch's transactions go into one znode.Batch, published once at the end (the writes of a
// batch then share their copies of the ancestors they change). The hooks run after: first the
// apply hook of every transaction in order, the last one with the published view (so each
// transaction's watch events are queued before any view that holds its change is handed on),
// then the waiters and the proposers' results (so no writer hears of a change its next read
// cannot see).
func (f *fsm) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	b := f.tree.Load().Batch()
	done := f.done[:0]
	for i, l := range logs {
		if l.Type != raft.LogCommand {
			continue
		}
		e, ok := f.applyCommand(b, l)
		if !ok {
			continue
		}
		out[i] = e.res
		done = append(done, e)
	}
	if len(done) > 0 {
		f.finish(b.Publish(), done)
	}
	clear(done)
	f.done = done[:0]
	if len(logs) > 0 {
		last := logs[len(logs)-1]
		f.obs.batchApplied(last.Index, last.Term)
	}
	return out
}

// appliedEntry is an entry of the batch being applied, kept for its hooks.
type appliedEntry struct {
	l   *raft.Log
	c   command
	res *znode.Result
}

// applyCommand applies one command entry into the batch. It reports false for an unknown command
// that may be skipped.
func (f *fsm) applyCommand(b *znode.Batch, l *raft.Log) (appliedEntry, bool) {
	zxid := int64(l.Index)
	c, err := unmarshalCommand(l.Data)
	if err != nil {
		if errors.Is(err, errUnknownType) && c.typ&cmdIgnorable != 0 {
			f.log.Warn("skipping unknown ignorable command", "type", c.typ, "zxid", zxid)
			return appliedEntry{}, false
		}
		// A committed entry this server cannot read means it would diverge from the others.
		// Stopping is the only safe choice (Consul and Nomad do the same).
		panic(fmt.Sprintf("consensus: invariant: entry %d cannot be applied: %v", zxid, err))
	}
	started := time.Now()
	res := f.applyTxn(b, zxid, &c)
	if m := f.metrics; m != nil {
		now := time.Now()
		m.apply.ObserveDuration(now.Sub(started))
		if c.time != 0 {
			// The leader stamped its wall clock into the entry when it accepted it.
			d := time.Duration(now.UnixMilli()-c.time) * time.Millisecond
			m.propagation.ObserveDuration(d)
			if !m.leader.Load() {
				m.commitProp.ObserveDuration(d)
			}
		}
		if m.leader.Load() {
			m.commits.Inc()
		}
	}
	f.applies.Add(1)
	ops := uint64(1)
	if m, ok := res.Resp.(*jute.MultiResponse); ok && len(m.Results) > 1 {
		ops = uint64(len(m.Results))
	}
	f.entsSinceSnap.Add(1)
	n, o := f.sinceSnap.Add(uint64(len(l.Data))), f.opsSinceSnap.Add(ops)
	if f.snapshots && (n >= f.snapBytes || (f.snapOps > 0 && o >= f.snapOps)) && f.snapDue(n, o) {
		f.snapAsks.Add(1)
		f.obs.snapshotDue()
	}
	return appliedEntry{l: l, c: c, res: res}, true
}

// finish runs the hooks of a published batch's transactions (see ApplyBatch for their order).
func (f *fsm) finish(v *znode.View, done []appliedEntry) {
	last := len(done) - 1
	for k := range done {
		var pub *znode.View
		if k == last {
			pub = v
		}
		f.obs.applied(int64(done[k].l.Index), done[k].res, pub)
	}
	zxid := int64(done[last].l.Index)
	f.lastZxid.Store(zxid)
	f.applied.trigger(zxid)
	for k := range done {
		e := &done[k]
		switch {
		case e.c.origin == f.origin:
			c := e.c // the proposer keeps it; e is reused by the next batch
			f.obs.delivered(c.seq, &c, e.res)
		default:
			f.obs.forwardApplied(e.c.origin, e.c.seq, e.l.Index, e.l.Term)
		}
	}
}

func (f *fsm) applyTxn(b *znode.Batch, zxid int64, c *command) *znode.Result {
	// The decoded request aliases the entry (its data buffers are subslices of c.body): Apply
	// copies what the tree keeps, and nothing here keeps req once applyTxn returns. Decoding
	// without copies saves every create and setData one allocation of its whole data.
	req, err := decodeTxn(jute.NewAliasDecoder(c.body, len(c.body)+1), c.op)
	if err != nil {
		// A client's write body is proposed as it arrived and decoded only here, so a client
		// that sent a malformed one gets MarshallingError, as from ZooKeeper. Every server
		// reaches the same verdict from the same bytes: the answer is deterministic. It is the
		// client's fault, not the server's, hence Debug (on every replica).
		f.log.Debug("undecodable transaction body", "zxid", zxid, "op", c.op, "err", err)
		return &znode.Result{Zxid: zxid, Err: jute.CodeMarshallingError}
	}
	txn := znode.Txn{Time: c.time, Session: c.session, Auth: c.auth, Op: c.op, Req: req,
		Attach: c.attach, Seq: c.aseq, NoTTL: c.flags&cmdNoTTL != 0, SASLACL: c.flags&cmdSASLACL != 0}
	r := b.Apply(zxid, &txn)
	if f.sessions != nil && r.Err == nil {
		switch q := req.(type) {
		case *znode.CreateSession:
			f.sessions.created(q.ID, q.Timeout, time.Now(), time.UnixMilli(c.time))
		case *znode.CloseSessions:
			f.sessions.closed(q.IDs)
		case nil:
			if c.op == jute.OpCloseSession {
				f.sessions.closed([]int64{c.session})
			}
		}
	}
	return &r
}

// snapDue reports, once per snapshot, that n bytes of entries and o operations since the last
// snapshot (past one of the thresholds) call for the next one.
func (f *fsm) snapDue(n, o uint64) bool {
	byOps := f.snapOps > 0 && o >= f.snapOps
	if !byOps && f.snapByTree && n < 2*uint64(max(f.view().DataSize(), 0)) {
		return false
	}
	return !f.snapAsked.Swap(true)
}

// resetSnapCount starts counting towards the next snapshot afresh.
func (f *fsm) resetSnapCount() {
	f.sinceSnap.Store(0)
	f.opsSinceSnap.Store(0)
	f.entsSinceSnap.Store(0)
	f.snapAsked.Store(false)
}

// Snapshot captures the current view; Persist writes it while applies continue.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	v := f.view()
	f.obs.snapshotStarting(f.sinceSnap.Load(), f.entsSinceSnap.Load(), v.DataSize())
	f.resetSnapCount()
	s := &fsmSnapshot{view: v, start: time.Now(), paced: &f.paced}
	if f.metrics != nil {
		s.times = f.metrics.snapshot
	}
	return s, nil
}

// Restore replaces the tree with the snapshot's.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	t, err := storage.ReadSnapshot(rc)
	if err != nil {
		return fmt.Errorf("consensus: restore: %w", err)
	}
	f.tree.Store(t)
	f.resetSnapCount()
	zxid := t.LastZxid()
	f.lastZxid.Store(zxid)
	if f.sessions != nil {
		f.sessions.restored(t.View().Sessions(), time.Now())
	}
	f.applied.trigger(zxid)
	f.log.Info("restored snapshot", "zxid", zxid)
	f.obs.restored(zxid, t.View())
	return nil
}

type fsmSnapshot struct {
	view  *znode.View
	start time.Time
	times *metric.Summary // snapshottime; nil when not measured
	paced *atomic.Int64
}

// Persist streams the view into the sink; raft's snapshot store checksums and fsyncs it. The
// file's pages are written out chunk by chunk as it grows (storage.PersistSnapshot).
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := storage.PersistSnapshot(sink, s.view, func() { s.paced.Add(1) }); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("consensus: persist snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return err
	}
	if s.times != nil {
		s.times.ObserveDuration(time.Since(s.start))
	}
	return nil
}

// Release is a no-op: the view is garbage collected.
func (s *fsmSnapshot) Release() {}
