package consensus

// Trailing log entries.
//
// Raft keeps TrailingLogs entries behind each snapshot, so that a follower a little behind
// catches up from the log rather than by receiving the whole snapshot. With large entries that
// count is far more log than snapshot: 10240 entries of 256 KiB are 2.5 GiB of log kept on disk
// behind a tree of 256 MiB, and a follower that far behind gets the snapshot sooner than the
// log. ZooKeeper decides by size too: its leader sends a snapshot instead of the log once the
// log to send is larger than a third of the snapshot (snapshotSizeFactor, 0.33).
//
// So the entries kept are at most TrailingLogs, and at most as many as fit in a third of the
// tree's data or trailMinBytes, whichever is more, at the average size of the entries applied
// since the last snapshot; never fewer than trailMinEntries. Raft reads the setting when it
// compacts the log, right after the snapshot whose start set it. Which entries are kept decides
// only how a lagging follower catches up, never what is committed or applied.
const (
	trailMinBytes   = 64 << 20
	trailMinEntries = 64
)

// trailingLogs returns how many entries to keep behind a snapshot, given the configured limit,
// the bytes and entries applied since the last snapshot and the tree's data size.
func trailingLogs(limit, bytes, entries uint64, dataSize int64) uint64 {
	if entries == 0 || bytes == 0 {
		return limit
	}
	avg := max(bytes/entries, 1)
	budget := max(uint64(trailMinBytes), uint64(max(dataSize, 0))/3)
	return min(limit, max(budget/avg, trailMinEntries))
}

// trailFor sets Raft's TrailingLogs for the compaction behind the snapshot starting now. It is
// called on the FSM's goroutine only (fsm.Snapshot), the one place that changes Raft's reloadable
// configuration.
func (n *Node) trailFor(bytes, entries uint64, dataSize int64) {
	r := n.startedRaft()
	if r == nil {
		return
	}
	rc := r.ReloadableConfig()
	want := trailingLogs(n.cfg.TrailingLogs, bytes, entries, dataSize)
	if rc.TrailingLogs == want {
		return
	}
	rc.TrailingLogs = want
	if err := r.ReloadConfig(rc); err != nil {
		n.log.Warn("could not change the log entries kept behind snapshots", "entries", want, "err", err)
		return
	}
	n.log.Debug("log entries kept behind snapshots", "entries", want, "average_entry_bytes", bytes/entries)
}
