package consensus

import (
	"errors"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/zkd-io/zkd/internal/storage"
	"github.com/zkd-io/zkd/internal/third_party/raft"
	wal "github.com/zkd-io/zkd/internal/third_party/raft-wal"
)

// A full disk.
//
// The log's segment files are preallocated, so appends into the current segment succeed even on
// a full file system; what fails is the next segment (and the metadata file, and snapshots).
// The guard keeps that from happening under client load: once the space left on the data
// directory's file system is below what one more segment and some metadata need (diskNeed),
// the node counts as full and refuses client writes before proposing them (ErrDiskFull, which
// the server answers with OperationTimeout: nothing was done, try again). Reads,
// watches, pings, session creation and expiry go on: sessions are small entries that fit in the
// current segment. A full leader of a cluster hands leadership to a follower. Once space is back
// (above the need by a margin), writes are taken again. A write that still meets ENOSPC (the
// disk filled faster than the guard looked) marks the node full at once.
//
// The metadata file is replaced by a new copy on every change, which needs a little space even on
// a full disk; a reserve file beside it (diskReserveName) is given up to make room, and made again
// when space is back.

// ErrDiskFull reports a client write refused because the data directory's disk is full. Nothing
// was proposed.
var ErrDiskFull = errors.New("consensus: the data directory's disk is full")

const (
	diskMargin   = 1 << 20 // more than the need before a full node takes writes again
	diskPoll     = time.Second
	diskTransfer = 3 * time.Second // between leadership transfers while still full
	diskRemind   = 5 * time.Minute
)

// diskGuard is a node's view of its data directory's free space: whether the disk counts as
// full, and the hooks the log store calls when a write fails (storage.Options).
type diskGuard struct {
	n       *Node
	full    atomic.Bool // the disk is full (Stats.DiskFull)
	segSize int         // the log's segment size (0 in memory)
}

// noteStoreError is called with every failed log or metadata write.
func (g *diskGuard) noteStoreError(err error) {
	if storage.IsStorageFault(err) || errors.Is(err, wal.ErrSealed) {
		g.n.log.Debug("a log store write failed for want of space", "err", err)
		free, _ := storage.DiskFree(filepath.Join(g.n.cfg.Dir, "raft"))
		g.markFull(free)
		return
	}
	g.n.log.Error("a write to the log store failed", "dir", g.n.cfg.Dir, "err", err)
}

// markFull records that the disk is full, logging it on the change.
func (g *diskGuard) markFull(free uint64) {
	if !g.full.Swap(true) {
		g.n.log.Error("the data directory's disk is full: client writes are refused until space is freed",
			"dir", g.n.cfg.Dir, "free_bytes", free, "needed_bytes", storage.DiskNeed(g.segSize))
	}
}

// spaceOK looks at the free space: below the need, the node counts as full. It reports whether
// there is at least the need (a full node takes writes again only with a margin more; the
// guard's ticker decides that).
func (g *diskGuard) spaceOK() bool {
	free, ok := storage.DiskFree(filepath.Join(g.n.cfg.Dir, "raft"))
	if !ok {
		return true
	}
	if free < storage.DiskNeed(g.segSize) {
		g.markFull(free)
		return false
	}
	return true
}

// wait is the store's question when a write failed for want of space: wait for space (a
// standalone server, or a follower: failing would make Raft step down or, alone, hold
// elections), or fail (a leader with other voters: it steps down and a follower with room leads).
func (g *diskGuard) wait() bool {
	r := g.n.startedRaft()
	if r == nil {
		return false // bootstrap, before Raft runs
	}
	return r.State() != raft.Leader || !hasOtherVoters(r, g.n.cfg.ID)
}

// warnSmallVolume warns at start when the volume cannot hold what the log may grow to before a
// snapshot (SnapshotBytes) besides the guard's need; a snapshot, about the tree's size, is
// written beside it too.
func (g *diskGuard) warnSmallVolume(dir string) {
	free, ok := storage.DiskFree(dir)
	if ok && g.n.cfg.SnapshotBytes < 1<<62 && free < storage.DiskNeed(g.segSize)+g.n.cfg.SnapshotBytes {
		g.n.log.Warn("the data volume has less free space than the log may grow to before a snapshot; "+
			"writes will be refused when it runs low: add space, or lower snapSizeLimitInKb and snapCount",
			"dir", g.n.cfg.Dir, "free_bytes", free, "snapshot_bytes", g.n.cfg.SnapshotBytes)
	}
}

// run watches the space left on the data directory's file system.
func (g *diskGuard) run(dir string) {
	need := storage.DiskNeed(g.segSize)
	t := time.NewTicker(diskPoll)
	defer t.Stop()
	var lastTransfer, lastRemind time.Time
	for {
		select {
		case <-g.n.stop:
			return
		case <-t.C:
		}
		free, ok := storage.DiskFree(dir)
		if !ok {
			continue
		}
		full := g.full.Load()
		switch {
		case !full && free < need:
			lastRemind = time.Now()
			g.markFull(free)
		case full && free >= need+diskMargin:
			storage.MakeReserve(storage.WALDir(dir))
			g.full.Store(false)
			lastRemind = time.Time{}
			g.n.log.Info("the data directory has space again: client writes are taken", "dir", g.n.cfg.Dir, "free_bytes", free)
			continue
		case full && lastRemind.IsZero():
			lastRemind = time.Now() // marked full on the write path, which logged it
		case full && time.Since(lastRemind) >= diskRemind:
			lastRemind = time.Now()
			g.n.log.Error("the data directory's disk is still full", "dir", g.n.cfg.Dir, "free_bytes", free, "needed_bytes", need)
		}
		if g.full.Load() && g.n.raft.State() == raft.Leader && time.Since(lastTransfer) >= diskTransfer && hasOtherVoters(g.n.raft, g.n.cfg.ID) {
			lastTransfer = time.Now()
			g.n.log.Warn("handing leadership to a follower: this server's disk is full", "dir", g.n.cfg.Dir)
			g.n.raft.LeadershipTransfer()
		}
	}
}

// hasOtherVoters reports whether r's configuration has a voter besides self.
func hasOtherVoters(r *raft.Raft, self string) bool {
	f := r.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter && s.ID != raft.ServerID(self) {
			return true
		}
	}
	return false
}
