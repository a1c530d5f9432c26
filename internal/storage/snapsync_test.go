package storage

import (
	"bytes"
	"io"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/zkd-io/zkd/internal/third_party/raft"
)

// A snapshot raft copies into a sink of the store (one a leader sent: InstallSnapshot) has its
// file written out chunk by chunk as it arrives, as one the node persists itself does, and reads
// back whole.
func TestReceivedSnapshotWritesOutAsItArrives(t *testing.T) {
	store := newTestSnapshots(t)
	sink, err := store.Create(raft.SnapshotVersionMax, 10, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	chunks := 0
	sink.(*summingSink).paced = func() { chunks++ }
	want := make([]byte, 5*SnapshotSyncChunk/2)
	for i := range want {
		want[i] = byte(rand.Uint32())
	}
	// As raft's installSnapshot copies the RPC's stream: io.Copy, 32 KiB at a time.
	if _, err := io.Copy(sink, struct{ io.Reader }{bytes.NewReader(want)}); err != nil {
		t.Fatal(err)
	}
	if chunks != 2 {
		t.Fatalf("%d chunks written out while %d bytes arrived; want 2", chunks, len(want))
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	_, rc, err := store.Open(sink.ID())
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read back %d bytes (%v); want the %d written", len(got), err, len(want))
	}
}

// newTestSnapshots returns the store Open builds over raft's file snapshot store, in a new
// directory (dir/snapshots), without the reaper.
func newTestSnapshots(t *testing.T) checkedSnapshots {
	t.Helper()
	dir := t.TempDir()
	fss, err := raft.NewFileSnapshotStoreWithLogger(dir, 5, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	return checkedSnapshots{FileSnapshotStore: fss, root: filepath.Join(dir, snapshotsDirName)}
}
