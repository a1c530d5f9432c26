package storage

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/zkd-io/zkd/internal/third_party/raft"
)

// shrinkGently frees a file a chunk at a time from its end, each step on disk before the next.
func TestShrinkGently(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	const size = 2*removeChunk + removeChunk/2
	if err := os.WriteFile(path, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	var steps []int64
	err := shrinkGently(path, func(left int64) {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() != left {
			t.Errorf("step reports %d bytes left; the file has %d", left, fi.Size())
		}
		steps = append(steps, left)
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{removeChunk + removeChunk/2, removeChunk / 2, 0}; !slices.Equal(steps, want) {
		t.Fatalf("sizes after each step = %v; want %v", steps, want)
	}
	if err := removeGently(path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("after removeGently: %v; want the file gone", err)
	}
	if err := removeGently(path); err != nil {
		t.Fatalf("removeGently of a missing file = %v; want nil", err)
	}
}

// raft closes a snapshot sink again after Persist closed it; the second Close does nothing.
func TestSummingSinkClosesOnce(t *testing.T) {
	store := newTestSnapshots(t)
	sink, err := store.Create(raft.SnapshotVersionMax, 10, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Write([]byte("state")); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	sum := filepath.Join(store.root, sink.ID(), metaSumName)
	if err := os.Remove(sum); err != nil {
		t.Fatalf("meta.sum after the first Close: %v", err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sum); !os.IsNotExist(err) {
		t.Fatalf("the second Close wrote meta.sum again (%v)", err)
	}
}
