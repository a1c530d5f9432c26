package consensus

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zkd-io/zkd/jute"
)

// TestRestoreSeedsACluster backs up a standalone node, seeds the three members of a new cluster
// from the backup (each with its own id, the same members; one straight from the node's view
// with SeedDir, as zkd import seeds), and starts them: they elect a leader, every member serves
// the backed-up tree, and zxids go on above the backup's.
func TestRestoreSeedsACluster(t *testing.T) { synctest.Test(t, testRestoreSeedsACluster) }

func testRestoreSeedsACluster(t *testing.T) {
	src, err := New(memStandaloneConfig(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "leadership", src.IsLeader)
	ctx := ctxT(t, 60*time.Second)
	for i := range 30 {
		if _, err := src.Propose(ctx, createReq(fmt.Sprintf("/k%02d", i), []byte{byte(i)}, jute.ModePersistent)); err != nil {
			t.Fatal(err)
		}
	}
	var backup bytes.Buffer
	if err := WriteBackup(&backup, src.View()); err != nil {
		t.Fatal(err)
	}
	want, zxid, view := snapshotBytes(t, src), src.View().Zxid(), src.View()
	src.Shutdown()

	seeded := map[string]string{}
	c := newBubbleCluster(t, 3, false, func(cfg *Config) {
		if seeded[cfg.ID] == "" {
			seeded[cfg.ID] = filepath.Join(t.TempDir(), "data")
			var err error
			if len(seeded) == 1 { // the first member seeded
				err = SeedDir(seeded[cfg.ID], view, cfg.ID, cfg.Peers)
			} else {
				_, err = RestoreDir(seeded[cfg.ID], bytes.NewReader(backup.Bytes()), cfg.ID, cfg.Peers)
			}
			if err != nil {
				t.Fatalf("restore %s: %v", cfg.ID, err)
			}
		}
		cfg.Dir = seeded[cfg.ID]
	})
	l := c.leader()
	if err := l.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.running() {
		eventually(t, 10*time.Second, n.ID()+" to hold the backup", func() bool { return n.View().Zxid() >= zxid })
		if got := snapshotBytes(t, n); !bytes.Equal(got, want) {
			t.Fatalf("%s serves a different tree than the backup's", n.ID())
		}
	}
	res, err := l.Propose(ctx, createReq("/new", nil, jute.ModePersistent))
	if err != nil || res.Err != nil || res.Zxid <= zxid {
		t.Fatalf("a write after the restore: zxid %d (backup %d), %v %v", res.Zxid, zxid, err, res.Err)
	}
	c.converge()
}
