package consensus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zkd-io/zkd/internal/storage"
	"github.com/zkd-io/zkd/internal/testkit/memnet"
	"github.com/zkd-io/zkd/jute"
)

// damageTemplate is a stopped single server's data directory with several log segments (sealed
// ones and the one in use) and a snapshot, and the tree it held when it stopped.
type damageTemplate struct {
	dir  string
	want []byte
}

func standaloneConfig(t testing.TB, dir string) Config {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return Config{ID: "n1", Dir: dir, Listener: ln, Logger: testLogger(t), walSegmentSize: 32 << 10}
}

// memStandaloneConfig is standaloneConfig on an in-memory network (memnet), for a server in a
// synctest bubble: a real socket's accept loop would keep the bubble's clock from moving.
func memStandaloneConfig(t testing.TB, dir string) Config {
	mn := memnet.New()
	ln, err := mn.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return Config{ID: "n1", Dir: dir, Listener: ln, Network: mn, Logger: testLogger(t), walSegmentSize: 32 << 10}
}

func buildDamageTemplate(t *testing.T) damageTemplate {
	t.Helper()
	dir := t.TempDir()
	n, err := New(memStandaloneConfig(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "leadership", n.IsLeader)
	ctx := ctxT(t, 60*time.Second)
	data := bytes.Repeat([]byte("0123456789abcdef"), 12)
	for i := range 300 {
		if _, err := n.Propose(ctx, createReq(fmt.Sprintf("/d%03d", i), data, jute.ModePersistent)); err != nil {
			t.Fatal(err)
		}
		if i == 150 {
			if err := n.Snapshot(); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := snapshotBytes(t, n)
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	return damageTemplate{dir: dir, want: want}
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o750)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// openDamaged starts a server on dir, in the caller's synctest bubble. It returns the error New gave, or the tree the server
// serves once it leads (and nil).
func openDamaged(t *testing.T, dir string) ([]byte, error) {
	t.Helper()
	serving := make(chan struct{})
	var once sync.Once
	cfg := memStandaloneConfig(t, dir)
	cfg.OnServing = func(on bool) {
		if on {
			once.Do(func() { close(serving) })
		}
	}
	n, err := New(cfg)
	if err != nil {
		return nil, err
	}
	defer n.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	select {
	case <-serving:
	case <-ctx.Done():
		return nil, fmt.Errorf("no leadership on a server that started: it hangs")
	}
	if err := n.Sync(ctx); err != nil {
		return nil, fmt.Errorf("sync: %w", err)
	}
	return snapshotBytes(t, n), nil
}

// TestDamagedFilesNeverServed is the corruption matrix: for every file of a data directory,
// bits flipped at many offsets, truncations at many offsets, an empty file and another file in
// its place. Every case either starts and serves exactly the tree the server held when it stopped
// (damage in bytes no reader uses), or refuses to start with a DamageError naming the file. None
// panics (a panic fails the test binary) or hangs.
func TestDamagedFilesNeverServed(t *testing.T) { synctest.Test(t, testDamagedFilesNeverServed) }

func testDamagedFilesNeverServed(t *testing.T) {
	if testing.Short() {
		t.Skip("corruption matrix")
	}
	tmpl := buildDamageTemplate(t)
	if got, err := openDamaged(t, copyDir(t, tmpl.dir)); err != nil || !bytes.Equal(got, tmpl.want) {
		t.Fatalf("the undamaged copy: err %v, same tree %v", err, bytes.Equal(got, tmpl.want))
	}
	var files []string
	_ = filepath.WalkDir(tmpl.dir, func(p string, d fs.DirEntry, _ error) error {
		if !d.IsDir() && d.Name() != "LOCK" {
			rel, _ := filepath.Rel(tmpl.dir, p)
			files = append(files, rel)
		}
		return nil
	})
	sort.Strings(files)
	rng := rand.New(rand.NewPCG(1, 2))
	type tally struct{ served, refused int }
	results := map[string]*tally{}
	for _, rel := range files {
		orig, err := os.ReadFile(filepath.Join(tmpl.dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		size := len(orig)
		// Offsets: the first bytes (headers), spread over the used part, and the end.
		used := usedLen(orig)
		offsets := []int{0, 1, 4, 8, 12, 16, 24, 32}
		for range 24 {
			offsets = append(offsets, rng.IntN(max(used, 1)))
		}
		offsets = append(offsets, used-1, size-1)
		type cs struct {
			name string
			mut  func() []byte
		}
		var cases []cs
		for _, off := range offsets {
			if off < 0 || off >= size {
				continue
			}
			cases = append(cases, cs{fmt.Sprintf("flip@%d", off), func() []byte {
				b := bytes.Clone(orig)
				b[off] ^= 0x5a
				return b
			}})
		}
		for _, frac := range []int{0, 1, 10, 30, 50, 70, 90, 99} {
			off := used * frac / 100
			cases = append(cases, cs{fmt.Sprintf("truncate@%d", off), func() []byte { return bytes.Clone(orig[:off]) }})
		}
		cases = append(cases, cs{"replaced", func() []byte {
			other := make([]byte, size)
			for i := range other {
				other[i] = byte(rng.Uint32())
			}
			return other
		}})
		for _, c := range cases {
			dir := copyDir(t, tmpl.dir)
			if err := os.WriteFile(filepath.Join(dir, rel), c.mut(), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := openDamaged(t, dir)
			k := kindOf(rel)
			if results[k] == nil {
				results[k] = &tally{}
			}
			var d *DamageError
			switch {
			case err == nil && bytes.Equal(got, tmpl.want):
				results[k].served++
			case err == nil:
				t.Errorf("%s %s: served a different tree", rel, c.name)
			case errors.As(err, &d):
				results[k].refused++
				if !strings.Contains(d.File, filepath.Dir(filepath.Join(dir, rel))) {
					t.Errorf("%s %s: the error names %s: %v", rel, c.name, d.File, err)
				}
			default:
				t.Errorf("%s %s: not a DamageError: %v", rel, c.name, err)
			}
		}
	}
	for k, r := range results {
		t.Logf("%-12s served intact %3d, refused %3d", k, r.served, r.refused)
	}
}

func copyDir(t *testing.T, from string) string {
	to := t.TempDir()
	copyTree(t, from, to)
	return to
}

// usedLen is the length of b without its trailing zero bytes (a segment file is preallocated).
func usedLen(b []byte) int {
	n := len(bytes.TrimRight(b, "\x00"))
	return max(n, 1)
}

func kindOf(rel string) string {
	switch {
	case strings.HasSuffix(rel, ".wal"):
		return "segment"
	case strings.HasSuffix(rel, walMetaFileName):
		return "wal-meta"
	case strings.HasSuffix(rel, metaSumName):
		return "snap-sum"
	case strings.HasSuffix(rel, diskReserveName):
		return "reserve"
	case strings.HasSuffix(rel, "meta.json"):
		return "snap-meta"
	case strings.HasSuffix(rel, "state.bin"):
		return "snap-state"
	}
	return rel
}

// TestTornTailRecovered builds what a kill -9 in the middle of an append leaves: the newest
// segment holds a prefix of an append that was never acknowledged (here: half of the bytes two
// later appends added, over the metadata from before them). The server starts, serves exactly
// the acknowledged tree, clears the torn bytes, and appends after them across restarts.
func TestTornTailRecovered(t *testing.T) { synctest.Test(t, testTornTailRecovered) }

func testTornTailRecovered(t *testing.T) {
	tmpl := buildDamageTemplate(t)
	later := copyDir(t, tmpl.dir)
	n, err := New(memStandaloneConfig(t, later))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "leadership", n.IsLeader)
	if _, err := n.Propose(ctxT(t, 10*time.Second), createReq("/unacknowledged", []byte("x"), jute.ModePersistent)); err != nil {
		t.Fatal(err)
	}
	n.Shutdown()

	walA := filepath.Join(tmpl.dir, "raft", walDirName)
	walB := filepath.Join(later, "raft", walDirName)
	tail := lastSegment(walA)
	if lastSegment(walB) != filepath.Join(walB, filepath.Base(tail)) {
		t.Fatalf("the later appends started a new segment (%s after %s): make the test's entries smaller", lastSegment(walB), tail)
	}
	a, _ := os.ReadFile(tail)
	b, _ := os.ReadFile(filepath.Join(walB, filepath.Base(tail)))
	usedA, usedB := usedLen(a), usedLen(b)
	if !bytes.Equal(a[:usedA], b[:usedA]) || usedB <= usedA {
		t.Fatal("the later appends did not extend the segment in place")
	}
	torn := bytes.Clone(b)
	clear(torn[usedA+(usedB-usedA)/2:])
	crashed := copyDir(t, tmpl.dir)
	seg := filepath.Join(crashed, "raft", walDirName, filepath.Base(tail))
	if err := os.WriteFile(seg, torn, 0o600); err != nil {
		t.Fatal(err)
	}
	if rep, _ := storage.VerifyDir(crashed); rep.TornBytes == 0 {
		t.Fatal("the crafted torn append is not seen as one")
	}
	got, err := openDamaged(t, crashed)
	if err != nil || !bytes.Equal(got, tmpl.want) {
		t.Fatalf("after a torn append: err %v, the acknowledged tree served %v", err, bytes.Equal(got, tmpl.want))
	}
	if rep, err := storage.VerifyDir(crashed); err != nil || rep.TornBytes != 0 {
		t.Fatalf("%d torn bytes left after the start (%v)", rep.TornBytes, err)
	}
	// Appends continue after the recovered end, across a restart.
	n, err = New(memStandaloneConfig(t, crashed))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "leadership", n.IsLeader)
	if _, err := n.Propose(ctxT(t, 10*time.Second), createReq("/after", []byte("y"), jute.ModePersistent)); err != nil {
		t.Fatal(err)
	}
	n.Shutdown()
	n, err = New(memStandaloneConfig(t, crashed))
	if err != nil {
		t.Fatalf("restart after appending past a torn tail: %v", err)
	}
	defer n.Shutdown()
	eventually(t, 10*time.Second, "leadership", n.IsLeader)
	if err := n.Sync(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := getData(t, n, "/after"); !ok {
		t.Fatal("the write after the recovery is gone")
	}
	if _, _, ok := getData(t, n, "/unacknowledged"); ok {
		t.Fatal("the torn append was applied")
	}
}

// TestDamagedMemberRefusesAndRejoins: in a 3-node cluster one follower's newest log segment is
// damaged while it is stopped. It refuses to start (the default policy) and the other two go on
// taking writes. The operator's remedy, a fresh directory and a start as a member-to-be
// (NoBootstrap, as zkd -join), brings it back with every acknowledged write.
func TestDamagedMemberRefusesAndRejoins(t *testing.T) {
	synctest.Test(t, testDamagedMemberRefusesAndRejoins)
}

func testDamagedMemberRefusesAndRejoins(t *testing.T) {
	c := newBubbleCluster(t, 3, false, nil)
	ctx := ctxT(t, 60*time.Second)
	l := c.leader()
	data := bytes.Repeat([]byte("payload-"), 16)
	var acked []string
	for i := range 50 {
		p := fmt.Sprintf("/a%02d", i)
		if _, err := l.Propose(ctx, createReq(p, data, jute.ModePersistent)); err != nil {
			t.Fatal(err)
		}
		acked = append(acked, p)
	}
	c.converge()
	victim := c.followers()[0].ID()
	c.stop(victim)
	segs, _ := filepath.Glob(filepath.Join(c.dirs[victim], "raft", walDirName, "*.wal"))
	seg := segs[len(segs)-1]
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.LastIndex(b, data)
	if at < 0 {
		t.Fatal("no entry data in the newest segment")
	}
	b[at+3] ^= 0x40
	if err := os.WriteFile(seg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := c.network(victim).Listen(c.addrs[victim])
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(c.config(victim, ln))
	var d *DamageError
	if !errors.As(err, &d) || d.File != seg {
		t.Fatalf("the damaged member started or failed otherwise: %v", err)
	}
	ln.Close()
	l = c.leader()
	for i := range 20 {
		p := fmt.Sprintf("/b%02d", i)
		if _, err := l.Propose(ctx, createReq(p, data, jute.ModePersistent)); err != nil {
			t.Fatalf("write with one member refusing: %v", err)
		}
		acked = append(acked, p)
	}
	// The remedy: its directory moved aside, it starts empty and waits for the leader.
	c.dirs[victim] = t.TempDir()
	tweak := c.tweak
	c.tweak = func(cfg *Config) {
		if tweak != nil {
			tweak(cfg)
		}
		if cfg.ID == victim {
			cfg.NoBootstrap = true
		}
	}
	c.start(victim)
	n := c.nodes[victim]
	eventually(t, 30*time.Second, victim+" to catch up", func() bool { return n.LastZxid() >= l.LastZxid() })
	for _, p := range acked {
		if _, _, ok := getData(t, n, p); !ok {
			t.Fatalf("%s lacks acknowledged %s after rejoining", victim, p)
		}
	}
}

// TestRebuildOnDamage: with RebuildOnDamage, a cluster member whose log is damaged sets its
// directory aside, keeps its term and vote, and comes back empty to be filled by the leader with
// every acknowledged write.
func TestRebuildOnDamage(t *testing.T) { synctest.Test(t, testRebuildOnDamage) }

func testRebuildOnDamage(t *testing.T) {
	rebuild := ""
	c := newBubbleCluster(t, 3, false, func(cfg *Config) { cfg.RebuildOnDamage = cfg.ID == rebuild })
	ctx := ctxT(t, 60*time.Second)
	l := c.leader()
	data := bytes.Repeat([]byte("payload-"), 16)
	var acked []string
	for i := range 50 {
		p := fmt.Sprintf("/a%02d", i)
		if _, err := l.Propose(ctx, createReq(p, data, jute.ModePersistent)); err != nil {
			t.Fatal(err)
		}
		acked = append(acked, p)
	}
	c.converge()
	victim := c.followers()[0]
	id, term := victim.ID(), victim.raft.CurrentTerm()
	c.stop(id)
	segs, _ := filepath.Glob(filepath.Join(c.dirs[id], "raft", walDirName, "*.wal"))
	b, _ := os.ReadFile(segs[len(segs)-1])
	at := bytes.LastIndex(b, data)
	if at < 0 {
		t.Fatal("no entry data in the newest segment")
	}
	b[at+3] ^= 0x40
	if err := os.WriteFile(segs[len(segs)-1], b, 0o600); err != nil {
		t.Fatal(err)
	}
	rebuild = id
	c.start(id)
	n := c.nodes[id]
	if got := n.raft.CurrentTerm(); got < term {
		t.Fatalf("the rebuilt member's term is %d, below the %d it had", got, term)
	}
	aside, _ := filepath.Glob(filepath.Join(c.dirs[id], "raft.damaged-*"))
	if len(aside) != 1 {
		t.Fatalf("the damaged directory was not set aside: %v", aside)
	}
	l = c.leader()
	if _, err := l.Propose(ctx, createReq("/after", nil, jute.ModePersistent)); err != nil {
		t.Fatal(err)
	}
	acked = append(acked, "/after")
	eventually(t, 30*time.Second, id+" to catch up", func() bool { return n.LastZxid() >= l.LastZxid() })
	for _, p := range acked {
		if _, _, ok := getData(t, n, p); !ok {
			t.Fatalf("%s lacks acknowledged %s after the rebuild", id, p)
		}
	}
}
