package zkfile

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/zkd-io/zkd/internal/testkit/zktest"
)

// zooKeeperFiles runs the workload on a real ZooKeeper, stops it and returns its dataDir and
// dataLogDir. snapCount, when not empty, replaces the workload's (which rolls snapshots and logs
// every 20 to 40 transactions).
func zooKeeperFiles(t *testing.T, snapCount string) (string, string) {
	t.Helper()
	zktest.Require(t)
	dir := t.TempDir()
	extra := zooKeeperExtra()
	if snapCount != "" {
		extra["snapCount"] = snapCount
	}
	zkp := startZooKeeper(t, dir, extra)
	workload(t, zkp.ClientAddr(), 40)
	if err := zkp.Stop(); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "data"), filepath.Join(dir, "txnlog")
}

// logEntries returns the offset and total size of each entry in a log file.
func logEntries(t *testing.T, path string) (offs, sizes []int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for off := int64(16); off+12 <= int64(len(b)); {
		n := int64(binary.BigEndian.Uint32(b[off+8:]))
		if n == 0 {
			break
		}
		offs, sizes = append(offs, off), append(sizes, 8+4+n+1)
		off += 8 + 4 + n + 1
	}
	return offs, sizes
}

// A newest snapshot that fails its checksum is passed over, as ZooKeeper does: the state comes
// from the one before it and the logs, and is the same.
func TestLoadSkipsDamagedNewestSnapshot(t *testing.T) {
	data, logs := zooKeeperFiles(t, "")
	want, rep, err := Load(data, logs)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(rep.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x40
	if err := os.WriteFile(rep.Snapshot, b, 0o644); err != nil {
		t.Fatal(err)
	}
	got, rep2, err := Load(data, logs)
	if err != nil {
		t.Fatal(err)
	}
	if rep2.Snapshot == rep.Snapshot || len(rep2.SkippedSnaps) != 1 {
		t.Fatalf("damaged %s was not passed over: %+v", rep.Snapshot, rep2)
	}
	if got.Zxid != want.Zxid {
		t.Errorf("zxid %#x, want %#x", got.Zxid, want.Zxid)
	}
	zktest.DiffTrees(t, "state from the older snapshot", dumpState(got), dumpState(want))
}

// A complete log entry whose checksum fails stops the load with an error naming the file: the
// state would silently differ otherwise. ZooKeeper refuses to start on it too.
func TestLoadRefusesDamagedLogEntry(t *testing.T) {
	// No rolling: the one log holds every transaction, so it has entries to damage.
	data, logs := zooKeeperFiles(t, "100000")
	_, rep, err := Load(data, logs)
	if err != nil {
		t.Fatal(err)
	}
	last := rep.Logs[len(rep.Logs)-1]
	offs, sizes := logEntries(t, last)
	if len(offs) < 2 {
		t.Fatalf("%s has %d entries", last, len(offs))
	}
	b, _ := os.ReadFile(last)
	b[offs[0]+sizes[0]/2] ^= 0x01
	if err := os.WriteFile(last, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = Load(data, logs)
	if !errors.Is(err, ErrChecksum) {
		t.Fatalf("Load of a damaged log entry: %v, want a checksum error", err)
	}
	t.Log(err)
}

// A log whose last entry a crash cut short ends before that entry, as in ZooKeeper.
func TestLoadTornLogTail(t *testing.T) {
	// No rolling: the last log holds every transaction, so its last entry can be cut with
	// others before it (with rolling, the last log may hold a single entry).
	data, logs := zooKeeperFiles(t, "100000")
	full, rep, err := Load(data, logs)
	if err != nil {
		t.Fatal(err)
	}
	last := rep.Logs[len(rep.Logs)-1]
	l, err := ReadLogFile(last)
	if err != nil {
		t.Fatal(err)
	}
	offs, sizes := logEntries(t, last)
	if len(l.Txns) < 2 || len(offs) != len(l.Txns) {
		t.Fatalf("%s: %d entries read, %d found", last, len(l.Txns), len(offs))
	}
	n := len(offs) - 1
	orig, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	for _, cut := range []int64{offs[n] + 3, offs[n] + 12, offs[n] + sizes[n] - 1} {
		if err := os.WriteFile(last, orig[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		st, rep, err := Load(data, logs)
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		if len(rep.TornLogs) != 1 || st.Zxid != l.Txns[n-1].Header.Zxid {
			t.Errorf("cut at %d: zxid %#x, torn %v; want zxid %#x (full %#x) and the log reported torn", cut, st.Zxid, rep.TornLogs, l.Txns[n-1].Header.Zxid, full.Zxid)
		}
	}
}
