package consensus

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zkd-io/zkd/jute"
)

const (
	crashDirEnv = "ZKD_CONSENSUS_CRASH_DIR"
	// crashSegEnv, when set, gives the child log segments of that many bytes and writes of
	// crashPad bytes, so that segments fill, are dropped by compaction and their files reused.
	crashSegEnv = "ZKD_CONSENSUS_CRASH_SEG"
	crashPad    = 2 << 10
)

// TestCrashChild is the process that gets killed by TestCrashKeepsAcknowledgedWrites: it runs a
// single node on the given dir and prints every acknowledged write.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("only runs as the child of TestCrashKeepsAcknowledgedWrites")
	}
	cfg := Config{ID: "solo", Dir: dir, SnapshotThreshold: 64, TrailingLogs: 16}
	pad := 0
	if seg, err := strconv.Atoi(os.Getenv(crashSegEnv)); err == nil {
		cfg.walSegmentSize, cfg.SnapshotInterval, pad = seg, 50*time.Millisecond, crashPad
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; ; i++ {
		path := fmt.Sprintf("/k%06d", i)
		data := []byte(path + strings.Repeat(".", max(0, pad-len(path))))
		res, err := n.Propose(ctx, createReq(path, data, jute.ModePersistent))
		if err != nil || res.Err != nil {
			fmt.Fprintf(os.Stderr, "write %s: %v %v\n", path, err, res.Err)
			continue
		}
		fmt.Fprintf(os.Stdout, "ACK %s %d\n", path, res.Zxid)
	}
}

// TestCrashKeepsAcknowledgedWrites kills a node process with SIGKILL in the middle of a write
// stream and restarts from the same dir: every acknowledged write must be there.
//
// With small segments (the second run) the log's segments fill, compaction drops them and their
// files come back zeroed as new segments (internal/storage/segpool.go); the kill comes after
// files were reused, and the restart must read every acknowledged write from them and nothing
// stale.
func TestCrashKeepsAcknowledgedWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process")
	}
	t.Run("default", func(t *testing.T) { crashAndCheck(t, "") })
	t.Run("reused segments", func(t *testing.T) {
		if runtime.GOOS != "linux" {
			t.Skip("segment files are reused on Linux only")
		}
		crashAndCheck(t, "16384")
	})
}

func crashAndCheck(t *testing.T, seg string) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
	if seg != "" {
		cmd.Env = append(cmd.Env, crashSegEnv+"="+seg)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = t.Output()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[string]int64{}
	// reused counts the segment files seen that hold a file a dropped segment had (same inode).
	dropped, reused := map[uint64]bool{}, 0
	look := func() {
		segs, _ := filepath.Glob(filepath.Join(dir, "raft", walDirName, "*.wal"))
		spares, _ := filepath.Glob(filepath.Join(dir, "raft", walDirName, "*"+spareSuffix))
		for _, f := range spares {
			if fi, err := os.Stat(f); err == nil {
				dropped[fi.Sys().(*syscall.Stat_t).Ino] = true
			}
		}
		for _, f := range segs {
			if fi, err := os.Stat(f); err == nil && dropped[fi.Sys().(*syscall.Stat_t).Ino] {
				reused++
			}
		}
	}
	want := 300
	sc := bufio.NewScanner(out)
	for sc.Scan() && (len(acked) < want || seg != "" && reused < 3 && len(acked) < 20000) {
		var path string
		var zxid int64
		if _, err := fmt.Sscanf(sc.Text(), "ACK %s %d", &path, &zxid); err == nil {
			acked[path] = zxid
			if seg != "" && len(acked)%10 == 0 {
				look()
			}
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if len(acked) < want {
		t.Fatalf("child acknowledged only %d writes", len(acked))
	}
	if seg != "" && reused < 3 {
		t.Fatalf("after %d writes the log had reused dropped segments' files %d times; the test needs it to", len(acked), reused)
	}

	n, err := New(Config{ID: "solo", Dir: dir, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	ctx := ctxT(t, 20*time.Second)
	if err := n.Sync(ctx); err != nil {
		t.Fatalf("sync after restart: %v", err)
	}
	for path, zxid := range acked {
		d, st, ok := getData(t, n, path)
		if !ok || st.Czxid != zxid || !strings.EqualFold(strings.TrimRight(string(d), "."), path) {
			t.Fatalf("acknowledged %s (zxid %d) after crash: %q %+v %v", path, zxid, d, st, ok)
		}
	}
	t.Logf("%d acknowledged writes survived SIGKILL (files of dropped segments seen in use %d times before it); last zxid %d", len(acked), reused, n.LastZxid())
}
