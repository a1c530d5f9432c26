package consensus

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"time"

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
// the server answers with ZooKeeper's ThrottledOp: nothing was done, try again). Reads,
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
	diskReserveName = "reserve"
	diskReserveSize = 1 << 20
	diskMargin      = 1 << 20 // more than the need before a full node takes writes again
	diskPoll        = time.Second
	diskTransfer    = 3 * time.Second // between leadership transfers while still full
	diskRemind      = 5 * time.Minute
	diskCheckBytes  = 256 << 10 // appended between two looks at the free space on the write path
)

// diskNeed is the space a node needs to keep taking writes: a new segment and room for
// metadata and the reserve.
func diskNeed(segSize int) uint64 { return uint64(segSize) + 2*diskReserveSize }

// isStorageFault reports whether a failed write is the disk's trouble rather than the request's:
// no space, no quota, or an I/O error. The node treats them alike: it refuses client writes and
// waits for the disk rather than stepping down or electing itself over and over.
func isStorageFault(err error) bool {
	return isNoSpace(err) || errors.Is(err, syscall.EIO)
}

// isNoSpace reports whether err is a full disk or an exhausted quota.
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// makeReserve creates the reserve file in dir if it is missing and there is room.
func makeReserve(dir string) {
	path := filepath.Join(dir, diskReserveName)
	if st, err := os.Stat(path); err == nil && st.Size() == diskReserveSize {
		return
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return
	}
	// Written, not truncated to size: a sparse file would free nothing.
	_, err = f.Write(make([]byte, diskReserveSize))
	if err == nil {
		err = f.Sync()
	}
	f.Close()
	if err != nil {
		os.Remove(path)
	}
}

// releaseReserve deletes the reserve file; it reports whether there was one.
func releaseReserve(dir string) bool {
	return os.Remove(filepath.Join(dir, diskReserveName)) == nil
}

// noteStoreError is called with every failed log or metadata write.
func (n *Node) noteStoreError(err error) {
	if isStorageFault(err) || errors.Is(err, wal.ErrSealed) {
		n.log.Debug("a log store write failed for want of space", "err", err)
		free, _ := diskFree(filepath.Join(n.cfg.Dir, "raft"))
		n.markFull(free)
		return
	}
	n.log.Error("a write to the log store failed", "dir", n.cfg.Dir, "err", err)
}

// markFull records that the disk is full, logging it on the change.
func (n *Node) markFull(free uint64) {
	if !n.diskFull.Swap(true) {
		n.log.Error("the data directory's disk is full: client writes are refused until space is freed",
			"dir", n.cfg.Dir, "free_bytes", free, "needed_bytes", diskNeed(n.segSize))
	}
}

// spaceOK looks at the free space: below the need, the node counts as full. It reports whether
// there is at least the need (a full node takes writes again only with a margin more; the
// guard's ticker decides that).
func (n *Node) spaceOK() bool {
	free, ok := diskFree(filepath.Join(n.cfg.Dir, "raft"))
	if !ok {
		return true
	}
	if free < diskNeed(n.segSize) {
		n.markFull(free)
		return false
	}
	return true
}

// diskWait is the store's question when a write failed for want of space: wait for space (a
// standalone server, or a follower: failing would make Raft step down or, alone, hold
// elections), or fail (a leader with other voters: it steps down and a follower with room leads).
func (n *Node) diskWait() bool {
	r := n.startedRaft()
	if r == nil {
		return false // bootstrap, before Raft runs
	}
	return r.State() != raft.Leader || !hasOtherVoters(r, n.cfg.ID)
}

// warnSmallVolume warns at start when the volume cannot hold what the log may grow to before a
// snapshot (SnapshotBytes) besides the guard's need; a snapshot, about the tree's size, is
// written beside it too.
func (n *Node) warnSmallVolume(dir string) {
	free, ok := diskFree(dir)
	if ok && n.cfg.SnapshotBytes < 1<<62 && free < diskNeed(n.segSize)+n.cfg.SnapshotBytes {
		n.log.Warn("the data volume has less free space than the log may grow to before a snapshot; "+
			"writes will be refused when it runs low: add space, or lower snapSizeLimitInKb and snapCount",
			"dir", n.cfg.Dir, "free_bytes", free, "snapshot_bytes", n.cfg.SnapshotBytes)
	}
}

// runDiskGuard watches the space left on the data directory's file system.
func (n *Node) runDiskGuard(dir string, segSize int) {
	need := diskNeed(segSize)
	t := time.NewTicker(diskPoll)
	defer t.Stop()
	var lastTransfer, lastRemind time.Time
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		free, ok := diskFree(dir)
		if !ok {
			continue
		}
		full := n.diskFull.Load()
		switch {
		case !full && free < need:
			lastRemind = time.Now()
			n.markFull(free)
		case full && free >= need+diskMargin:
			makeReserve(filepath.Join(dir, walDirName))
			n.diskFull.Store(false)
			lastRemind = time.Time{}
			n.log.Info("the data directory has space again: client writes are taken", "dir", n.cfg.Dir, "free_bytes", free)
			continue
		case full && lastRemind.IsZero():
			lastRemind = time.Now() // marked full on the write path, which logged it
		case full && time.Since(lastRemind) >= diskRemind:
			lastRemind = time.Now()
			n.log.Error("the data directory's disk is still full", "dir", n.cfg.Dir, "free_bytes", free, "needed_bytes", need)
		}
		if n.diskFull.Load() && n.raft.State() == raft.Leader && time.Since(lastTransfer) >= diskTransfer && hasOtherVoters(n.raft, n.cfg.ID) {
			lastTransfer = time.Now()
			n.log.Warn("handing leadership to a follower: this server's disk is full", "dir", n.cfg.Dir)
			n.raft.LeadershipTransfer()
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
