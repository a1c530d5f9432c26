package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/hashicorp/go-hclog"
)

// segmentPool keeps the files of log segments raft-wal has dropped, written over with zeros, and
// hands them back to raft-wal as its next segments.
//
// Why: a write into a new file lands in page-cache pages the kernel has to allocate; a write
// over pages of a file that is still cached copies into pages that are already there. On the
// project's test machine (a VM whose freed memory goes back to the host) writing 250 MB into a
// new file took 70-290 ms of system time, over the same file's cached pages 30 ms (dd, 256 KiB
// blocks). With 256 KiB values the log's pwrite was half of a standalone server's CPU, nearly
// all of it in the kernel's copy into fresh pages. Zeroing a kept file costs another pass over
// cached pages, far less than fresh pages cost. A server whose log rolls slowly (small values)
// rarely takes from the pool; it is the large-value workloads whose log rolls every fraction of
// a second that gain.
//
// Why it cannot lose or damage a log byte:
//   - raft-wal drops a segment (Delete) only after it has committed metadata without it and
//     every reader of the segment has let go of it (the finalizer of the last state that had
//     it). From then on no one reads the file, and the next open of the log deletes it if it is
//     still there.
//   - The pool first renames it out of raft-wal's names (raft-wal lists only names ending in
//     .wal), so nothing written to it afterwards can be taken for a segment.
//   - A kept file becomes a segment only once all of it durably reads as zeros: zeros written
//     over the whole segment size and fsynced, then renamed to the new segment's name (never
//     replacing a file) and the directory fsynced, before raft-wal writes its header. That is
//     exactly what a fresh preallocated segment reads as, so raft-wal's recovery (which scans
//     the tail segment up to the first zero frame header) and zkd's entry checks see the same.
//   - A crash at any point leaves either a file outside raft-wal's names, deleted at the next
//     open (whether its zeros were made durable is not known then), or a zeroed segment file
//     under a name the metadata may not yet know, which raft-wal deletes at open as it deletes
//     any segment file it does not know.
//
// The pool holds at most maxSpares files: disk space stays at the log's high-water mark (as a
// preallocated circular log's does) and no more. It keeps files only while the file system has
// plenty of room (keepMinFree segments' worth), and gives up those it holds once it has not, so
// the disk guard (diskguard.go) and the snapshots never compete with it for the last space. On a
// small volume, where segments are sized to an eighth of the free space, it never keeps any.
type segmentPool struct {
	dir  string
	size int64 // raft-wal's segment size: the only size Create asks for and the pool keeps
	log  hclog.Logger
	free func() (uint64, bool) // the free space on dir's file system; tests replace it
	// rename renames without replacing (renameNoReplace); tests replace it.
	rename func(from, to string) error
	// kept, if set (by tests, before the deletions that fill the pool), is told how many kept
	// files are ready each time keep adds one.
	kept func(ready int)

	mu    sync.Mutex
	ready []string // names in dir of kept files: zeroed, durable, size bytes each
	next  uint64   // numbers the kept files' names
	off   bool     // the file system cannot rename without replacing: keep nothing
}

const (
	// spareSuffix ends the names of kept files. raft-wal ignores every name not ending in .wal.
	spareSuffix = ".spare"
	// maxSpares bounds the kept files. A snapshot of a tree of large values comes every 512 MiB
	// or so of log (SnapshotBytes), dropping as many 64 MiB segments as the log grew since the
	// last one; eight is that many.
	maxSpares = 8
	// keepMinFree is how many segments' worth of free space the pool needs to keep a file.
	keepMinFree = 4 * maxSpares
)

// newSegmentPool deletes the kept files an earlier run left in dir and returns an empty pool
// for segments of size bytes.
func newSegmentPool(dir string, size int64, log hclog.Logger) (*segmentPool, error) {
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), spareSuffix) {
			// Removed at once, not gently: nothing appends to the log while it opens.
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return nil, err
			}
		}
	}
	return &segmentPool{dir: dir, size: size, log: log, free: func() (uint64, bool) { return DiskFree(dir) },
		rename: renameNoReplace}, nil
}

// keep takes the file of a dropped segment into the pool, zeroing it first. It reports whether
// it took it; if not, the caller deletes the file as before. keep is called from one goroutine
// at a time (laterDeletes's), off raft-wal's write path.
func (p *segmentPool) keep(name string) bool {
	if free, ok := p.free(); !ok || free < keepMinFree*uint64(p.size) {
		p.drain()
		return false
	}
	p.mu.Lock()
	if p.off || len(p.ready) >= maxSpares {
		p.mu.Unlock()
		return false
	}
	p.next++
	spare := fmt.Sprintf("%016x%s", p.next, spareSuffix)
	p.mu.Unlock()
	path := filepath.Join(p.dir, spare)
	if err := os.Rename(filepath.Join(p.dir, name), path); err != nil {
		return false
	}
	if err := zeroWhole(path, p.size); err != nil {
		p.log.Warn("could not zero a dropped log segment for reuse; deleting it", "file", path, "err", err)
		if err := removeGently(path); err != nil {
			p.log.Error("failed to delete an old log segment", "file", path, "err", err)
		}
		return true
	}
	p.mu.Lock()
	p.ready = append(p.ready, spare)
	ready := len(p.ready)
	p.mu.Unlock()
	if p.kept != nil {
		p.kept(ready)
	}
	return true
}

// take renames a kept file to name and returns it open for writing, or nil when the pool has
// none of size bytes or the rename fails (the caller then creates the file as before).
func (p *segmentPool) take(name string, size int64) *os.File {
	if size != p.size {
		return nil
	}
	p.mu.Lock()
	if len(p.ready) == 0 {
		p.mu.Unlock()
		return nil
	}
	spare := p.ready[len(p.ready)-1]
	p.ready = p.ready[:len(p.ready)-1]
	p.mu.Unlock()
	from, to := filepath.Join(p.dir, spare), filepath.Join(p.dir, name)
	if err := p.rename(from, to); err != nil {
		p.log.Warn("could not reuse a kept log segment file", "file", from, "err", err)
		_ = os.Remove(from)
		if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOSYS) || errors.Is(err, errors.ErrUnsupported) {
			// The file system has no renameat2 NOREPLACE: stop keeping files only to delete them.
			// Not drain(): this runs inside raft-wal's Create, on the write path, where
			// removeGently's stepwise truncation would hold up the append; plain unlinks do not.
			p.mu.Lock()
			p.off = true
			names := p.ready
			p.ready = nil
			p.mu.Unlock()
			for _, n := range names {
				_ = os.Remove(filepath.Join(p.dir, n))
			}
		}
		return nil
	}
	f, err := os.OpenFile(to, os.O_RDWR, 0)
	if err == nil {
		err = syncDir(p.dir)
		if err != nil {
			_ = f.Close()
		}
	}
	if err != nil {
		// The file is a zeroed segment file now; remove it so that Create can make it afresh.
		p.log.Warn("could not reuse a kept log segment file", "file", to, "err", err)
		_ = os.Remove(to)
		return nil
	}
	return f
}

// drain deletes the kept files.
func (p *segmentPool) drain() {
	p.mu.Lock()
	names := p.ready
	p.ready = nil
	p.mu.Unlock()
	for _, n := range names {
		if err := removeGently(filepath.Join(p.dir, n)); err != nil {
			p.log.Error("failed to delete a kept log segment file", "file", n, "err", err)
		}
	}
}

// spares returns how many kept files are ready.
func (p *segmentPool) spares() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ready)
}

// zeroWhole makes the file at path size bytes of zeros, durably: written over in zeroChunk
// pieces (each written out before the next, so that the disk is not handed the whole file at
// once) and fsynced.
func zeroWhole(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return err
	}
	zeros := make([]byte, zeroChunk)
	for off := int64(0); off < size; off += zeroChunk {
		n := min(zeroChunk, size-off)
		if _, err := f.WriteAt(zeros[:n], off); err != nil {
			return err
		}
		writeOut(f, off, n)
	}
	return f.Sync()
}
