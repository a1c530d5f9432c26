package consensus

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zkd-io/zkd/internal/storage"
	"github.com/zkd-io/zkd/jute"
)

// Tests of a Node's use of its storage (internal/storage): snapshots, retention, migration.

// TestBoltStoreMigratesToWAL starts a node on the bolt store, writes past a snapshot, then
// restarts it with the default store: the log moves into a WAL, the bolt file is set aside, and
// the state, the term and new writes all carry on. A leftover temporary directory from a crashed
// migration is replaced, not trusted.
func TestBoltStoreMigratesToWAL(t *testing.T) { synctest.Test(t, testBoltStoreMigratesToWAL) }

func testBoltStoreMigratesToWAL(t *testing.T) {
	kind := LogStoreBolt
	c := newBubbleCluster(t, 1, false, func(cfg *Config) {
		cfg.LogStore = kind
		cfg.SnapshotThreshold = 40
		cfg.TrailingLogs = 10
	})
	n := c.leader()
	ctx := ctxT(t, 30*time.Second)
	for i := range 100 {
		res, err := n.Propose(ctx, createReq(fmt.Sprintf("/m%03d", i), []byte{byte(i)}, jute.ModePersistent))
		if err != nil || res.Err != nil {
			t.Fatalf("create %d: %v %v", i, err, res.Err)
		}
		if i == 50 {
			if err := n.Snapshot(); err != nil {
				t.Fatal(err)
			}
		}
	}
	term := n.raft.CurrentTerm()
	before := snapshotBytes(t, n)
	c.stop("n1")

	dir := filepath.Join(c.dirs["n1"], "raft")
	if _, err := os.Stat(filepath.Join(dir, walDirName)); err == nil {
		t.Fatal("the bolt store wrote a WAL directory")
	}
	junk := filepath.Join(dir, walDirName+".tmp")
	if err := os.MkdirAll(junk, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(junk, "wal-meta.db"), []byte("torn"), 0o600); err != nil {
		t.Fatal(err)
	}

	kind = ""
	c.start("n1")
	n = c.leader()
	if err := n.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := n.raft.CurrentTerm(); got < term {
		t.Fatalf("term after migration = %d; want >= %d", got, term)
	}
	if after := snapshotBytes(t, n); !bytes.Equal(before, after) {
		t.Fatalf("state after migration differs (%d vs %d bytes)", len(after), len(before))
	}
	for _, name := range []string{walDirName, boltName + migratedExt} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Fatalf("after migration: %v", err)
		}
	}
	for _, name := range []string{boltName, walDirName + ".tmp"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			t.Fatalf("after migration %s is still there", name)
		}
	}
	if res, err := n.Propose(ctx, createReq("/after", nil, jute.ModePersistent)); err != nil || res.Err != nil {
		t.Fatalf("write after migration: %v %v", err, res.Err)
	}
	c.stop("n1")
	c.start("n1")
	n = c.leader()
	if err := n.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := getData(t, n, "/after"); !ok {
		t.Fatal("/after lost over a restart on the WAL")
	}
	if _, _, ok := getData(t, n, "/m099"); !ok {
		t.Fatal("/m099 lost over a restart on the WAL")
	}
}

// TestBoltStoreRefusesWALDir keeps an operator from reopening a migrated directory as bolt, which
// would silently start from the older log, and a second node from opening a directory in use.
func TestBoltStoreRefusesWALDir(t *testing.T) {
	dir := t.TempDir()
	n, err := New(Config{ID: "solo", Dir: dir, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{ID: "solo", Dir: dir, Logger: testLogger(t)}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("a second node on a data dir in use: %v; want a refusal", err)
	}
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	_, err = New(Config{ID: "solo", Dir: dir, Logger: testLogger(t), LogStore: LogStoreBolt})
	if err == nil || !strings.Contains(err.Error(), "WAL") {
		t.Fatalf("New with LogStoreBolt on a WAL directory: %v; want a refusal", err)
	}
	if _, err := New(Config{ID: "solo", LogStore: "lsm"}); err == nil {
		t.Fatal("an unknown LogStore was accepted")
	}
}

// TestSnapshotByLogBytes sets the entry threshold out of reach and a small byte threshold: a few
// large writes must still produce a snapshot, so a restart does not replay them all.
func TestSnapshotByLogBytes(t *testing.T) { synctest.Test(t, testSnapshotByLogBytes) }

func testSnapshotByLogBytes(t *testing.T) {
	c := newBubbleCluster(t, 1, false, func(cfg *Config) {
		cfg.SnapshotThreshold = 1 << 40
		cfg.SnapshotBytes = 64 << 10
	})
	n := c.leader()
	ctx := ctxT(t, 30*time.Second)
	big := bytes.Repeat([]byte("z"), 8<<10)
	snapshotIndex := func() string { return n.raft.Stats()["last_snapshot_index"] }
	if got := snapshotIndex(); got != "0" {
		t.Fatalf("last_snapshot_index before any write = %s", got)
	}
	for i := range 12 { // 96 KiB of data
		if res, err := n.Propose(ctx, createReq(fmt.Sprintf("/big%d", i), big, jute.ModePersistent)); err != nil || res.Err != nil {
			t.Fatalf("write %d: %v %v", i, err, res.Err)
		}
	}
	eventually(t, 10*time.Second, "a snapshot by log size", func() bool { return snapshotIndex() != "0" })
}

// TestSnapshotByMultiOps: snapCount counts each operation of a multi, so a bulk load of a few
// large multis (few entries, many znodes) still gets a snapshot and a restart does not replay it.
func TestSnapshotByMultiOps(t *testing.T) { synctest.Test(t, testSnapshotByMultiOps) }

func testSnapshotByMultiOps(t *testing.T) {
	c := newBubbleCluster(t, 1, false, func(cfg *Config) {
		cfg.SnapshotThreshold = 1000
		cfg.SnapshotBytes = 1 << 40
	})
	n := c.leader()
	ctx := ctxT(t, 30*time.Second)
	snapshotIndex := func() string { return n.raft.Stats()["last_snapshot_index"] }
	for m := range 4 { // 4 entries, 1200 creates
		var req jute.MultiRequest
		for i := range 300 {
			req.Ops = append(req.Ops, jute.MultiOp{Type: jute.OpCreate,
				Req: &jute.CreateRequest{Path: fmt.Sprintf("/m%d-%d", m, i), ACL: openACL}})
		}
		res, err := n.Propose(ctx, Proposal{Op: jute.OpMulti, Body: jute.Marshal(nil, &req)})
		if err != nil || res.Err != nil {
			t.Fatalf("multi %d: %v %v", m, err, res.Err)
		}
		if m == 2 && (n.fsm.snapAsked.Load() || snapshotIndex() != "0") {
			t.Fatal("a snapshot was asked for after 900 operations of a threshold of 1000")
		}
	}
	eventually(t, 10*time.Second, "a snapshot by operation count", func() bool { return snapshotIndex() != "0" })
}

// TestSnapshotBytesFollowTheTree: with the default size trigger, a tree larger than SnapshotBytes
// is snapshotted again only after twice its size in log, not after every SnapshotBytes (a
// snapshot rewrites the whole tree; with large values a fixed trigger rewrote it many times over).
func TestSnapshotBytesFollowTheTree(t *testing.T) { synctest.Test(t, testSnapshotBytesFollowTheTree) }

func testSnapshotBytesFollowTheTree(t *testing.T) {
	c := newBubbleCluster(t, 1, false, func(cfg *Config) {
		cfg.SnapshotThreshold = 1 << 40
		cfg.SnapshotBytes = 64 << 10
		cfg.snapshotBytesByTree = true
	})
	n := c.leader()
	ctx := ctxT(t, 30*time.Second)
	snapshotIndex := func() string { return n.raft.Stats()["last_snapshot_index"] }
	write := func(req Proposal) {
		t.Helper()
		if res, err := n.Propose(ctx, req); err != nil || res.Err != nil {
			t.Fatalf("write: %v %v", err, res.Err)
		}
	}
	// The first snapshot: a 128 KiB tree, then 8 KiB writes until the log is twice the tree.
	write(createReq("/big", bytes.Repeat([]byte("b"), 128<<10), jute.ModePersistent))
	write(createReq("/small", nil, jute.ModePersistent))
	small := bytes.Repeat([]byte("s"), 8<<10)
	for i := 0; n.fsm.snapAsks.Load() == 0; i++ {
		if i == 100 {
			t.Fatal("no snapshot asked for after 100 writes of 8 KiB past a 128 KiB tree")
		}
		write(setReq("/small", small, -1))
	}
	eventually(t, 10*time.Second, "the first snapshot", func() bool { return snapshotIndex() != "0" })
	// 20 × 8 KiB = 160 KiB: past SnapshotBytes, short of twice the tree's size (over 272 KiB).
	// The FSM asks synchronously in Apply, so not having asked is the whole check. (A snapshot
	// asked for before, still being taken, may restart the count meanwhile; then one of the two
	// parts is still over SnapshotBytes, so a rule of SnapshotBytes alone would still ask.)
	asked := n.fsm.snapAsks.Load()
	for range 20 {
		write(setReq("/small", small, -1))
	}
	if got := n.fsm.snapAsks.Load(); got != asked {
		t.Fatalf("a snapshot was asked for after %d bytes of log with a tree of %d bytes", n.fsm.sinceSnap.Load(), n.View().DataSize())
	}
	first := snapshotIndex()
	for range 80 { // 800 KiB in all: more than twice the tree
		write(setReq("/small", small, -1))
	}
	eventually(t, 10*time.Second, "a snapshot asked for once the log outgrew the tree", func() bool { return n.fsm.snapAsks.Load() > asked })
	eventually(t, 10*time.Second, "a snapshot once the log outgrew the tree", func() bool { return snapshotIndex() != first })
}

// TestSnapshotWritesOutAsItGoes takes a snapshot of about 10 MiB on disk and checks that its file
// was found under the snapshot store's layout and written out chunk by chunk, and that the node
// restores from it.
func TestSnapshotWritesOutAsItGoes(t *testing.T) { synctest.Test(t, testSnapshotWritesOutAsItGoes) }

func testSnapshotWritesOutAsItGoes(t *testing.T) {
	c := newBubbleCluster(t, 1, false, nil)
	n := c.leader()
	ctx := ctxT(t, 30*time.Second)
	big := bytes.Repeat([]byte("s"), 256<<10)
	for i := range 40 {
		if res, err := n.Propose(ctx, createReq(fmt.Sprintf("/s%d", i), big, jute.ModePersistent)); err != nil || res.Err != nil {
			t.Fatalf("write %d: %v %v", i, err, res.Err)
		}
	}
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if got, want := n.fsm.paced.Load(), int64(10<<20/storage.SnapshotSyncChunk); got < want {
		t.Fatalf("%d chunks written out early; want at least %d", got, want)
	}
	c.stop("n1")
	c.start("n1")
	n = c.leader()
	if d, _, ok := getData(t, n, "/s39"); !ok || !bytes.Equal(d, big) {
		t.Fatalf("/s39 after restart: %d bytes, %v", len(d), ok)
	}
}

// A node keeps its newest SnapshotRetain snapshots, deletes the rest (and whatever an interrupted
// deletion left behind) without taking a snapshot from a reader that has it open, and restarts
// from what it kept.
func TestSnapshotRetention(t *testing.T) { synctest.Test(t, testSnapshotRetention) }

func testSnapshotRetention(t *testing.T) {
	c := newBubbleCluster(t, 1, false, func(cfg *Config) { cfg.SnapshotRetain = 2 })
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
