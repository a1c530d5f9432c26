package consensus

import (
	"fmt"
	"testing"
	"time"

	"github.com/zkd-io/zkd/internal/storage"
	"github.com/zkd-io/zkd/jute"
)

func TestTrailingLogs(t *testing.T) {
	for _, c := range []struct {
		limit, bytes, entries uint64
		data                  int64
		want                  uint64
	}{
		{10240, 0, 0, 0, 10240},                     // nothing applied: the limit
		{10240, 150 * 1000, 1000, 1 << 20, 10240},   // small entries: the limit
		{10240, 256 << 20, 1024, 1 << 30, 1365},     // 256 KiB entries, a 1 GiB tree: a third of it
		{10240, 256 << 20, 1024, 100 << 20, 256},    // a small tree: 64 MiB of entries
		{10240, 64 << 30, 1024, 0, trailMinEntries}, // huge entries: never fewer than the minimum
		{16, 256 << 20, 1024, 1 << 30, 16},          // never more than configured
	} {
		if got := trailingLogs(c.limit, c.bytes, c.entries, c.data); got != c.want {
			t.Errorf("trailingLogs(%d, %d, %d, %d) = %d; want %d", c.limit, c.bytes, c.entries, c.data, got, c.want)
		}
	}
}

// Through a real node: after a snapshot of a tree written with large values, the log keeps the
// entries that fit the byte budget, not TrailingLogs of them.
func TestTrailingLogsFollowEntrySize(t *testing.T) {
	n, err := New(Config{ID: "solo", Dir: t.TempDir(), Logger: testLogger(t), TrailingLogs: 10240, walSegmentSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	ctx := ctxT(t, 60*time.Second)
	value := make([]byte, 1<<20)
	const writes = 200 // 200 MiB of entries: 64 MiB (trailMinBytes) is 64 of them
	for i := range writes {
		if _, err := n.Propose(ctx, createReq(fmt.Sprintf("/v%03d", i), value, jute.ModePersistent)); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	logs := n.store.(*storage.Stores).Log
	first, err := logs.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	last, err := logs.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	if kept := last - first + 1; kept > 80 || kept < 60 {
		t.Fatalf("the log keeps %d entries (%d-%d) behind a snapshot of %d 1 MiB writes; want about 64", kept, first, last, writes)
	}
}
