package storage

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"
)

func newTestZeroAheadFS(t *testing.T) *zeroAheadFS {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the log is zeroed ahead only on Linux")
	}
	vfs, stop := newZeroAheadFS(hclog.NewNullLogger(), nil)
	t.Cleanup(stop)
	return vfs.(*zeroAheadFS)
}

// settledLead is how far past the end of the last append the zeroer is sure to have written
// once it rests: it stops zeroAhead past the appends it has seen, and an append wakes it again
// only once that lead has shrunk below zeroAhead-zeroChunk. So when it ran ahead while appends
// were still coming, it may rest anywhere between the two.
const settledLead = zeroAhead - zeroChunk

// waitZeroed waits until the zeroer has written zeros up to settledLead past end in f, or f's
// end, or until f's appends are too large to be zeroed ahead.
func waitZeroed(t *testing.T, z *zeroAheadFS, f *zeroFile, end int64) {
	t.Helper()
	want := end + settledLead
	done := func() bool { return f.frontier >= min(want, f.size) || f.avg > zeroMaxAppend }
	late := false
	timer := time.AfterFunc(30*time.Second, func() {
		z.mu.Lock()
		late = true
		z.mu.Unlock()
		z.cond.Broadcast()
	})
	defer timer.Stop()
	z.mu.Lock()
	for !done() && !late {
		z.cond.Wait() // the zeroer broadcasts each time it moves the frontier
	}
	ok, got := done(), f.frontier
	z.mu.Unlock()
	if !ok {
		t.Fatalf("the zeroer reached %d, want %d", got, want)
	}
}

// Appends of every size, some running into the range being zeroed and some rewriting after a
// failed append, leave exactly their bytes in the file, and zeros everywhere else.
func TestZeroAheadKeepsEveryAppendedByte(t *testing.T) {
	z := newTestZeroAheadFS(t)
	dir := t.TempDir()
	const size = 24 << 20
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 1))
		name := "seg-" + string(rune('a'+seed))
		wf, err := z.Create(dir, name, size)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]byte, size)
		off := int64(0)
		for off < size-(4<<20) {
			var n int
			switch rng.IntN(10) {
			case 0: // large: runs past the zeroer into ranges it may be writing
				n = 1<<20 + rng.IntN(3<<20)
			case 1: // a failed append, rewritten from where it began
				p := make([]byte, 1+rng.IntN(8<<10))
				fill(rng, p)
				if _, err := wf.WriteAt(p, off); err != nil {
					t.Fatal(err)
				}
				copy(want[off:], p)
				n = 1 + rng.IntN(8<<10)
			default:
				n = 1 + rng.IntN(16<<10)
			}
			p := make([]byte, n)
			fill(rng, p)
			if _, err := wf.WriteAt(p, off); err != nil {
				t.Fatal(err)
			}
			// A failed append's bytes beyond the rewrite stay in the file, as they do in
			// raft-wal's segments: the reader stops at the last commit frame.
			copy(want[off:], p)
			if rng.IntN(50) == 0 {
				waitZeroed(t, z, wf.(*zeroFile), off+int64(n))
			}
			off += int64(n)
		}
		if err := wf.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := wf.Close(); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != size {
			t.Fatalf("seed %d: file is %d bytes, want %d", seed, len(got), size)
		}
		if i := firstDiff(got, want); i >= 0 {
			t.Fatalf("seed %d: byte %d is %#x, want %#x (appends ended at %d)", seed, i, got[i], want[i], off)
		}
	}
}

// fill writes random non-zero bytes, so that a byte zeroed over an append shows.
func fill(rng *rand.Rand, p []byte) {
	for i := range p {
		p[i] = byte(1 + rng.IntN(255))
	}
}

func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return len(a)
}

// The zeroer turns the preallocated (unwritten) blocks ahead of the appends into written ones,
// which is the point: on file systems that report unwritten extents as holes, the range ahead
// of the last append turns from a hole into data. A file never appended to is left alone.
func TestZeroAheadWritesTheBlocksAhead(t *testing.T) {
	z := newTestZeroAheadFS(t)
	dir := t.TempDir()
	const size = 32 << 20
	wf, err := z.Create(dir, "seg", size)
	if err != nil {
		t.Fatal(err)
	}
	defer wf.Close()
	f := wf.(*zeroFile)
	if f.os == nil {
		t.Fatal("a file of the wal's file system is not zeroed")
	}
	hole, err := unix.Seek(int(f.os.Fd()), 0, unix.SEEK_HOLE)
	if err != nil || hole != 0 {
		t.Skipf("this file system does not report preallocated blocks as holes (SEEK_HOLE: %d, %v)", hole, err)
	}

	// Untouched until the first append says where the entries end.
	other, err := z.Create(dir, "untouched", size)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	const appended = 3<<20 + 100
	entry := bytes.Repeat([]byte{7}, 4<<10)
	for off := int64(0); off < appended; off += int64(len(entry)) {
		if _, err := wf.WriteAt(entry[:min(len(entry), int(appended-off))], off); err != nil {
			t.Fatal(err)
		}
	}
	waitZeroed(t, z, f, appended)
	hole, err = unix.Seek(int(f.os.Fd()), 0, unix.SEEK_HOLE)
	if err != nil {
		t.Fatal(err)
	}
	if hole < appended+settledLead {
		t.Fatalf("the first hole is at %d; want the blocks up to %d written", hole, appended+settledLead)
	}
	if hole >= size {
		t.Fatalf("the whole file was written (first hole at %d): the zeroer should stay %d ahead", hole, zeroAhead)
	}
	if h, err := unix.Seek(int(other.(*zeroFile).os.Fd()), 0, unix.SEEK_HOLE); err != nil || h != 0 {
		t.Fatalf("a file never appended to was written: first hole at %d (%v)", h, err)
	}
}

// An append into the range the zeroer is writing waits for it; its bytes are never zeroed over.
func TestZeroAheadAppendWaitsForTheRangeBeingZeroed(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the log is zeroed ahead only on Linux")
	}
	vfs, stop := newZeroAheadFS(hclog.NewNullLogger(), nil)
	defer stop()
	z := vfs.(*zeroAheadFS)
	claimed, release := make(chan struct{}), make(chan struct{})
	z.mu.Lock()
	z.claimed = func() {
		select {
		case claimed <- struct{}{}:
			<-release
		default:
		}
	}
	z.mu.Unlock()

	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(7, 7))
	wf, err := z.Create(dir, "seg", 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	first := make([]byte, 100)
	fill(rng, first)
	if _, err := wf.WriteAt(first, 0); err != nil {
		t.Fatal(err)
	}
	<-claimed // the zeroer holds [100, 100+zeroChunk) and has not written it yet

	second := make([]byte, 2<<20)
	fill(rng, second)
	done := make(chan error, 1)
	go func() {
		_, err := wf.WriteAt(second, 100)
		done <- err
	}()
	// The append must wait for the zeroer. If it wrongly went ahead it is done by now, and the
	// zeros written after it show below; the wait only bounds how long a blocked append is given.
	select {
	case err := <-done:
		done <- err
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := wf.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "seg"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:100], first) {
		t.Fatal("the first append was zeroed over")
	}
	if i := firstDiff(got[100:100+len(second)], second); i >= 0 {
		t.Fatalf("the append into the range being zeroed was zeroed over from byte %d", 100+i)
	}
}
