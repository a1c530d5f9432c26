package storage

import (
	"os"
	"runtime"
	"sync"

	"github.com/hashicorp/go-hclog"

	walfs "github.com/zkd-io/zkd/internal/third_party/raft-wal/fs"
	"github.com/zkd-io/zkd/internal/third_party/raft-wal/types"
)

// zeroAheadFS is raft-wal's file system with the segment a log appends to written with zeros a
// few MiB ahead of the appends, by a goroutine of its own.
//
// raft-wal preallocates each segment with fallocate, which reserves the space as unwritten
// extents. The first write into an unwritten extent converts it, and on ext4 that conversion is
// metadata the next fsync has to commit: every append batch paid for it. An fsync of a small
// write over blocks already written is cheaper (on the project's 2-core test machine 100 against
// 140 µs, with a quarter less CPU), and a standalone server's writes wait on that fsync: with
// zeroing ahead zkbench's create went from 24-27k to 28-31k per second and its setData from 28k
// to 32-33k, each at 5-15 % less server CPU per write (scripts/bench/ab.sh, alternating rounds).
// Databases zero their journal files ahead for the same reason.
//
// Why it cannot lose or damage a log byte:
//   - The zeroer writes only at or beyond the furthest byte an append has begun writing in that
//     file (written), and marks the range it is writing as busy. An append that would touch
//     the busy range waits until it is done. Appends then overwrite zeros, as they overwrite the
//     zeros an unwritten extent reads as today.
//   - raft-wal's appends only move forward, except that after a failed append the next one
//     rewrites from where the failed one began, which is below written, so never in a range
//     the zeroer may touch.
//   - A file is zeroed only once it has been appended to: a tail segment reopened after a restart
//     holds entries, and where they end is known only from the first append.
//   - Zeros read exactly as unwritten extents do, so raft-wal's recovery, zkd's checks and a
//     crash in the middle of zeroing all see the same bytes as without it. The zeros need no
//     durability: they are written out with sync_file_range, not fsync.
//   - A failure while zeroing (a full disk on a file system that could not preallocate) stops
//     zeroing that file and nothing else: the log's appends do not depend on it.
//
// One goroutine serves the file most recently appended to; a segment that filled up and is no
// longer appended to is left as it is.
type zeroAheadFS struct {
	types.VFS
	log  hclog.Logger
	pool *segmentPool // where Create takes files already zeroed from; nil: none

	mu      sync.Mutex
	cond    *sync.Cond
	cur     *zeroFile // the file appended to most recently; nil when none
	stopped bool
	done    chan struct{}

	claimed func() // tests: called when the zeroer has claimed a range, before it writes
}

const (
	// zeroChunk is what the zeroer writes at a time, and zeroAhead how far past the appends it
	// keeps zeroing.
	zeroChunk = 1 << 20
	zeroAhead = 8 << 20
	// zeroMaxAppend: a file whose appends average more than this is not zeroed. The saving is
	// per fsync and the cost per byte: with 256 KiB entries, writing every block twice cost more
	// CPU per write than the cheaper fsyncs saved (250 against 320 µs per setData).
	zeroMaxAppend = 32 << 10
)

// newZeroAheadFS returns the file system raft-wal uses for dir's segments: zeroing ahead on
// Linux, where sync_file_range writes the zeros out without an fsync; plain elsewhere.
func newZeroAheadFS(log hclog.Logger, pool *segmentPool) (types.VFS, func()) {
	if runtime.GOOS != "linux" {
		return walfs.New(), func() {}
	}
	z := &zeroAheadFS{VFS: walfs.New(), log: log, pool: pool, done: make(chan struct{})}
	z.cond = sync.NewCond(&z.mu)
	go z.run()
	return z, z.close
}

// zeroFile is one segment file opened for writing. Its fields other than the file are guarded
// by the file system's mutex.
type zeroFile struct {
	types.WritableFile
	fs   *zeroAheadFS
	os   *os.File // the file the zeroer writes and writes out; nil: never zeroed
	size int64

	avg      int64 // the appends' moving average size
	written  int64 // the end of the furthest append begun; 0 until the first append
	frontier int64 // zeros written up to here, from written on
	busyFrom int64 // the range the zeroer is writing now; empty when busyFrom == busyTo
	busyTo   int64
}

func (z *zeroAheadFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	if z.pool != nil && dir == z.pool.dir {
		if f := z.pool.take(name, int64(size)); f != nil {
			zf := z.wrap(f, int64(size))
			zf.frontier = zf.size // zeros all through: nothing for the zeroer to do
			return zf, nil
		}
	}
	wf, err := z.VFS.Create(dir, name, size)
	if err != nil {
		return nil, err
	}
	return z.wrap(wf, int64(size)), nil
}

func (z *zeroAheadFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	wf, err := z.VFS.OpenWriter(dir, name)
	if err != nil {
		return nil, err
	}
	var size int64
	if f, ok := wf.(*os.File); ok {
		if st, err := f.Stat(); err == nil {
			size = st.Size()
		}
	}
	return z.wrap(wf, size), nil
}

func (z *zeroAheadFS) wrap(wf types.WritableFile, size int64) *zeroFile {
	f := &zeroFile{WritableFile: wf, fs: z, size: size}
	switch o := wf.(type) {
	case *walfs.File:
		f.os = &o.File
	case *os.File:
		f.os = o
	}
	return f
}

// WriteAt is an append (raft-wal writes nothing else through a writable file): it waits while
// the zeroer writes in its range, and moves the zeroer to this file.
func (f *zeroFile) WriteAt(p []byte, off int64) (int, error) {
	if f.os != nil {
		z := f.fs
		end := off + int64(len(p))
		z.mu.Lock()
		for off < f.busyTo && f.busyFrom < end {
			z.cond.Wait()
		}
		if end > f.written {
			f.written = end
			f.frontier = max(f.frontier, end)
		}
		f.avg += (int64(len(p)) - f.avg) / 8
		if z.cur != f || f.zeroable() && f.frontier-f.written < zeroAhead-zeroChunk {
			z.cur = f
			z.cond.Broadcast()
		}
		z.mu.Unlock()
	}
	return f.WritableFile.WriteAt(p, off)
}

// zeroable reports whether the zeroer has anything to do in f at all: f was appended to (so
// where its entries end is known), its appends are small, and zeros do not reach its end yet.
// The caller holds the file system's mutex.
func (f *zeroFile) zeroable() bool {
	return f.written > 0 && f.avg <= zeroMaxAppend && f.frontier < f.size
}

// Close stops the zeroer using the file before it is closed.
func (f *zeroFile) Close() error {
	z := f.fs
	z.mu.Lock()
	if z.cur == f {
		z.cur = nil
	}
	for f.busyFrom < f.busyTo {
		z.cond.Wait()
	}
	z.mu.Unlock()
	return f.WritableFile.Close()
}

// run is the zeroer.
func (z *zeroAheadFS) run() {
	defer close(z.done)
	zeros := make([]byte, zeroChunk)
	z.mu.Lock()
	defer z.mu.Unlock()
	for {
		f := z.cur
		switch {
		case z.stopped:
			return
		case f == nil || !f.zeroable() || f.frontier-f.written >= zeroAhead:
			z.cond.Wait()
			continue
		}
		from := f.frontier
		to := min(from+zeroChunk, f.size)
		f.busyFrom, f.busyTo = from, to
		z.mu.Unlock()
		if z.claimed != nil {
			z.claimed()
		}
		_, err := f.os.WriteAt(zeros[:to-from], from)
		if err == nil {
			writeOut(f.os, from, to-from)
		}
		z.mu.Lock()
		f.busyFrom, f.busyTo = 0, 0
		if err != nil {
			z.log.Debug("stopped zeroing a log segment ahead of its appends", "err", err)
			f.frontier = f.size
		} else {
			f.frontier = max(f.frontier, to)
		}
		z.cond.Broadcast()
	}
}

// close stops the zeroer. Files still open are then written without it.
func (z *zeroAheadFS) close() {
	z.mu.Lock()
	z.stopped = true
	z.cond.Broadcast()
	z.mu.Unlock()
	<-z.done
}
