package consensus

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zkd-io/zkd/internal/testkit/tmpfs"
	"github.com/zkd-io/zkd/jute"
)

// TestDiskFilledUnderWrites fills the disk of a standalone node while writes stream in, with
// segments small enough that the log needs new ones before the guard looks again: a segment
// rotation fails with ENOSPC, which leaves raft-wal unable to append. The node neither panics nor
// holds elections: the failed append waits, writes arriving meanwhile are refused with
// ErrDiskFull, reads go on, and once space is freed the store is reopened and the waiting writes
// complete. After a restart every acknowledged write is there.
func TestDiskFilledUnderWrites(t *testing.T) {
	vol := tmpfs.Mount(t, "8m")
	dir := filepath.Join(vol, "data")
	cfg := func() Config {
		c := standaloneConfig(t, dir)
		c.walSegmentSize = 64 << 10
		return c
	}
	n, err := New(cfg())
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "leadership", n.IsLeader)
	ctx := ctxT(t, 120*time.Second)
	if _, err := n.Propose(ctx, createReq("/before", []byte("x"), jute.ModePersistent)); err != nil {
		t.Fatal(err)
	}
	term := n.raft.CurrentTerm()
	filler := tmpfs.Fill(t, vol)

	data := make([]byte, 1024)
	var mu sync.Mutex
	var acked []string
	refused := 0
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 40 {
				path := fmt.Sprintf("/w%d-%d", w, i)
				res, err := n.Propose(ctx, createReq(path, data, jute.ModePersistent))
				mu.Lock()
				switch {
				case err == nil && res.Err == nil:
					acked = append(acked, path)
				case errors.Is(err, ErrDiskFull):
					refused++
				default:
					t.Errorf("create %s: %v %v", path, err, res.Err)
				}
				mu.Unlock()
			}
		})
	}
	eventually(t, 20*time.Second, "the node to count its disk as full", n.disk.full.Load)
	if _, _, ok := getData(t, n, "/before"); !ok {
		t.Fatal("a read failed on a full disk")
	}
	time.Sleep(2 * time.Second) // the writes stuck on the full disk stay stuck, and nothing else happens
	if n.raft.CurrentTerm() != term {
		t.Fatalf("elections on a full disk: term %d -> %d", term, n.raft.CurrentTerm())
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	eventually(t, 20*time.Second, "the disk counted as free again", func() bool { return !n.disk.full.Load() })
	if _, err := n.Propose(ctx, createReq("/after", []byte("y"), jute.ModePersistent)); err != nil {
		t.Fatalf("a write after space came back: %v", err)
	}
	if n.raft.CurrentTerm() != term {
		t.Fatalf("elections while the disk was full: term %d -> %d", term, n.raft.CurrentTerm())
	}
	t.Logf("%d writes acknowledged, %d refused as disk full", len(acked), refused)
	n.Shutdown()

	n, err = New(cfg())
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	eventually(t, 10*time.Second, "leadership", n.IsLeader)
	if err := n.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range append(acked, "/before", "/after") {
		if _, _, ok := getData(t, n, p); !ok {
			t.Fatalf("acknowledged %s is gone after the restart", p)
		}
	}
}

// TestSegmentCreationFailsThenRecovers runs out of inodes (not bytes) while writes stream in,
// so that the log cannot create its next segment: raft-wal seals the full segment and never
// retries the rotation, after which every append fails with "segment is sealed" (before, only a
// restart recovered). The node waits instead of failing, counts itself full, holds no election,
// and once files can be created again it reopens the log store and the waiting writes complete.
func TestSegmentCreationFailsThenRecovers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	vol := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m,nr_inodes=64", "zkd-test", vol).CombinedOutput(); err != nil {
		t.Fatalf("mount: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", vol).Run() })
	dir := filepath.Join(vol, "data")
	cfg := func() Config {
		c := standaloneConfig(t, dir)
		c.walSegmentSize = 64 << 10
		return c
	}
	n, err := New(cfg())
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "leadership", n.IsLeader)
	ctx := ctxT(t, 120*time.Second)
	term := n.raft.CurrentTerm()
	// Take every inode left.
	var dummies []string
	for i := 0; ; i++ {
		p := filepath.Join(vol, fmt.Sprintf("inode-%d", i))
		f, err := os.Create(p)
		if err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
		f.Close()
		dummies = append(dummies, p)
	}
	data := make([]byte, 4096)
	var mu sync.Mutex
	var acked []string
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 30 { // 480 KB: several segments
				path := fmt.Sprintf("/w%d-%d", w, i)
				res, err := n.Propose(ctx, createReq(path, data, jute.ModePersistent))
				if err == nil && res.Err == nil {
					mu.Lock()
					acked = append(acked, path)
					mu.Unlock()
				} else if !errors.Is(err, ErrDiskFull) {
					t.Errorf("create %s: %v %v", path, err, res.Err)
				}
			}
		})
	}
	eventually(t, 20*time.Second, "the node to count its disk as full", n.disk.full.Load)
	time.Sleep(2 * time.Second)
	if n.raft.CurrentTerm() != term {
		t.Fatalf("elections while no segment could be created: term %d -> %d", term, n.raft.CurrentTerm())
	}
	for _, p := range dummies {
		os.Remove(p)
	}
	wg.Wait()
	eventually(t, 20*time.Second, "the disk counted as free again", func() bool { return !n.disk.full.Load() })
	if _, err := n.Propose(ctx, createReq("/after", data, jute.ModePersistent)); err != nil {
		t.Fatalf("a write after files could be created again: %v", err)
	}
	t.Logf("%d writes acknowledged", len(acked))
	n.Shutdown()
	n, err = New(cfg())
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	eventually(t, 10*time.Second, "leadership", n.IsLeader)
	if err := n.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range append(acked, "/after") {
		if _, _, ok := getData(t, n, p); !ok {
			t.Fatalf("acknowledged %s is gone after the restart", p)
		}
	}
}

// TestLeaderDiskFullHandsOver: in a 3-node cluster, the leader's disk fills up. It hands
// leadership to a follower, writes go on through every member (the full one forwards them), and
// no acknowledged write is lost. Once its disk has room again it takes writes as a follower.
func TestLeaderDiskFullHandsOver(t *testing.T) {
	vols := map[string]string{}
	for _, id := range []string{"n1", "n2", "n3"} {
		vols[id] = tmpfs.Mount(t, "32m")
	}
	c := newCluster(t, 3, false, func(cfg *Config) {
		cfg.Dir = filepath.Join(vols[cfg.ID], "data")
		cfg.walSegmentSize = 256 << 10
	})
	ctx := ctxT(t, 120*time.Second)
	old := c.leader()
	var acked []string
	write := func(n *Node, path string) error {
		res, err := n.Propose(ctx, createReq(path, []byte(path), jute.ModePersistent))
		if err == nil && res.Err == nil {
			acked = append(acked, path)
			return nil
		}
		if err == nil {
			err = res.Err
		}
		return err
	}
	for i := range 20 {
		if err := write(old, fmt.Sprintf("/before-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	filler := tmpfs.Fill(t, vols[old.ID()])
	eventually(t, 20*time.Second, "leadership to move off the full disk", func() bool {
		l := c.leader()
		return l != old && old.disk.full.Load()
	})
	for _, n := range c.running() {
		for i := range 10 {
			if err := write(n, fmt.Sprintf("/after-%s-%d", n.ID(), i)); err != nil {
				t.Fatalf("write through %s after the handover: %v", n.ID(), err)
			}
		}
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the old leader's disk counted as free", func() bool { return !old.disk.full.Load() })
	c.converge()
	for _, n := range c.running() {
		for _, p := range acked {
			if _, _, ok := getData(t, n, p); !ok {
				t.Fatalf("%s lacks acknowledged %s", n.ID(), p)
			}
		}
	}
}
