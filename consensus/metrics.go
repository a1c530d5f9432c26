package consensus

import (
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkd-io/zkd/internal/storage"
	"github.com/zkd-io/zkd/internal/third_party/raft"

	"github.com/zkd-io/zkd/internal/metric"
)

// metrics are a node's measurements, made where the work happens: the log store's appends
// (fsync), the FSM's applies, the proposals' completion, snapshots, elections and the leader's
// replication to each follower. The server's mntr and /metrics read them through Metrics; the
// names are ZooKeeper's (ServerMetrics) where ZooKeeper measures the same thing.
type metrics struct {
	set metric.Set

	fsync       *metric.Summary // a StoreLogs call: the append and its fsync
	batch       *metric.Summary // entries per StoreLogs call (ZooKeeper's group commit size)
	apply       *metric.Summary // applying one committed entry to the tree
	propagation *metric.Summary // the leader's stamp to this node's apply, every entry
	commitProp  *metric.Summary // the same, on a follower
	localCommit *metric.Summary // a write proposed here, from Start to its apply here
	snapshot    *metric.Summary // capturing and persisting a snapshot
	election    *metric.Summary // time without a leader, until one is known
	dbInit      *metric.Summary // opening the node: stores, snapshot restore
	unavailable *metric.Summary // a period of not serving clients, until serving again
	leaderUnav  *metric.Summary // the same, ended by serving as the leader
	followSync  *metric.Summary // a follower catching up with its leader before it serves

	looking      *metric.Counter // elections this node started (candidate)
	proposals    *metric.Counter // entries appended to the log as leader
	commits      *metric.Counter // entries applied as leader (committed by this leader or before)
	learnerProps *metric.Counter // entries appended to the log as follower
	learnerComms *metric.Counter // commits the leader announced to this follower
	snapSyncs    *metric.Counter // snapshots sent to followers
	staleExpired *metric.Counter // sessions expired as leader

	leader        atomic.Bool  // Raft state is Leader (from the observer)
	leaderSince   atomic.Int64 // unix ns this node became leader, 0 when it is not
	leaderChanges atomic.Int64 // leaders this node has learnt of
	electionStart atomic.Int64 // unix ns a leaderless period began, 0 while a leader is known
	unavailSince  atomic.Int64 // unix ns this node stopped serving, 0 while it serves

	// The sizes of the entries this node appended as leader (ZooKeeper's proposal sizes).
	propLast, propMin, propMax atomic.Int64

	followers followerTable
}

func newMetrics() *metrics {
	m := &metrics{}
	s := &m.set
	m.fsync = s.Add(metric.Item{Name: "fsynctime", Help: "Time to append entries to the Raft log and fsync it, in milliseconds.",
		Summary: metric.NewSummary(metric.Millis), Histogram: "zkd_fsync_duration_seconds"})
	m.batch = s.Summary("sync_processor_batch_size", "Entries appended to the log per fsync.", metric.Count, metric.Basic)
	m.snapshot = s.Add(metric.Item{Name: "snapshottime", Help: "Time to capture and persist a snapshot, in milliseconds.",
		Summary: metric.NewSummary(metric.Millis), Histogram: "zkd_snapshot_duration_seconds"})
	m.dbInit = s.Summary("dbinittime", "Time to open the stores and restore the newest snapshot at start, in milliseconds.", metric.Millis, metric.Basic)
	m.election = s.Summary("election_time", "Time without a known leader until one is elected, in milliseconds.", metric.Millis, metric.Basic)
	m.unavailable = s.Summary("unavailable_time", "Time this server did not serve clients, per period, in milliseconds.", metric.Millis, metric.Basic)
	m.leaderUnav = s.Summary("leader_unavailable_time", "Time this server did not serve clients before serving as the leader, per period, in milliseconds.", metric.Millis, metric.Basic)
	m.followSync = s.Summary("follower_sync_time", "Time a follower took to catch up with its leader before serving, in milliseconds.", metric.Millis, metric.Basic)
	m.apply = s.Add(metric.Item{Name: "commit_process_time", Help: "Time to apply one committed entry to the data tree, in milliseconds.",
		Summary: metric.NewSummary(metric.Millis), Histogram: "zkd_apply_duration_seconds"})
	m.propagation = s.Summary("propagation_latency", "Time from the leader accepting an entry to its apply on this server, in milliseconds.", metric.Millis, metric.Advanced)
	m.commitProp = s.Summary("commit_propagation_latency", "On a follower, time from the leader accepting an entry to its apply here, in milliseconds.", metric.Millis, metric.Advanced)
	m.localCommit = s.Add(metric.Item{Name: "local_write_committed_time_ms", Help: "Time from a write's proposal on this server to its apply here.",
		Summary: metric.NewSummary(metric.Millis), Detail: metric.Advanced, MntrOnly: true, Histogram: "zkd_commit_duration_seconds"})
	m.looking = s.Counter("looking_count", "Elections this server started.")
	m.proposals = s.Counter("proposal_count", "Entries this server appended to the log as leader.")
	m.commits = s.Counter("commit_count", "Entries this server applied as leader.")
	m.learnerProps = s.Counter("learner_proposal_received_count", "Entries this server appended to the log as a follower.")
	m.learnerComms = s.Counter("learner_commit_received_count", "Commits the leader announced to this follower.")
	m.snapSyncs = s.Counter("snap_count", "Snapshots this server sent to followers as leader.")
	m.staleExpired = s.Counter("stale_sessions_expired", "Sessions this server expired as leader.")
	return m
}

// Metrics returns the node's measurements, for the server's mntr and /metrics.
func (n *Node) Metrics() *metric.Set { return &n.metrics.set }

// servingChanged times the periods without serving (ZooKeeper's unavailable_time).
func (m *metrics) servingChanged(serving, leader bool, now time.Time) {
	if !serving {
		m.unavailSince.CompareAndSwap(0, now.UnixNano())
		return
	}
	if start := m.unavailSince.Swap(0); start != 0 {
		d := now.Sub(time.Unix(0, start))
		m.unavailable.ObserveDuration(d)
		if leader {
			m.leaderUnav.ObserveDuration(d)
		}
	}
}

// timedLogs is the Raft log store as Raft sees it: every append is timed (fsynctime) and counted.
type timedLogs struct {
	raft.LogStore
	m *metrics
}

func (l timedLogs) StoreLog(log *raft.Log) error { return l.StoreLogs([]*raft.Log{log}) }

func (l timedLogs) StageLogs(logs []*raft.Log) bool { return stageLogs(l.LogStore, logs) }
func (l timedLogs) UnstageLogs(logs []*raft.Log)    { unstageLogs(l.LogStore, logs) }

func (l timedLogs) StoreLogs(logs []*raft.Log) error {
	start := time.Now()
	err := l.LogStore.StoreLogs(logs)
	l.m.fsync.ObserveDuration(time.Since(start))
	l.m.batch.Observe(uint64(len(logs)))
	m := l.m
	leader := m.leader.Load()
	for _, e := range logs {
		if e.Type != raft.LogCommand {
			continue
		}
		if !leader {
			m.learnerProps.Inc()
			continue
		}
		m.proposals.Inc()
		size := int64(len(e.Data))
		m.propLast.Store(size)
		if cur := m.propMin.Load(); cur == 0 || size < cur {
			m.propMin.Store(size)
		}
		if size > m.propMax.Load() {
			m.propMax.Store(size)
		}
	}
	return err
}

// IsMonotonic passes on what the wrapped store says (raft-wal requires monotonic indexes).
func (l timedLogs) IsMonotonic() bool {
	if m, ok := l.LogStore.(raft.MonotonicLogStore); ok {
		return m.IsMonotonic()
	}
	return false
}

// observe follows r's state and leader changes until stop closes: elections (count and
// duration), leader changes and this node's leadership. It is one of the node's goroutines.
func (m *metrics) observe(r *raft.Raft, stop <-chan struct{}) {
	ch := make(chan raft.Observation, 16)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.LeaderObservation, raft.RaftState:
			return true
		}
		return false
	})
	r.RegisterObserver(obs)
	defer r.DeregisterObserver(obs)
	// A leader elected before the observer was registered is still counted.
	if _, id := r.LeaderWithID(); id != "" {
		m.leaderKnown(time.Now())
	}
	if r.State() == raft.Leader {
		m.becameLeader(true, time.Now())
	}
	for {
		select {
		case <-stop:
			return
		case o := <-ch:
			now := time.Now()
			switch d := o.Data.(type) {
			case raft.LeaderObservation:
				if d.LeaderID == "" {
					m.electionStart.CompareAndSwap(0, now.UnixNano())
					continue
				}
				m.leaderKnown(now)
			case raft.RaftState:
				if d == raft.Candidate {
					m.looking.Inc()
				}
				m.becameLeader(d == raft.Leader, now)
			}
		}
	}
}

// leaderKnown records the end of a leaderless period and the change of leader.
func (m *metrics) leaderKnown(now time.Time) {
	m.leaderChanges.Add(1)
	if start := m.electionStart.Swap(0); start != 0 {
		m.election.ObserveDuration(now.Sub(time.Unix(0, start)))
	}
}

// becameLeader records whether this node leads; a new leadership starts with no follower known.
func (m *metrics) becameLeader(leader bool, now time.Time) {
	was := m.leader.Swap(leader)
	switch {
	case leader && !was:
		m.leaderSince.Store(now.UnixNano())
		m.followers.clear()
	case !leader:
		m.leaderSince.Store(0)
	}
}

// followerTable is what the leader knows of each follower's log, from the replies to its
// AppendEntries and InstallSnapshot calls (the transport sees them all).
type followerTable struct {
	mu sync.Mutex
	m  map[raft.ServerID]*followerProgress
}

type followerProgress struct {
	match    uint64    // the highest index the follower is known to hold
	contact  time.Time // its last successful AppendEntries reply
	snapshot int       // snapshots being sent to it
}

func (t *followerTable) get(id raft.ServerID) *followerProgress {
	if t.m == nil {
		t.m = make(map[raft.ServerID]*followerProgress)
	}
	p := t.m[id]
	if p == nil {
		p = &followerProgress{}
		t.m[id] = p
	}
	return p
}

func (t *followerTable) clear() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.m = nil
}

// appended records a successful AppendEntries reply: the follower holds everything up to the
// request's last entry (a heartbeat, with no entries, proves only that it is there).
func (t *followerTable) appended(id raft.ServerID, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) {
	if !resp.Success {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.get(id)
	p.contact = time.Now()
	if n := len(args.Entries); n > 0 {
		p.match = max(p.match, args.Entries[n-1].Index)
	} else if args.PrevLogEntry > 0 {
		p.match = max(p.match, args.PrevLogEntry)
	}
}

// snapshotting records the start (+1) or end (-1) of a snapshot sent to id; a snapshot that
// arrived brings the follower up to its index.
func (t *followerTable) snapshotting(id raft.ServerID, delta int, installed uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.get(id)
	p.snapshot += delta
	p.match = max(p.match, installed)
}

// InstallSnapshot sends a snapshot to a follower that is too far behind for the log; the leader
// counts it (ZooKeeper's snap_count) and reports the follower as syncing meanwhile.
func (t *retryTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest,
	resp *raft.InstallSnapshotResponse, data io.Reader) error {
	m := t.metrics
	if m == nil {
		return t.NetworkTransport.InstallSnapshot(id, target, args, resp, data)
	}
	m.snapSyncs.Inc()
	m.followers.snapshotting(id, 1, 0)
	err := t.NetworkTransport.InstallSnapshot(id, target, args, resp, data)
	installed := uint64(0)
	if err == nil && resp.Success {
		installed = args.LastLogIndex
	}
	m.followers.snapshotting(id, -1, installed)
	return err
}

// FollowerStats is the leader's view of one follower.
type FollowerStats struct {
	ID string
	// Match is the highest log index the follower is known to hold; Lag is how far it is behind
	// the leader's last index.
	Match, Lag uint64
	// LastContact is how long ago the follower last answered an AppendEntries (-1: never, in
	// this leadership).
	LastContact time.Duration
	// Synced reports that the follower answered within the election timeout and is not being
	// sent a snapshot; Syncing that a snapshot is on its way to it.
	Synced, Syncing bool
}

// followerStats returns the leader's view of every voter of r's configuration but self, ordered by
// id, as of last (the leader's last index); nil on a follower. A follower counts as synced if it
// answered within electionTimeout.
func (m *metrics) followerStats(r *raft.Raft, self string, electionTimeout time.Duration, last uint64) []FollowerStats {
	if !m.leader.Load() {
		return nil
	}
	f := r.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	t := &m.followers
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	var out []FollowerStats
	for _, s := range f.Configuration().Servers {
		if s.ID == raft.ServerID(self) || s.Suffrage != raft.Voter {
			continue
		}
		fs := FollowerStats{ID: string(s.ID), LastContact: -1}
		if p := t.m[s.ID]; p != nil {
			fs.Match = p.match
			fs.Syncing = p.snapshot > 0
			if !p.contact.IsZero() {
				fs.LastContact = now.Sub(p.contact)
			}
		}
		if last > fs.Match {
			fs.Lag = last - fs.Match
		}
		fs.Synced = !fs.Syncing && fs.LastContact >= 0 && fs.LastContact <= electionTimeout
		out = append(out, fs)
	}
	return out
}

// diskUsage returns the bytes of the Raft log and of the snapshots under data directory dir
// (storage.DiskUsage); zero for in-memory stores (no dir).
func diskUsage(dir string) (logBytes, snapshotBytes int64) {
	if dir == "" {
		return 0, 0
	}
	return storage.DiskUsage(filepath.Join(dir, "raft"))
}
