package consensus

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkd-io/zkd/internal/third_party/raft"

	"github.com/zkd-io/zkd/internal/metric"
	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/znode"
)

// Memory is the in-memory twin of Node, as raft.InmemTransport is of the network transport: the
// same log entries, FSM, apply hooks and session rules, applied to a znode.Tree with no Raft, no
// network and no disk. It is always the leader of a one-member cluster and applies each write
// synchronously inside Start, so the caller's Wait returns at once. Session deadlines run on the
// clock (time.Now and tickers), so a test in a testing/synctest bubble controls them.
//
// It exists so that the server's connection handling, pipeline and watch delivery can be tested
// fast and deterministically; use Node for anything that must survive a restart.
type Memory struct {
	cfg      MemoryConfig
	log      *slog.Logger
	origin   string
	fsm      *fsm
	sessions *sessionTracker

	mu struct {
		sync.Mutex
		index   uint64 // the last entry's index (its zxid)
		seq     uint64
		attach  uint64
		lastSID int64
		closed  bool
	}
	stats struct {
		proposed, expired atomic.Int64
	}
	metrics *metrics
	stop    chan struct{}
	wg      sync.WaitGroup
}

// MemoryConfig configures a Memory. The hooks mean what they mean in Config.
type MemoryConfig struct {
	// TickTime paces session expiry: deadlines are checked every TickTime/2. Zero means 2s.
	TickTime  time.Duration
	Logger    *slog.Logger
	OnApply   func(zxid int64, r *znode.Result, v *znode.View)
	OnRestore func(v *znode.View)
}

// NewMemory returns a running Memory, serving. Shutdown stops it.
func NewMemory(cfg MemoryConfig) *Memory {
	if cfg.TickTime <= 0 {
		cfg.TickTime = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Memory{cfg: cfg, log: cfg.Logger, origin: "memory/1", sessions: newSessionTracker(), stop: make(chan struct{})}
	m.metrics = newMetrics()
	m.metrics.leader.Store(true)
	m.metrics.leaderSince.Store(time.Now().UnixNano())
	m.fsm = newFSM(m.log, m.origin)
	m.fsm.metrics = m.metrics
	m.fsm.obs = memoryObserver{cfg: &m.cfg}
	m.fsm.sessions = m.sessions
	m.wg.Go(m.expireLoop)
	return m
}

// View returns the current view of the tree.
func (m *Memory) View() *znode.View { return m.fsm.view() }

// LastZxid returns the zxid of the last applied transaction.
func (m *Memory) LastZxid() int64 { return m.fsm.lastZxid.Load() }

// Start applies a client write at once and returns it completed (see Node.Start).
func (m *Memory) Start(ctx context.Context, p Proposal) (*Pending, error) {
	c, err := p.command()
	if err != nil {
		return nil, err
	}
	return m.apply(ctx, c)
}

// Propose is Start followed by Wait.
func (m *Memory) Propose(ctx context.Context, p Proposal) (znode.Result, error) {
	pd, err := m.Start(ctx, p)
	if err != nil {
		return znode.Result{}, err
	}
	return pd.Wait(ctx)
}

// CreateSession creates a session, as Node.CreateSession does.
func (m *Memory) CreateSession(ctx context.Context, timeoutMs int32) (znode.Session, uint64, error) {
	if timeoutMs <= 0 {
		return znode.Session{}, 0, fmt.Errorf("%w: session timeout %d", ErrBadRequest, timeoutMs)
	}
	passwd := make([]byte, 16)
	crand.Read(passwd)
	m.mu.Lock()
	m.mu.lastSID++
	id := max(m.mu.lastSID, int64(1)<<56)
	m.mu.lastSID = id
	m.mu.Unlock()
	cs := znode.CreateSession{ID: id, Timeout: timeoutMs, Passwd: passwd, Attach: m.newAttach()}
	pd, err := m.apply(ctx, &command{op: jute.OpCreateSession, body: createSessionBody(cs)})
	if err != nil {
		return znode.Session{}, 0, err
	}
	if pd.res.Err != nil {
		return znode.Session{}, 0, fmt.Errorf("consensus: create session: %w", pd.res.Err)
	}
	return znode.Session{ID: cs.ID, Timeout: cs.Timeout, Passwd: cs.Passwd}, cs.Attach, nil
}

// ValidateSession touches a live session and returns a new attachment token.
func (m *Memory) ValidateSession(ctx context.Context, id int64) (bool, uint64, error) {
	if m.isClosed() {
		return false, 0, ErrShutdown
	}
	if !m.sessions.touch(id, time.Now()) {
		return false, 0, nil
	}
	return true, m.newAttach(), nil
}

func (m *Memory) newAttach() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.attach++
	return 1<<32 | m.mu.attach
}

// Touch records that the sessions' clients are alive.
func (m *Memory) Touch(ids ...int64) {
	now := time.Now()
	for _, id := range ids {
		m.sessions.touch(id, now)
	}
}

// Sync returns at once: every write is applied before Start returns.
func (m *Memory) Sync(ctx context.Context) error {
	if m.isClosed() {
		return ErrShutdown
	}
	return ctx.Err()
}

// Serving reports true until Shutdown: a Memory is its own leader.
func (m *Memory) Serving() bool { return !m.isClosed() }

// IsLeader reports true: a Memory is its own leader.
func (m *Memory) IsLeader() bool { return !m.isClosed() }

// Leader returns this member.
func (m *Memory) Leader() (id, addr string) { return "1", "" }

// Members returns the one member.
func (m *Memory) Members() ([]Peer, error) { return []Peer{{ID: "1"}}, nil }

// AddVoter is not supported: a Memory has no peers.
func (m *Memory) AddVoter(context.Context, string, string) error {
	return fmt.Errorf("%w: an in-memory node has no peers", ErrBadRequest)
}

// RemoveServer is not supported: a Memory has no peers.
func (m *Memory) RemoveServer(context.Context, string) error {
	return fmt.Errorf("%w: an in-memory node has no peers", ErrBadRequest)
}

// Stats returns the counters that apply to a Memory.
func (m *Memory) Stats() Stats {
	m.mu.Lock()
	index := m.mu.index
	m.mu.Unlock()
	return Stats{ID: "1", State: "Leader", LeaderID: "1", Term: 1, Ready: true, Serving: m.Serving(),
		LastZxid: m.LastZxid(), CommitIndex: index, LastIndex: index, Proposed: m.stats.proposed.Load(),
		Applied: m.fsm.applies.Load(), Expired: m.stats.expired.Load(), Tracked: m.sessions.len(),
		LeaderChanges: 1, LeaderSince: time.Unix(0, m.metrics.leaderSince.Load())}
}

// Metrics returns the measurements that apply to a Memory (applies and local commits).
func (m *Memory) Metrics() *metric.Set { return &m.metrics.set }

// Shutdown stops the expiry goroutine. Later writes fail with ErrShutdown.
func (m *Memory) Shutdown() error {
	m.mu.Lock()
	if m.mu.closed {
		m.mu.Unlock()
		return nil
	}
	m.mu.closed = true
	m.mu.Unlock()
	close(m.stop)
	m.wg.Wait()
	m.fsm.applied.close()
	return nil
}

func (m *Memory) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.closed
}

// apply appends c as the next entry and applies it, as a leader that commits at once would.
func (m *Memory) apply(ctx context.Context, c *command) (*Pending, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	started := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return nil, ErrShutdown
	}
	m.mu.seq++
	m.mu.index++
	c.typ, c.origin, c.seq = cmdTxn, m.origin, m.mu.seq
	entry := c.marshal()
	stampTime(entry, time.Now().UnixMilli())
	out := m.fsm.ApplyBatch([]*raft.Log{{Index: m.mu.index, Term: 1, Type: raft.LogCommand, Data: entry}})
	res, _ := out[0].(*znode.Result)
	if res == nil {
		return nil, fmt.Errorf("%w: entry not applied", ErrBadRequest)
	}
	m.stats.proposed.Add(1)
	p := &Pending{c: c, done: make(chan struct{}), res: *res, finished: true}
	applied := *c
	applied.time = int64(binary.BigEndian.Uint64(entry[2:]))
	p.applied = &applied
	close(p.done)
	m.metrics.localCommit.ObserveDuration(time.Since(started))
	return p, nil
}

// expireLoop closes the sessions whose deadline passed, every TickTime/2, until Shutdown.
func (m *Memory) expireLoop() {
	t := time.NewTicker(max(m.cfg.TickTime/2, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		ids := m.sessions.expire(time.Now())
		if len(ids) == 0 {
			continue
		}
		if _, err := m.apply(context.Background(), &command{op: jute.OpCloseSession, body: closeSessionsBody(ids)}); err != nil {
			m.sessions.unclose(ids)
			continue
		}
		m.stats.expired.Add(int64(len(ids)))
		m.metrics.staleExpired.Add(int64(len(ids)))
	}
}

// memoryObserver hands a Memory's applies and restores to its configuration's hooks.
type memoryObserver struct {
	nopObserver
	cfg *MemoryConfig
}

func (o memoryObserver) applied(zxid int64, r *znode.Result, v *znode.View) {
	if o.cfg.OnApply != nil {
		o.cfg.OnApply(zxid, r, v)
	}
}

func (o memoryObserver) restored(_ int64, v *znode.View) {
	if o.cfg.OnRestore != nil {
		o.cfg.OnRestore(v)
	}
}
