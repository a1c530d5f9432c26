package storage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/zkd-io/zkd/internal/third_party/raft"
)

// poolEntry is the data of log entry i in the pool tests: different for every index, so that a
// stale entry read back in place of a new one shows.
func poolEntry(i uint64, n int) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("entry %08d;", i)), n/15)
}

func storeEach(t *testing.T, w *walStore, from, to uint64, size int) {
	t.Helper()
	for i := from; i <= to; i++ { // one at a time: a segment rotates between appends
		if err := w.StoreLogs([]*raft.Log{{Index: i, Term: 1, Type: raft.LogCommand, Data: poolEntry(i, size)}}); err != nil {
			t.Fatal(err)
		}
	}
}

// sparesReady returns a channel closed once the store's pool holds at least n kept files. It is
// called before the deletions that fill the pool (the deleting goroutine reads the hook).
func sparesReady(w *walStore, n int) <-chan struct{} {
	ready := make(chan struct{})
	var once sync.Once
	w.deletes.pool.kept = func(k int) {
		if k >= n {
			once.Do(func() { close(ready) })
		}
	}
	return ready
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// Through a real WAL: the files of the segments a compaction drops become the next segments,
// zeroed, and every entry written into them reads back, before and after reopening, with none of
// the entries the files held before (the reused files are shorter-lived than their old contents:
// each new segment ends the log well before where the old one's frames ended).
func TestSegmentPoolReusesDroppedSegments(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the segment pool is used on Linux only")
	}
	const segSize, entry = 64 << 10, 4 << 10
	dir := t.TempDir()
	w, err := openWAL(dir, segSize, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	storeEach(t, w, 1, 400, entry)
	dropped := map[uint64]bool{}
	names, _ := filepath.Glob(filepath.Join(dir, "*.wal"))
	for _, n := range names {
		dropped[inode(t, n)] = true
	}
	filled := sparesReady(w, maxSpares)
	if err := w.DeleteRange(1, 380); err != nil {
		t.Fatal(err)
	}
	select {
	case <-filled:
	case <-time.After(10 * time.Second):
		t.Fatalf("the pool holds %d kept segment files; want %d", w.deletes.pool.spares(), maxSpares)
	}
	if spares, _ := filepath.Glob(filepath.Join(dir, "*"+spareSuffix)); len(spares) != maxSpares {
		t.Fatalf("%d kept files in the directory; want %d", len(spares), maxSpares)
	}

	// Fill a few segments and leave the last one part-written: it is the tail the next open
	// recovers by scanning, where stale frames past its end would be taken for entries.
	storeEach(t, w, 401, 440, entry)
	reused := 0
	names, _ = filepath.Glob(filepath.Join(dir, "*.wal"))
	for _, n := range names {
		if dropped[inode(t, n)] {
			reused++
		}
	}
	if reused < 2 {
		t.Fatalf("%d of %d segment files are dropped segments' files; want the new segments in them", reused, len(names))
	}
	check := func(w *walStore) {
		t.Helper()
		if last, err := w.LastIndex(); err != nil || last != 440 {
			t.Fatalf("last index %d, %v; want 440", last, err)
		}
		for i := uint64(381); i <= 440; i++ {
			var l raft.Log
			if err := w.GetLog(i, &l); err != nil {
				t.Fatalf("entry %d: %v", i, err)
			}
			if !bytes.Equal(l.Data, poolEntry(i, entry)) {
				t.Fatalf("entry %d reads back different bytes", i)
			}
		}
	}
	check(w)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w, err = openWAL(dir, segSize, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	check(w)
	if spares, _ := filepath.Glob(filepath.Join(dir, "*"+spareSuffix)); len(spares) != 0 {
		t.Fatalf("%d kept files left after reopening; an earlier run's are deleted", len(spares))
	}
}

// A kept file an earlier run left (its zeros may never have reached the disk) is deleted when
// the log is opened, not reused.
func TestSegmentPoolDeletesEarlierRunsFiles(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "00000000000000ff"+spareSuffix)
	if err := os.WriteFile(junk, bytes.Repeat([]byte{0xa5}, 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	p := openTestPool(t, dir, 64<<10)
	if _, err := os.Stat(junk); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an earlier run's kept file is still there (%v)", err)
	}
	if f := p.take("00000000000000000001-0000000000000001.wal", 64<<10); f != nil {
		t.Fatal("an empty pool handed out a file")
	}
}

// keep zeroes the whole file, at the pool's size whatever size it had; take never replaces a
// file, hands out nothing of another size, and the file it hands out is the kept one.
func TestSegmentPoolKeepAndTake(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the segment pool is used on Linux only")
	}
	const size = 3<<20 + 4096 // not a whole number of zeroing chunks
	dir := t.TempDir()
	p := openTestPool(t, dir, size)
	for i, n := range []int{size + 12345, 1000} { // a segment that ran over its size, and a short one
		name := fmt.Sprintf("old%d.wal", i)
		if err := os.WriteFile(filepath.Join(dir, name), bytes.Repeat([]byte{0x5a}, n), 0o644); err != nil {
			t.Fatal(err)
		}
		if !p.keep(name) {
			t.Fatalf("the pool refused %s with %d kept", name, p.spares())
		}
	}
	if f := p.take("other.wal", size-1); f != nil {
		t.Fatal("the pool handed out a file of another size")
	}
	existing := filepath.Join(dir, "taken.wal")
	if err := os.WriteFile(existing, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	if f := p.take("taken.wal", size); f != nil {
		t.Fatal("take replaced an existing file")
	}
	if b, _ := os.ReadFile(existing); string(b) != "keep me" {
		t.Fatalf("the existing file now holds %d bytes", len(b))
	}
	f := p.take("new.wal", size)
	if f == nil {
		t.Fatal("the pool handed out nothing")
	}
	f.Close()
	b, err := os.ReadFile(filepath.Join(dir, "new.wal"))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != size || !bytes.Equal(b, make([]byte, size)) {
		t.Fatalf("the file handed out has %d bytes, not all zero; want %d zeros", len(b), size)
	}
	for range maxSpares {
		name := "more.wal"
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		p.keep(name)
	}
	if n := p.spares(); n != maxSpares {
		t.Fatalf("the pool holds %d files; want at most %d", n, maxSpares)
	}
}

// Short of space, the pool keeps nothing more and deletes what it holds.
func TestSegmentPoolGivesUpFilesWhenSpaceIsShort(t *testing.T) {
	const size = 64 << 10
	dir := t.TempDir()
	p := openTestPool(t, dir, size)
	var free uint64 = keepMinFree * size
	p.free = func() (uint64, bool) { return free, true }
	for i := range 3 {
		name := fmt.Sprintf("old%d.wal", i)
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			free--
		}
		if kept := p.keep(name); kept != (i < 2) {
			t.Fatalf("keep(%s) with %d bytes free = %v", name, free, kept)
		}
	}
	if n := p.spares(); n != 0 {
		t.Fatalf("the pool still holds %d files short of space", n)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*"+spareSuffix)); len(left) != 0 {
		t.Fatalf("kept files left on disk: %v", left)
	}
}

// On a file system without renameat2's NOREPLACE the pool stops keeping files (it could never
// hand one out), deletes those it holds, and Create goes on making segments as before.
func TestSegmentPoolStopsWithoutNoReplace(t *testing.T) {
	const size = 64 << 10
	dir := t.TempDir()
	p := openTestPool(t, dir, size)
	p.free = func() (uint64, bool) { return 1 << 40, true }
	p.rename = func(from, to string) error {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: syscall.EINVAL}
	}
	for i := range 2 {
		name := fmt.Sprintf("old%d.wal", i)
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
		if !p.keep(name) {
			t.Fatal("the pool refused a file before it knew the rename fails")
		}
	}
	if f := p.take("new.wal", size); f != nil {
		t.Fatal("take handed out a file although the rename failed")
	}
	if n := p.spares(); n != 0 {
		t.Fatalf("the pool still holds %d files", n)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*"+spareSuffix)); len(left) != 0 {
		t.Fatalf("kept files left on disk: %v", left)
	}
	name := "old9.wal"
	if err := os.WriteFile(filepath.Join(dir, name), make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	if p.keep(name) {
		t.Fatal("the pool kept a file after the rename was found not to work")
	}
}

// openTestPool opens a pool of size-byte files in dir that logs nowhere.
func openTestPool(t *testing.T, dir string, size int64) *segmentPool {
	t.Helper()
	p, err := newSegmentPool(dir, size, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	return p
}
