package consensus

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/zkd-io/zkd/jute"
)

const crashDirEnv = "ZKD_CONSENSUS_CRASH_DIR"

// TestCrashChild is the process that gets killed by TestCrashKeepsAcknowledgedWrites: it runs a
// single node on the given dir and prints every acknowledged write.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("only runs as the child of TestCrashKeepsAcknowledgedWrites")
	}
	n, err := New(Config{ID: "solo", Dir: dir, SnapshotThreshold: 64, TrailingLogs: 16})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; ; i++ {
		path := fmt.Sprintf("/k%06d", i)
		res, err := n.Propose(ctx, createReq(path, []byte(path), jute.ModePersistent))
		if err != nil || res.Err != nil {
			fmt.Fprintf(os.Stderr, "write %s: %v %v\n", path, err, res.Err)
			continue
		}
		fmt.Fprintf(os.Stdout, "ACK %s %d\n", path, res.Zxid)
	}
}

// TestCrashKeepsAcknowledgedWrites kills a node process with SIGKILL in the middle of a write
// stream and restarts from the same dir: every acknowledged write must be there.
func TestCrashKeepsAcknowledgedWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = t.Output()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[string]int64{}
	sc := bufio.NewScanner(out)
	for sc.Scan() && len(acked) < 300 {
		var path string
		var zxid int64
		if _, err := fmt.Sscanf(sc.Text(), "ACK %s %d", &path, &zxid); err == nil {
			acked[path] = zxid
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if len(acked) < 300 {
		t.Fatalf("child acknowledged only %d writes", len(acked))
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
		if !ok || st.Czxid != zxid || !strings.EqualFold(string(d), path) {
			t.Fatalf("acknowledged %s (zxid %d) after crash: %q %+v %v", path, zxid, d, st, ok)
		}
	}
	t.Logf("%d acknowledged writes survived SIGKILL; last zxid %d", len(acked), n.LastZxid())
}
