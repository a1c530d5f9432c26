package storage

import (
	"path/filepath"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/zkd-io/zkd/internal/third_party/raft-wal/segment"
	"github.com/zkd-io/zkd/internal/third_party/raft-wal/types"
)

// laterDeletes is raft-wal's segment filer with the deletion of old segments moved to a goroutine
// of its own.
//
// raft-wal deletes the segments a head truncation (log compaction) dropped while it holds its
// write lock: each is an unlink and an fsync of the directory. After a run of large entries the
// compaction behind the next snapshot can drop dozens of 64 MiB segments, and every append waited
// for all of them: 270-440 ms stalls of every write in a standalone server (large values, then
// session churn, then large values again). Deleting them later is as safe as raft-wal's own
// order: the segment is gone from the committed metadata before Delete is called, and a segment
// file the metadata does not know is deleted when the log is next opened (which is also what
// happens when a crash comes between the two today).
type laterDeletes struct {
	types.SegmentFiler
	dir  string       // where the segment files are
	pool *segmentPool // keeps dropped segments' files for reuse; nil: every one is deleted
	log  hclog.Logger

	mu     sync.Mutex
	closed bool
	queue  chan segmentRef
	done   chan struct{}
}

type segmentRef struct{ base, id uint64 }

// maxQueuedDeletes bounds the deletions waiting; past it Delete deletes in the caller, as raft-wal
// does.
const maxQueuedDeletes = 1024

func newLaterDeletes(inner types.SegmentFiler, dir string, pool *segmentPool, log hclog.Logger) *laterDeletes {
	d := &laterDeletes{SegmentFiler: inner, dir: dir, pool: pool, log: log, queue: make(chan segmentRef, maxQueuedDeletes), done: make(chan struct{})}
	go d.run()
	return d
}

// Delete queues the segment's deletion.
func (d *laterDeletes) Delete(base, id uint64) error {
	d.mu.Lock()
	if !d.closed {
		select {
		case d.queue <- segmentRef{base, id}:
			d.mu.Unlock()
			return nil
		default:
		}
	}
	d.mu.Unlock()
	return d.SegmentFiler.Delete(base, id)
}

func (d *laterDeletes) run() {
	defer close(d.done)
	for s := range d.queue {
		name := segment.FileName(types.SegmentInfo{BaseIndex: s.base, ID: s.id})
		if d.pool != nil && d.pool.keep(name) {
			continue
		}
		// Empty it gently first (see shrinkGently): a 64 MiB segment unlinked at once stalls the
		// appends' fsyncs like a snapshot does.
		_ = shrinkGently(filepath.Join(d.dir, name), nil)
		if err := d.SegmentFiler.Delete(s.base, s.id); err != nil {
			// As raft-wal does: not fatal, the file is left behind (and deleted at the next open).
			d.log.Error("failed to delete an old log segment", "baseIndex", s.base, "id", s.id, "err", err)
		}
	}
}

// close deletes what is queued and stops the goroutine. Later deletions happen in the caller.
func (d *laterDeletes) close() {
	d.mu.Lock()
	if !d.closed {
		d.closed = true
		close(d.queue)
	}
	d.mu.Unlock()
	<-d.done
}
