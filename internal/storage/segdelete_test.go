package storage

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/hashicorp/go-hclog"

	"github.com/zkd-io/zkd/internal/third_party/raft"
	"github.com/zkd-io/zkd/internal/third_party/raft-wal/segment"
	"github.com/zkd-io/zkd/internal/third_party/raft-wal/types"
)

// gatedFiler is a segment filer whose Delete waits for the test to open its gate.
type gatedFiler struct {
	types.SegmentFiler
	gate chan struct{}
	mu   sync.Mutex
	done []uint64
}

func (g *gatedFiler) Delete(base, id uint64) error {
	<-g.gate
	g.mu.Lock()
	g.done = append(g.done, id)
	g.mu.Unlock()
	return nil
}

func (g *gatedFiler) deleted() []uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]uint64(nil), g.done...)
}

// Delete returns while the deletion itself is held up (it used to run under the WAL's write
// lock), close waits for every queued deletion, and a Delete after close deletes at once.
func TestLaterDeletes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := &gatedFiler{gate: make(chan struct{})}
		d := newLaterDeletes(inner, t.TempDir(), nil, hclog.NewNullLogger())
		var returned atomic.Int32
		go func() {
			for id := uint64(1); id <= 3; id++ {
				if err := d.Delete(id*100, id); err != nil {
					t.Error(err)
				}
				returned.Add(1)
			}
		}()
		synctest.Wait() // everything is blocked: the deleter on the gate, the caller done or stuck
		if n := returned.Load(); n != 3 {
			t.Fatalf("%d of 3 Delete calls returned while the deletion was held up", n)
		}
		if got := inner.deleted(); len(got) != 0 {
			t.Fatalf("deleted %v before the gate opened", got)
		}
		close(inner.gate)
		d.close()
		if got := inner.deleted(); len(got) != 3 {
			t.Fatalf("after close: deleted %v; want the 3 queued", got)
		}
		if err := d.Delete(400, 4); err != nil {
			t.Fatal(err)
		}
		if got := inner.deleted(); len(got) != 4 || got[3] != 4 {
			t.Fatalf("a Delete after close: deleted %v", got)
		}
	})
}

// Through a real WAL: compaction drops whole segments, and once the store is closed their files
// are gone while the log still reads from its new first index.
func TestCompactionDeletesSegments(t *testing.T) {
	dir := t.TempDir()
	w, err := openWAL(dir, 64<<10, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 4<<10)
	for i := uint64(1); i <= 200; i++ { // one at a time: a segment rotates between appends
		if err := w.StoreLogs([]*raft.Log{{Index: i, Term: 1, Type: raft.LogCommand, Data: data}}); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := filepath.Glob(filepath.Join(dir, "*.wal"))
	if len(before) < 5 {
		t.Fatalf("%d segments; the test needs several", len(before))
	}
	if err := w.DeleteRange(1, 180); err != nil {
		t.Fatal(err)
	}
	if first, err := w.FirstIndex(); err != nil || first != 181 {
		t.Fatalf("first index %d, %v; want 181", first, err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	after, _ := filepath.Glob(filepath.Join(dir, "*.wal"))
	if len(after) >= len(before) || len(after) > 2 {
		t.Fatalf("%d segments before compaction, %d after closing; want at most 2", len(before), len(after))
	}
	w, err = openWAL(dir, 64<<10, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var l raft.Log
	if err := w.GetLog(200, &l); err != nil || len(l.Data) != len(data) {
		t.Fatalf("reading the last entry after reopening: %v", err)
	}
}

// sizeAtDelete is a segment filer that records how large each segment file is when it is asked
// to delete it.
type sizeAtDelete struct {
	types.SegmentFiler
	dir   string
	sizes []int64
}

func (s *sizeAtDelete) Delete(base, id uint64) error {
	fi, err := os.Stat(filepath.Join(s.dir, segment.FileName(types.SegmentInfo{BaseIndex: base, ID: id})))
	if err != nil {
		return err
	}
	s.sizes = append(s.sizes, fi.Size())
	return nil
}

// A queued segment is emptied (gently, see shrinkGently) before it is deleted.
func TestLaterDeletesShrinkFirst(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, segment.FileName(types.SegmentInfo{BaseIndex: 100, ID: 7}))
	if err := os.WriteFile(name, make([]byte, removeChunk+1), 0o644); err != nil {
		t.Fatal(err)
	}
	inner := &sizeAtDelete{dir: dir}
	d := newLaterDeletes(inner, dir, nil, hclog.NewNullLogger())
	if err := d.Delete(100, 7); err != nil {
		t.Fatal(err)
	}
	d.close()
	if !slices.Equal(inner.sizes, []int64{0}) {
		t.Fatalf("segment sizes when deleted = %v; want [0]", inner.sizes)
	}
}
