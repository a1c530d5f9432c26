package consensus

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/zkd-io/zkd/znode"
)

// Peer is one voting member of a static cluster.
type Peer struct {
	// ID is the member's stable Raft server id. Never reuse an id for a server whose data was lost.
	ID string
	// Addr is the member's peer address (host:port), the one its peer listener accepts on.
	Addr string
}

// Config configures a Node. The zero value of every field except ID is usable; the comments say
// what zero means. New applies the defaults and then calls Validate.
type Config struct {
	// ID is this server's stable Raft server id. Required.
	ID string
	// Dir is the data directory. Raft's log and stable store live in Dir/raft/wal (or
	// Dir/raft/raft.db, see LogStore) and snapshots in Dir/raft/snapshots. Empty means in-memory
	// stores: nothing survives Shutdown (tests and embedding only).
	Dir string
	// LogStore is the on-disk format of the log when Dir is set. Empty means LogStoreWAL; a
	// directory that holds only a bolt store is migrated to the WAL on open. LogStoreBolt keeps
	// (or creates) the bolt store.
	LogStore LogStore
	// walSegmentSize overrides raft-wal's segment size (64 MiB) in tests that need log
	// truncation to delete whole segments after a few entries.
	walSegmentSize int
	// servingTick is how often the serving signal is re-evaluated (set by withDefaults).
	servingTick time.Duration

	// Listener is the peer listener, already bound. Nil means Network.Listen(Addr).
	Listener net.Listener
	// Addr is the peer address to listen on when Listener is nil. Empty means "127.0.0.1:0".
	// The advertised address is always the listener's own address.
	Addr string
	// Network dials peers and, when Listener is nil, opens the peer listener. Nil means plain TCP.
	// Tests put a fault-injecting layer here; it carries both Raft and the cluster RPC.
	Network Network
	// TLS puts the peer port under mutual TLS (zoo.cfg's sslQuorum, portUnification and
	// ssl.quorum.*), layered above Network so its faults still apply. Nil means plaintext.
	TLS *PeerTLS
	// Peers is the static member list used to bootstrap a new cluster; it must contain this node.
	// Empty means a single voter that bootstraps itself. Ignored when Dir already holds Raft state.
	Peers []Peer
	// NoBootstrap starts a node with no Raft state as a member-to-be: it bootstraps nothing and
	// waits until a cluster adds it (AddVoter on any member). False means bootstrap as above.
	NoBootstrap bool
	// RebuildOnDamage lets a cluster member whose data fails its checks (a DamageError) set its
	// directory aside (Dir/raft.damaged-<unix time>) and start again empty, keeping its term and
	// vote when those still verify, as a member that catches up from the leader. False (the
	// default) refuses to start. Standalone servers always refuse: there is no one to rebuild from.
	RebuildOnDamage bool

	// Logger receives the node's logs and, through one hclog bridge, hashicorp/raft's.
	// Nil means slog.New(slog.DiscardHandler).
	Logger *slog.Logger

	// OnApply, when set, is called on every node for every applied transaction in zxid order, from
	// the FSM goroutine, before the proposer's Propose returns. The server queues watch events here.
	// It must not block for long: it delays every later apply. r must not be kept or modified
	// after the call returns. The transactions of one applied batch are called in order and then
	// published together: v is nil for all but the batch's last, whose v holds them all. The
	// server publishes v for reads once it queued the watch events of every transaction up to it.
	OnApply func(zxid int64, r *znode.Result, v *znode.View)
	// OnRestore, when set, is called from the FSM goroutine after the tree was replaced by a
	// snapshot (a follower that fell behind), with the restored view. Watches registered before
	// may have missed events; the server should close its client connections.
	OnRestore func(v *znode.View)
	// OnServing, when set, is called from the node's monitor goroutine when the serving signal
	// changes (see Node.Serving). It must not block for long.
	OnServing func(serving bool)

	// HeartbeatTimeout is how long a follower waits without contact before it starts an election.
	// Zero means half a TickTime, at least 300ms (1s at ZooKeeper's stock tickTime of 2s: writes
	// resume a second or two after a leader's death), or 40ms for a node bootstrapped alone (no
	// Peers, not NoBootstrap), which only waits for itself. ZooKeeper's failure detection also
	// follows tickTime; at 300ms, a reconnect storm of 36,000 sessions on 2 cores kept a
	// cluster electing leaders that stepped down for more than 45 s (docs/performance.md).
	HeartbeatTimeout time.Duration
	// ElectionTimeout is the candidate's timeout. Zero means HeartbeatTimeout.
	ElectionTimeout time.Duration
	// LeaderLeaseTimeout is how long a leader stays leader without reaching a quorum.
	// Zero means HeartbeatTimeout/2.
	LeaderLeaseTimeout time.Duration
	// CommitTimeout is the leader's idle interval between AppendEntries that carry the commit
	// index. Followers learn commits from the leader's announcements (relay.go), so this only
	// bounds how late a follower applies a write whose announcement was lost. Zero means 50ms.
	CommitTimeout time.Duration

	// SnapshotThreshold is how many operations since the last snapshot trigger a new one: log
	// entries, each operation of a multi counted (a bulk load of large multis reaches millions
	// of znodes in a few thousand entries, all of which a restart would replay). Zero means
	// 100000 (ZooKeeper's snapCount).
	SnapshotThreshold uint64
	// SnapshotBytes is how many bytes of log entries applied since the last snapshot trigger a
	// new one even before SnapshotThreshold operations, bounding the log on disk and what a
	// restart reads. Zero means 256 MiB or twice the tree's data size, whichever is larger: a
	// snapshot writes the whole tree, and a small fixed size made a workload of large values
	// spend a fifth of its CPU rewriting the tree; this way snapshots add at most half to the
	// bytes written.
	SnapshotBytes uint64
	// snapshotBytesByTree is set by withDefaults when SnapshotBytes was zero.
	snapshotBytesByTree bool
	// SnapshotInterval is how often Raft checks the threshold (at a random point between one and
	// two intervals). Zero means 2s: the check is two index reads, and a long interval lets the
	// log run far past the threshold, all of which a restart after a crash must replay.
	SnapshotInterval time.Duration
	// TrailingLogs is how many entries are kept after a snapshot so slow followers can catch up
	// from the log. Zero means 10240. Fewer are kept when the entries are large: no more than a
	// third of the tree's data size (at least 64 MiB) in bytes (trailing.go).
	TrailingLogs uint64
	// SnapshotRetain is how many snapshots are kept on disk. Zero means 2.
	SnapshotRetain int

	// MaxOutstanding bounds the proposals of this node that are proposed but not yet answered;
	// Start blocks (until ctx ends) while the bound is reached. Zero means 1000.
	MaxOutstanding int
	// HoldTimeout is how long a write or sync waits for a leader before failing with ErrNoLeader.
	// Zero means 5s.
	HoldTimeout time.Duration
	// ApplyTimeout bounds how long a proposal that the leader accepted waits for this node's own
	// apply before it is answered with ErrUnknownOutcome. Zero means 30s.
	ApplyTimeout time.Duration

	// TickTime is ZooKeeper's tickTime: session touches are sent every TickTime/2 and the leader
	// checks session deadlines every TickTime/2. Zero means 2s.
	TickTime time.Duration
	// ReapInterval is how often the leader looks for expired TTL nodes and empty containers
	// (ZooKeeper's znode.container.checkIntervalMs). Zero means 60s; negative disables reaping.
	ReapInterval time.Duration
	// ReapMaxPerInterval bounds the nodes deleted per reap transaction
	// (znode.container.maxPerMinute scaled to the interval). Zero means 10000.
	ReapMaxPerInterval int
	// ContainerNeverUsedInterval is znode.container.maxNeverUsedIntervalMs in milliseconds:
	// a container that never had a child is reaped this long after creation. Zero means never.
	ContainerNeverUsedInterval int64
}

// standaloneHeartbeat is the default HeartbeatTimeout of a node bootstrapped alone: the wait
// before it elects itself when it starts (raft picks a point between one and two timeouts).
const standaloneHeartbeat = 40 * time.Millisecond

func (c Config) withDefaults() Config {
	if c.Addr == "" {
		c.Addr = "127.0.0.1:0"
	}
	if c.Network == nil {
		c.Network = TCPNetwork{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	alone := false
	if c.HeartbeatTimeout == 0 {
		c.HeartbeatTimeout = max(300*time.Millisecond, cmp.Or(c.TickTime, 2*time.Second)/2)
		if len(c.Peers) == 0 && !c.NoBootstrap {
			// A standalone node is its cluster's only voter: nobody else can lead, so the
			// follower wait before its first election only delays serving after a restart, and
			// its lease is met by itself alone.
			c.HeartbeatTimeout = standaloneHeartbeat
			alone = true
		}
	}
	if c.ElectionTimeout == 0 {
		c.ElectionTimeout = c.HeartbeatTimeout
	}
	if c.LeaderLeaseTimeout == 0 {
		c.LeaderLeaseTimeout = c.HeartbeatTimeout / 2
		if alone {
			c.LeaderLeaseTimeout = c.HeartbeatTimeout // raft's leader checks it this often
		}
	}
	c.servingTick = max(c.HeartbeatTimeout/4, 5*time.Millisecond)
	if alone {
		// Only a follower's serving signal depends on time (hearing from its leader); a node
		// alone changes it on leadership notifications, so polling at a tenth of its short
		// heartbeat only cost idle CPU.
		c.servingTick = 100 * time.Millisecond
	}
	if c.CommitTimeout == 0 {
		c.CommitTimeout = 50 * time.Millisecond
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = 100000
	}
	if c.SnapshotBytes == 0 {
		c.SnapshotBytes = 256 << 20
		c.snapshotBytesByTree = true
	}
	if c.SnapshotInterval == 0 {
		c.SnapshotInterval = 2 * time.Second
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = 10240
	}
	if c.LogStore == "" {
		c.LogStore = LogStoreWAL
	}
	if c.SnapshotRetain == 0 {
		c.SnapshotRetain = 2
	}
	if c.MaxOutstanding == 0 {
		c.MaxOutstanding = 1000
	}
	if c.HoldTimeout == 0 {
		c.HoldTimeout = 5 * time.Second
	}
	if c.ApplyTimeout == 0 {
		c.ApplyTimeout = 30 * time.Second
	}
	if c.TickTime == 0 {
		c.TickTime = 2 * time.Second
	}
	if c.ReapInterval == 0 {
		c.ReapInterval = 60 * time.Second
	}
	if c.ReapMaxPerInterval == 0 {
		c.ReapMaxPerInterval = 10000
	}
	return c
}

// Validate reports the first problem with c, after defaults are applied as New applies them.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.ID == "":
		return errors.New("consensus: config: ID is required")
	case c.HeartbeatTimeout < 5*time.Millisecond:
		return errors.New("consensus: config: HeartbeatTimeout must be at least 5ms")
	case c.ElectionTimeout < c.HeartbeatTimeout:
		return errors.New("consensus: config: ElectionTimeout must not be below HeartbeatTimeout")
	case c.LeaderLeaseTimeout < 5*time.Millisecond || c.LeaderLeaseTimeout > c.HeartbeatTimeout:
		return errors.New("consensus: config: LeaderLeaseTimeout must be in [5ms, HeartbeatTimeout]")
	case c.CommitTimeout < time.Millisecond:
		return errors.New("consensus: config: CommitTimeout must be at least 1ms")
	case c.LogStore != LogStoreWAL && c.LogStore != LogStoreBolt:
		return fmt.Errorf("consensus: config: unknown LogStore %q", c.LogStore)
	case c.SnapshotRetain < 1:
		return errors.New("consensus: config: SnapshotRetain must be positive")
	case c.MaxOutstanding < 1:
		return errors.New("consensus: config: MaxOutstanding must be positive")
	case c.HoldTimeout < 0 || c.ApplyTimeout < 0 || c.TickTime < 0 || c.SnapshotInterval < 0:
		return errors.New("consensus: config: negative duration")
	case c.ReapMaxPerInterval < 0 || c.ContainerNeverUsedInterval < 0:
		return errors.New("consensus: config: negative reap limit")
	}
	if c.TLS != nil {
		if err := c.TLS.Validate(); err != nil {
			return err
		}
	}
	if len(c.Peers) > 0 {
		self := false
		seen := make(map[string]bool, len(c.Peers))
		for _, p := range c.Peers {
			if p.ID == "" || p.Addr == "" {
				return errors.New("consensus: config: every peer needs an ID and an Addr")
			}
			if seen[p.ID] {
				return fmt.Errorf("consensus: config: duplicate peer id %q", p.ID)
			}
			seen[p.ID] = true
			self = self || p.ID == c.ID
		}
		if !self {
			return fmt.Errorf("consensus: config: Peers does not contain this node (%q)", c.ID)
		}
	}
	return nil
}
