package zkfile

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zkd-io/zkd/znode"
)

// snapDir writes nodes, yielded in the given order, as ZooKeeper's snapshot at zxid in a new
// dataDir, and returns that dataDir.
func snapDir(t *testing.T, zxid int64, nodes []znode.RawNode) string {
	t.Helper()
	dir := t.TempDir()
	v2 := filepath.Join(dir, "version-2")
	if err := os.MkdirAll(v2, 0o755); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	err := WriteSnapshot(&buf, map[int64]int32{7: 4000}, func(fn func(znode.RawNode) error) error {
		for _, n := range nodes {
			if err := fn(n); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(v2, fmt.Sprintf("snapshot.%x", zxid)), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// bigTree is a tree of some thousands of nodes, parents before children in pre-order, with one
// node's data larger than the reader's buffer and many fields across its refills.
func bigTree() []znode.RawNode {
	nodes := []znode.RawNode{{Path: "/"}, {Path: "/zookeeper"}, {Path: "/zookeeper/quota"}}
	for d := range 20 {
		dir := fmt.Sprintf("/d%02d", d)
		nodes = append(nodes, znode.RawNode{Path: dir, Czxid: int64(d + 1), Data: []byte(dir)})
		for i := range 150 {
			p := fmt.Sprintf("%s/n%03d", dir, i)
			nodes = append(nodes, znode.RawNode{Path: p, Czxid: int64(i + 1), Mzxid: int64(i + 2), Data: bytes.Repeat([]byte{byte(i)}, i)})
			if i%50 == 0 {
				nodes = append(nodes, znode.RawNode{Path: p + "/leaf", Data: bytes.Repeat([]byte("x"), readBuffer+i)})
			}
		}
	}
	return nodes
}

// depth orders nodes breadth first: still each parent before its children, but not depth first,
// so the builder's stack never holds the parent and it is looked up.
func byDepth(nodes []znode.RawNode) []znode.RawNode {
	out := slices.Clone(nodes)
	slices.SortStableFunc(out, func(a, b znode.RawNode) int {
		return strings.Count(strings.TrimSuffix(a.Path, "/"), "/") - strings.Count(strings.TrimSuffix(b.Path, "/"), "/")
	})
	return out
}

// The tree built as the snapshot streams is the one the file holds, whatever order its parents
// come in: the walk into zkd gives back every node, children in name order.
func TestLoadBuildsTreeAsSnapshotStreams(t *testing.T) {
	want := bigTree()
	for name, order := range map[string][]znode.RawNode{"depth first": want, "breadth first": byDepth(want)} {
		t.Run(name, func(t *testing.T) {
			dir := snapDir(t, 0x55, order)
			st, rep, err := Load(dir, "")
			if err != nil {
				t.Fatal(err)
			}
			if st.Zxid != 0x55 || len(st.Nodes) != len(want) || len(rep.SkippedSnaps) != 0 || st.Sessions[7] != 4000 {
				t.Fatalf("zxid %#x, %d nodes (want %d), skipped %v, sessions %v", st.Zxid, len(st.Nodes), len(want), rep.SkippedSnaps, st.Sessions)
			}
			tr, err := st.Tree()
			if err != nil {
				t.Fatal(err)
			}
			var got []znode.RawNode
			if err := tr.View().RawNodes(func(n znode.RawNode) error { got = append(got, n); return nil }); err != nil {
				t.Fatal(err)
			}
			sorted := slices.Clone(want) // RawNodes gives pre-order, children in name order
			slices.SortFunc(sorted, func(a, b znode.RawNode) int { return strings.Compare(a.Path, b.Path) })
			if len(got) != len(sorted) {
				t.Fatalf("%d nodes from the tree, want %d", len(got), len(sorted))
			}
			for i := range got {
				g, w := got[i], sorted[i]
				if g.Path != w.Path || !bytes.Equal(g.Data, w.Data) || g.Czxid != w.Czxid || g.Mzxid != w.Mzxid {
					t.Fatalf("node %d: got %s (%d bytes, czxid %d), want %s (%d bytes, czxid %d)", i, g.Path, len(g.Data), g.Czxid, w.Path, len(w.Data), w.Czxid)
				}
			}
		})
	}
}

// A snapshot whose nodes do not make a tree is refused once it verified; one that also fails its
// checksum is passed over for the one before it, as a damaged snapshot is.
func TestLoadRefusesSnapshotThatIsNoTree(t *testing.T) {
	good := bigTree()[:40]
	for name, tc := range map[string]struct {
		nodes []znode.RawNode
		want  string
	}{
		"twice":       {append(slices.Clone(good), good[10]), "twice"},
		"root twice":  {append(slices.Clone(good), znode.RawNode{Path: "/"}), "twice"},
		"orphan":      {append(slices.Clone(good), znode.RawNode{Path: "/nope/x"}), "before its parent"},
		"child first": {append([]znode.RawNode{good[0], {Path: "/a/b"}, {Path: "/a"}}, good[1:]...), "before its parent"},
		"no root":     {good[1:2], "before its parent"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := snapDir(t, 0x30, tc.nodes)
			if _, _, err := Load(dir, ""); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load = %v; want an error saying %q", err, tc.want)
			}
			// The same bad snapshot with a broken seal, over a good older one: passed over.
			older := snapDir(t, 0x20, good)
			path := filepath.Join(dir, "version-2", "snapshot.30")
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)-10] ^= 0xff // in the seal
			if err := os.WriteFile(filepath.Join(older, "version-2", "snapshot.30"), b, 0o644); err != nil {
				t.Fatal(err)
			}
			st, rep, err := Load(older, "")
			if err != nil || len(rep.SkippedSnaps) != 1 || st.Zxid != 0x20 || len(st.Nodes) != len(good) {
				t.Fatalf("Load = %v, skipped %v; want the older snapshot", err, rep)
			}
		})
	}
}

// A newest snapshot cut short among its nodes is passed over: the nodes already built into a
// tree before the file ended are dropped with it.
func TestLoadPassesOverTruncatedSnapshot(t *testing.T) {
	nodes := bigTree()
	dir := snapDir(t, 0x20, nodes[:100])
	newer := snapDir(t, 0x30, nodes)
	b, err := os.ReadFile(filepath.Join(newer, "version-2", "snapshot.30"))
	if err != nil {
		t.Fatal(err)
	}
	for _, cut := range []int{len(b) / 2, len(b) - 20} {
		if err := os.WriteFile(filepath.Join(dir, "version-2", "snapshot.30"), b[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		st, rep, err := Load(dir, "")
		if err != nil || len(rep.SkippedSnaps) != 1 || st.Zxid != 0x20 || len(st.Nodes) != 100 {
			t.Fatalf("cut at %d of %d: Load = %v, %+v; want the older snapshot's 100 nodes", cut, len(b), err, rep)
		}
	}
}
