package consensus

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkd-io/zkd/internal/peernet"
	"github.com/zkd-io/zkd/internal/storage"
	"github.com/zkd-io/zkd/internal/third_party/raft"

	"github.com/zkd-io/zkd/znode"
)

// Errors returned by Node. Callers compare with errors.Is.
var (
	// ErrShutdown means the node is shutting down or shut down.
	ErrShutdown = errors.New("consensus: node is shut down")
	// ErrNoLeader means no leader could be reached within Config.HoldTimeout; nothing was
	// proposed, so the request may be retried.
	ErrNoLeader = errors.New("consensus: no leader")
	// ErrNotLeader is returned by leader-only operations on another node; nothing was done.
	ErrNotLeader = errors.New("consensus: not the leader")
	// ErrUnknownOutcome means the write was proposed but its outcome is unknown: it may or may
	// not commit. The server must report connection loss, as ZooKeeper does.
	ErrUnknownOutcome = errors.New("consensus: outcome unknown")
	// ErrBadRequest means the proposal cannot be a transaction (not a write op, too large);
	// nothing was proposed. A body that does not decode is not checked here: it fails when
	// applied (MarshallingError), as in ZooKeeper.
	ErrBadRequest = errors.New("consensus: bad request")
	// ErrSessionMoved reports a write for a session that has since reattached on another server;
	// nothing was proposed. The server closes the stale connection, as ZooKeeper does.
	ErrSessionMoved = errors.New("consensus: session moved to another server")
)

// Node is one server of the replicated znode state machine. All its methods are safe for
// concurrent use.
type Node struct {
	cfg      Config
	log      *slog.Logger
	origin   string
	fsm      *fsm
	sessions *sessionTracker

	raft   *raft.Raft
	trans  *raft.NetworkTransport
	rtrans *retryTransport // what raft sends through: trans, waiting for unreachable followers
	layer  *peernet.StreamLayer
	ln     net.Listener
	logs   raft.LogStore
	store  io.Closer // the durable log and stable store; nil in memory
	snaps  raft.SnapshotStore
	notify chan bool

	tls *peernet.TLS // nil without Config.TLS
	// plainRefused logs TLS connections refused by a plaintext peer port, once per remote host.
	plainRefused peernet.FailLog

	props  *proposals     // the writes on their way (propose.go)
	keeper *sessionKeeper // session liveness and expiry (keeper.go)
	fwd    *forwards      // the writes peers forwarded here as leader (forwards.go)
	stop   chan struct{}
	ctx    context.Context // cancelled when shutdown begins; for the node's own calls
	cancel context.CancelFunc
	wg     sync.WaitGroup

	lead *leadership // leader, serving and member (leadership.go)

	stats struct {
		proposed     atomic.Int64
		forwarded    atomic.Int64
		retried      atomic.Int64
		unknown      atomic.Int64
		expired      atomic.Int64
		reaped       atomic.Int64
		announced    atomic.Int64
		heard        atomic.Int64
		relayed      atomic.Int64
		relayWaited  atomic.Int64
		relayRefused atomic.Int64
	}
	metrics  *metrics     // the measurements mntr and /metrics read (metrics.go)
	disk     diskGuard    // the data directory's free space (diskguard.go)
	announce announcement // the leader's latest applied entry, to announce (relay.go)
	relay    *relay
	snap     chan struct{} // the FSM asks for a snapshot (SnapshotBytes)

	mu struct {
		sync.Mutex
		closing bool
		clients map[string]*rpcClient
		conns   map[net.Conn]struct{}
	}
	down        chan struct{} // closed when Shutdown finished
	shutdownErr error         // written before down is closed
}

// New starts a node. With no Raft state in cfg.Dir (or with in-memory stores) it bootstraps:
// a single voter when cfg.Peers is empty, else the static cluster cfg.Peers (every member
// bootstraps with the same list). With existing state it restarts from disk.
func New(cfg Config) (*Node, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var nonce [8]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, fmt.Errorf("consensus: nonce: %w", err)
	}
	n := &Node{
		cfg:      cfg,
		log:      cfg.Logger.With("node", cfg.ID),
		origin:   cfg.ID + "/" + hex.EncodeToString(nonce[:]),
		sessions: newSessionTracker(),
		notify:   make(chan bool, 16),
		stop:     make(chan struct{}),
		down:     make(chan struct{}),
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	if cfg.TLS != nil {
		n.tls = peernet.NewTLS(*cfg.TLS, n.log, n.memberAddrs)
	}
	n.props = newProposals(n, cfg.MaxOutstanding)
	n.mu.clients = make(map[string]*rpcClient)
	n.mu.conns = make(map[net.Conn]struct{})
	n.keeper = newSessionKeeper(n, n.sessions)
	n.lead = &leadership{n: n}

	n.announce = announcement{n: n, commitNote: newCommitNote()}
	n.relay = newRelay(n)
	n.metrics = newMetrics()
	n.metrics.electionStart.Store(time.Now().UnixNano())
	n.metrics.unavailSince.Store(time.Now().UnixNano())
	n.disk.n = n
	n.fsm = newFSM(n.log, n.origin)
	n.fsm.metrics = n.metrics
	n.fwd = newForwards(n)
	n.snap = make(chan struct{}, 1)
	n.fsm.obs = nodeObserver{n}
	n.fsm.sessions = n.sessions
	n.fsm.snapshots = true
	n.fsm.snapBytes = cfg.SnapshotBytes
	n.fsm.snapByTree = cfg.snapshotBytesByTree
	n.fsm.snapOps = cfg.SnapshotThreshold
	opening := time.Now()
	err := n.open()
	var d *DamageError
	if errors.As(err, &d) && cfg.Dir != "" && cfg.RebuildOnDamage && len(cfg.Peers) > 1 {
		err = n.rebuildAfterDamage(d)
	}
	if err != nil {
		n.cancel()
		n.closeResources()
		return nil, err
	}
	n.metrics.dbInit.ObserveDuration(time.Since(opening))
	n.wg.Go(func() { n.metrics.observe(n.raft, n.stop) })
	n.wg.Go(n.acceptLoop)
	n.wg.Go(n.monitor)
	n.wg.Go(n.announce.run)
	n.wg.Go(n.relay.run)
	n.wg.Go(n.runSnapshotter)
	n.wg.Go(n.props.runWatcher)
	if cfg.Dir != "" {
		n.wg.Go(func() { n.disk.run(filepath.Join(cfg.Dir, "raft")) })
	}
	return n, nil
}

func (n *Node) open() error {
	cfg := n.cfg
	ln := cfg.Listener
	if ln == nil {
		var err error
		if ln, err = cfg.Network.Listen(cfg.Addr); err != nil {
			return fmt.Errorf("consensus: listen: %w", err)
		}
	}
	n.ln = ln
	hl := newHclog(cfg.Logger.With("node", cfg.ID), "raft")
	hl.(*hclogBridge).alone = len(cfg.Peers) == 0 && !cfg.NoBootstrap

	var (
		logs   raft.LogStore
		stable raft.StableStore
		snaps  raft.SnapshotStore
	)
	if cfg.Dir == "" {
		mem := raft.NewInmemStore()
		logs, stable, snaps = mem, mem, raft.NewInmemSnapshotStore()
	} else {
		st, err := storage.Open(cfg.Dir, storage.Options{
			Kind: cfg.LogStore, SegmentSize: cfg.walSegmentSize, SnapshotRetain: cfg.SnapshotRetain,
			Log: n.log, HCLog: hl,
			OnError: n.disk.noteStoreError, Full: n.disk.wait, SpaceOK: n.disk.spaceOK, Quit: n.stop,
			Stopped: ErrShutdown, // a write waiting for space at shutdown fails as ErrShutdown
		})
		if err != nil {
			return err
		}
		n.store, n.disk.segSize = st, st.SegmentSize
		n.disk.warnSmallVolume(st.Dir)
		if st.TornBytes > 0 {
			last, _ := st.Log.LastIndex()
			n.log.Warn("the log ended in an append a crash interrupted; it was never acknowledged and is dropped",
				"file", st.TornFile, "last_index", last, "dropped_bytes", st.TornBytes)
		}
		logs, stable, snaps = st.Log, st.Stable, st.Snapshots
	}
	n.snaps = snaps
	last, err := logs.LastIndex()
	if err != nil {
		return fmt.Errorf("consensus: read log: %w", err)
	}
	n.relay.storedThrough(last)
	logs = relayedLogs{LogStore: logs, r: n.relay}
	n.logs = logs

	n.layer = peernet.NewStreamLayer(ln.Addr(), n.dialPeer)
	n.trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  n.layer,
		MaxPool: 3,
		Timeout: 10 * time.Second,
		// No pipelining: on a LAN it gains little (RTT is well below the fsync), and v1.7.3's
		// pipeline can wedge the replication goroutine when its connection fails mid-stream,
		// which made Shutdown hang in tests.
		MaxRPCsInFlight: 1,
		Logger:          hl.Named("transport"),
	})

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.CommitTimeout
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.TrailingLogs = cfg.TrailingLogs
	rc.ShutdownOnRemove = false
	// A buffered apply channel lets the RPC reader enqueue forwarded writes while the leader
	// fsyncs, so they join the next group commit instead of one per connection per batch.
	rc.BatchApplyCh = true
	rc.NotifyCh = n.notify
	rc.Logger = hl
	if err := raft.ValidateConfig(rc); err != nil {
		return fmt.Errorf("consensus: raft config: %w", err)
	}

	has, err := raft.HasExistingState(logs, stable, snaps)
	if err != nil {
		return fmt.Errorf("consensus: read state: %w", err)
	}
	if !has && !cfg.NoBootstrap {
		var servers []raft.Server
		if len(cfg.Peers) == 0 {
			servers = []raft.Server{{Suffrage: raft.Voter, ID: rc.LocalID, Address: raft.ServerAddress(ln.Addr().String())}}
		}
		for _, p := range cfg.Peers {
			servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr)})
		}
		err := raft.BootstrapCluster(rc, logs, stable, snaps, n.trans, raft.Configuration{Servers: servers})
		if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			return fmt.Errorf("consensus: bootstrap: %w", err)
		}
	}
	rt := &retryTransport{NetworkTransport: n.trans, stop: n.stop, log: n.log, metrics: n.metrics}
	n.rtrans = rt
	r, err := raft.NewRaft(rc, n.fsm, timedLogs{LogStore: logs, m: n.metrics}, stable, snaps, rt)
	if err != nil {
		return fmt.Errorf("consensus: start raft: %w", err)
	}
	rt.raft.Store(r)
	n.raft = r
	return nil
}

// goTracked runs f on a goroutine that Shutdown waits for; it refuses once shutdown began.
func (n *Node) goTracked(f func()) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.closing {
		return false
	}
	n.wg.Go(f)
	return true
}

func (n *Node) acceptLoop() {
	for {
		c, err := n.ln.Accept()
		if err != nil {
			select {
			case <-n.stop:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			n.log.Warn("peer accept failed", "err", err)
			select {
			case <-n.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		peernet.Tune(c)
		n.mu.Lock()
		if n.mu.closing {
			n.mu.Unlock()
			c.Close()
			return
		}
		n.mu.conns[c] = struct{}{}
		n.wg.Go(func() { n.handleConn(c) })
		n.mu.Unlock()
	}
}

func (n *Node) handleConn(raw net.Conn) {
	defer func() {
		n.mu.Lock()
		delete(n.mu.conns, raw)
		n.mu.Unlock()
	}()
	c, kind, err := n.openConn(raw)
	if err != nil {
		c.Close()
		return
	}
	switch kind {
	case peernet.ConnRaft:
		n.layer.Handoff(c)
	case peernet.ConnRPC:
		n.serveRPC(c)
	default:
		n.log.Warn("unknown peer connection type", "byte", kind, "remote", c.RemoteAddr())
		c.Close()
	}
}

// openConn reads an accepted connection's first byte, within peernet.HandshakeTimeout, and returns the
// connection type. With PeerTLS, a first byte of 0x16 starts a TLS handshake and the type is the
// first byte inside it; a plaintext connection is refused unless AcceptPlaintext. Without
// PeerTLS, a TLS handshake is refused (logged once per remote host). The returned connection is
// the one to use (TLS or c) and is always non-nil.
func (n *Node) openConn(c net.Conn) (net.Conn, byte, error) {
	deadline := time.Now().Add(peernet.HandshakeTimeout)
	_ = c.SetDeadline(deadline)
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return c, 0, err
	}
	if n.tls == nil {
		if b[0] == peernet.TLSRecordHandshake {
			n.plainRefused.Note(n.log, peernet.RemoteHost(c), "refused a TLS peer connection: this server's peer port is plaintext (sslQuorum=false, no TLS configured)", "remote", c.RemoteAddr())
			return c, 0, errors.New("consensus: TLS on a plaintext peer port")
		}
		_ = c.SetDeadline(time.Time{})
		return c, b[0], nil
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	pc, err := n.tls.Accept(ctx, &peernet.ReplayConn{Conn: c, First: b[:]}, b[0])
	if err != nil {
		return c, 0, err
	}
	if _, err := io.ReadFull(pc, b[:]); err != nil {
		return pc, 0, err
	}
	_ = c.SetDeadline(time.Time{})
	return pc, b[0], nil
}

// Addr returns the peer address this node listens on.
func (n *Node) Addr() string { return n.ln.Addr().String() }

// ID returns the node's Raft server id.
func (n *Node) ID() string { return n.cfg.ID }

// View returns the current point-in-time view of the tree. Take the reply zxid from the same
// view (View.Zxid) as the data.
func (n *Node) View() *znode.View { return n.fsm.view() }

// LastZxid returns the zxid of the last transaction this node applied.
func (n *Node) LastZxid() int64 { return n.fsm.lastZxid.Load() }

// WaitApplied blocks until this node applied zxid, ctx ends or the node shuts down.
func (n *Node) WaitApplied(ctx context.Context, zxid int64) error {
	select {
	case <-n.fsm.applied.wait(zxid):
		if n.LastZxid() < zxid {
			return ErrShutdown
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// IsLeader reports whether this node is the leader and has finished taking over (its FSM caught
// up and session deadlines were reset).
func (n *Node) IsLeader() bool {
	term := n.lead.readyTerm.Load()
	return term != 0 && n.raft.State() == raft.Leader && n.raft.CurrentTerm() == term
}

// Leader returns the current leader's id and peer address, empty if none is known.
func (n *Node) Leader() (id, addr string) {
	a, i := n.raft.LeaderWithID()
	return string(i), string(a)
}

// Shutdown stops the node: Raft, the peer listener and connections, and every goroutine it
// started; then it closes the stores. Proposals in flight fail. It is idempotent.
func (n *Node) Shutdown() error {
	n.mu.Lock()
	if n.mu.closing {
		n.mu.Unlock()
		<-n.down
		return n.shutdownErr
	}
	n.mu.closing = true
	n.props.close()
	close(n.stop)
	n.cancel()
	n.mu.Unlock()

	var errs []error
	if err := n.raft.Shutdown().Error(); err != nil {
		errs = append(errs, fmt.Errorf("consensus: raft shutdown: %w", err))
	}
	n.closeResources()
	n.wg.Wait()
	n.props.failAll(fmt.Errorf("%w: %w", ErrUnknownOutcome, ErrShutdown))
	n.fsm.applied.close()
	if n.store != nil {
		if err := n.store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("consensus: close log store: %w", err))
		}
	}
	n.shutdownErr = errors.Join(errs...)
	close(n.down)
	return n.shutdownErr
}

// closeResources closes the transport, the listener, accepted connections and RPC clients.
func (n *Node) closeResources() {
	if n.trans != nil {
		n.trans.Close()
		n.trans.CloseStreams()
	} else if n.layer != nil {
		n.layer.Close()
	}
	if n.ln != nil {
		n.ln.Close()
	}
	n.mu.Lock()
	conns := make([]net.Conn, 0, len(n.mu.conns))
	for c := range n.mu.conns {
		conns = append(conns, c)
	}
	clients := make([]*rpcClient, 0, len(n.mu.clients))
	for _, c := range n.mu.clients {
		clients = append(clients, c)
	}
	n.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	for _, c := range clients {
		c.close()
	}
	if n.raft == nil && n.store != nil {
		n.store.Close()
	}
}
