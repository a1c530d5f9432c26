package storage

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/zkd-io/zkd/internal/third_party/raft"
	"github.com/zkd-io/zkd/znode"
)

// A chunked snapshot opens without raft's CRC-64 pass, since its chunks are checked as they are
// read: one whose recorded CRC-64 no longer matches opens (the pass would refuse it), while a
// flipped byte is refused by the check a starting node makes, and so are bytes after the end
// chunk. A snapshot in another format still goes through the CRC-64 pass.
func TestOpenSnapshotChecksChunkedSnapshotsByTheirChunks(t *testing.T) {
	store := newTestSnapshots(t)
	fss := store.FileSnapshotStore
	write := func(index uint64, body func(raft.SnapshotSink) error) snapshotInfo {
		t.Helper()
		sink, err := store.Create(raft.SnapshotVersionMax, index, 1, raft.Configuration{}, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := body(sink); err != nil {
			t.Fatal(err)
		}
		if err := sink.Close(); err != nil {
			t.Fatal(err)
		}
		return snapshotInfo{ID: sink.ID(), Index: index, dir: filepath.Join(store.root, sink.ID())}
	}
	persist := func(tr *znode.Tree) func(raft.SnapshotSink) error {
		return func(s raft.SnapshotSink) error { return PersistSnapshot(s, tr.View(), nil) }
	}
	small := write(10, persist(znode.New()))
	state := func(si snapshotInfo) string { return filepath.Join(si.dir, "state.bin") }
	orig, err := os.ReadFile(state(small))
	if err != nil {
		t.Fatal(err)
	}
	if err := checkSnapshot(fss, small); err != nil {
		t.Fatalf("an intact snapshot: %v", err)
	}

	// The CRC-64 raft recorded no longer matches the file: raft's Open refuses it, openSnapshot
	// never computes it.
	metaPath := filepath.Join(small.dir, "meta.json")
	metaBytes, err := os.ReadFile(metaPath)
	if err != nil {
		t.Fatal(err)
	}
	var meta map[string]any
	if err := json.Unmarshal(metaBytes, &meta); err != nil {
		t.Fatal(err)
	}
	meta["CRC"] = base64.StdEncoding.EncodeToString(make([]byte, 8))
	if metaBytes, err = json.Marshal(meta); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(metaPath, metaBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := fss.Open(small.ID); err == nil {
		t.Fatal("raft's Open accepted a state file that does not match its CRC-64")
	}
	_, rc, err := openSnapshot(fss, small.ID)
	if err != nil {
		t.Fatalf("openSnapshot of an intact chunked state file: %v", err)
	}
	if got, err := io.ReadAll(rc); err != nil || !bytes.Equal(got, orig) {
		t.Fatalf("openSnapshot read %d bytes (%v); want the file's %d", len(got), err, len(orig))
	}
	_ = rc.Close()

	flipped := append([]byte(nil), orig...)
	flipped[len(flipped)/2] ^= 0x5a // inside the one data chunk
	if err := os.WriteFile(state(small), flipped, 0o600); err != nil {
		t.Fatal(err)
	}
	var d *DamageError
	if err := checkSnapshot(fss, small); !errors.As(err, &d) {
		t.Fatalf("a flipped byte: %v; want a DamageError", err)
	}
	if err := os.WriteFile(state(small), append(append([]byte(nil), orig...), 0), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := checkSnapshot(fss, small); !errors.As(err, &d) {
		t.Fatalf("a byte after the end chunk: %v; want a DamageError", err)
	}

	plain := write(12, func(s raft.SnapshotSink) error { _, err := s.Write([]byte("not a zkd snapshot")); return err })
	if err := os.WriteFile(state(plain), []byte("not a zkd snapshoT"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := openSnapshot(fss, plain.ID); err == nil {
		t.Fatal("openSnapshot of a changed unchunked state file succeeded; want raft's CRC-64 refusal")
	}
}
