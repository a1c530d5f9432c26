package consensus

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/zkd-io/zkd/internal/third_party/raft"

	"github.com/zkd-io/zkd/jute"
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

// A node keeps its newest SnapshotRetain snapshots, deletes the rest (and whatever an interrupted
// deletion left behind) without taking a snapshot from a reader that has it open, and restarts
// from what it kept.
func TestSnapshotRetention(t *testing.T) {
	c := newCluster(t, 1, false, func(cfg *Config) { cfg.SnapshotRetain = 2 })
	n := c.leader()
	ctx := ctxT(t, 30*time.Second)
	root := filepath.Join(c.dirs["n1"], "raft")
	// What a crash in the middle of an earlier deletion leaves.
	leftover := filepath.Join(root, reapDirName, "1-2-3")
	if err := os.MkdirAll(leftover, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(leftover, "state.bin"), make([]byte, 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	var taken []string
	for i := range 4 {
		if res, err := n.Propose(ctx, createReq(fmt.Sprintf("/k%d", i), []byte{byte(i)}, jute.ModePersistent)); err != nil || res.Err != nil {
			t.Fatalf("create %d: %v %v", i, err, res.Err)
		}
		if err := n.Snapshot(); err != nil {
			t.Fatalf("snapshot %d: %v", i, err)
		}
		metas, err := n.snaps.List()
		if err != nil || len(metas) == 0 {
			t.Fatalf("list after snapshot %d: %v %v", i, metas, err)
		}
		taken = append(taken, metas[0].ID)
		if i == 0 {
			// Read while it is reaped, as raft reads a snapshot it sends to a follower.
			meta, rc, err := n.snaps.Open(metas[0].ID)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				got, err := io.ReadAll(rc)
				if err != nil || int64(len(got)) != meta.Size {
					t.Errorf("reading the reaped snapshot while it was open: %d bytes, %v; want %d", len(got), err, meta.Size)
				}
				rc.Close()
			}()
		}
	}
	ents, err := os.ReadDir(filepath.Join(root, snapshotsDirName))
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, e := range ents {
		kept = append(kept, e.Name())
	}
	slices.Sort(kept)
	want := slices.Sorted(slices.Values(taken[2:]))
	if !slices.Equal(kept, want) {
		t.Fatalf("snapshots on disk = %v; want the newest two %v (of %v)", kept, want, taken)
	}
	if ents, err := os.ReadDir(filepath.Join(root, reapDirName)); err != nil || len(ents) != 0 {
		t.Fatalf("reap directory holds %v (%v); want it empty", ents, err)
	}
	c.stop("n1")
	c.start("n1")
	n = c.leader()
	if err := n.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if d, _, ok := getData(t, n, fmt.Sprintf("/k%d", i)); !ok || len(d) != 1 || d[0] != byte(i) {
			t.Fatalf("/k%d after restart = %v %v", i, d, ok)
		}
	}
}

// raft closes a snapshot sink again after Persist closed it; the second Close does nothing.
func TestSummingSinkClosesOnce(t *testing.T) {
	dir := t.TempDir()
	fss, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	store := checkedSnapshots{FileSnapshotStore: fss, root: filepath.Join(dir, snapshotsDirName)}
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
	sum := filepath.Join(dir, snapshotsDirName, sink.ID(), metaSumName)
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
