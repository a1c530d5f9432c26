package znode

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/zkd-io/zkd/jute"
)

// ImportTree and RawNodes are each other's mirror: what goes in comes out, field for field.
func TestImportTreeRoundTrip(t *testing.T) {
	acl := []jute.ACL{{Perms: jute.PermRead, ID: jute.Id{Scheme: "digest", ID: "u:x"}}}
	open := []jute.ACL{{Perms: jute.PermAll, ID: jute.Id{Scheme: "world", ID: "anyone"}}}
	in := []RawNode{
		{Path: "/a/e", Data: []byte("e"), ACL: open, Czxid: 7, Mzxid: 7, Pzxid: 7, Ctime: 70, Mtime: 70, Ephemeral: 0x55},
		{Path: "/", ACL: open, Cversion: 3, Pzxid: 9},
		{Path: "/a", Data: []byte("a"), ACL: acl, Czxid: 5, Mzxid: 8, Pzxid: 7, Ctime: 50, Mtime: 80, Version: 2, Cversion: 4, Aversion: 1},
		{Path: "/c", ACL: open, Czxid: 6, Mzxid: 6, Pzxid: 6, Container: true},
		{Path: "/t", Data: []byte{}, ACL: open, Czxid: 9, Mzxid: 9, Pzxid: 9, TTL: 60000},
	}
	tr, err := ImportTree(9, []Session{{ID: 0x55, Timeout: 4000, Passwd: make([]byte, 16)}}, in)
	if err != nil {
		t.Fatal(err)
	}
	v := tr.View()
	if v.Zxid() != 9 || v.NodeCount() != 6 || len(v.Sessions()) != 1 { // NodeCount counts the root twice, as ZooKeeper does
		t.Fatalf("zxid %d, %d nodes, %d sessions", v.Zxid(), v.NodeCount(), len(v.Sessions()))
	}
	if got := v.Ephemerals(0x55); len(got) != 1 || got[0] != "/a/e" {
		t.Errorf("session 0x55 owns %v", got)
	}
	byPath := map[string]RawNode{}
	for _, n := range in {
		byPath[n.Path] = n
	}
	var order []string
	err = v.RawNodes(func(n RawNode) error {
		order = append(order, n.Path)
		if want := byPath[n.Path]; !reflect.DeepEqual(n, want) {
			t.Errorf("%s: got %+v, want %+v", n.Path, n, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(order, []string{"/", "/a", "/a/e", "/c", "/t"}) {
		t.Errorf("order %v, want pre-order with children by name", order)
	}
}

func TestImportTreeRefusesBrokenTrees(t *testing.T) {
	open := []jute.ACL{{Perms: jute.PermAll, ID: jute.Id{Scheme: "world", ID: "anyone"}}}
	for name, nodes := range map[string][]RawNode{
		"no root":       {{Path: "/a", ACL: open}},
		"orphan":        {{Path: "/", ACL: open}, {Path: "/a/b", ACL: open}},
		"twice":         {{Path: "/", ACL: open}, {Path: "/a", ACL: open}, {Path: "/a", ACL: open}},
		"bad path":      {{Path: "/", ACL: open}, {Path: "/a/", ACL: open}},
		"relative path": {{Path: "/", ACL: open}, {Path: "a", ACL: open}},
	} {
		if _, err := ImportTree(1, nil, nodes); err == nil {
			t.Errorf("%s: imported", name)
		}
	}
}

// TestImportWalkRefusesBadWalks gives ImportWalk walks that break its contract: each must fail,
// and a walk's own error must come back as itself.
func TestImportWalkRefusesBadWalks(t *testing.T) {
	node := func(path string) *RawNode { return &RawNode{Path: path} }
	type step struct {
		path string
		kids int
	}
	walkOf := func(steps ...step) func(func(*RawNode, int) error) error {
		return func(emit func(*RawNode, int) error) error {
			for _, s := range steps {
				if err := emit(node(s.path), s.kids); err != nil {
					return err
				}
			}
			return nil
		}
	}
	for name, tc := range map[string]struct {
		count int64
		walk  func(func(*RawNode, int) error) error
	}{
		"not from the root":     {1, walkOf(step{"/a", 0})},
		"fewer than announced":  {3, walkOf(step{"/", 1}, step{"/a", 0})},
		"more than announced":   {1, walkOf(step{"/", 1}, step{"/a", 0})},
		"children out of order": {3, walkOf(step{"/", 2}, step{"/b", 0}, step{"/a", 0})},
		"a child twice":         {3, walkOf(step{"/", 2}, step{"/a", 0}, step{"/a", 0})},
		"a child count too low": {3, walkOf(step{"/", 1}, step{"/a", 0}, step{"/b", 0})},
		"a bad name":            {2, walkOf(step{"/", 1}, step{"/a\x00", 0})},
	} {
		if _, err := ImportWalk(1, nil, tc.count, tc.walk); err == nil {
			t.Errorf("%s: imported", name)
		}
	}
	stop := errors.New("the source failed")
	_, err := ImportWalk(1, nil, 2, func(emit func(*RawNode, int) error) error {
		if err := emit(node("/"), 1); err != nil {
			return err
		}
		return stop
	})
	if !errors.Is(err, stop) {
		t.Errorf("a walk that failed: got %v, want its own error", err)
	}
}

// TestImportTreeLarge imports a tree larger than the encoder's chunk, in shuffled order, and
// reads every node back.
func TestImportTreeLarge(t *testing.T) {
	var nodes []RawNode
	nodes = append(nodes, RawNode{Path: "/"})
	for d := range 50 {
		dir := fmt.Sprintf("/d%02d", d)
		nodes = append(nodes, RawNode{Path: dir, Czxid: int64(d)})
		for i := range 400 {
			nodes = append(nodes, RawNode{Path: fmt.Sprintf("%s/n%04d", dir, i), Data: bytes.Repeat([]byte{byte(i)}, 100), Czxid: int64(i)})
		}
	}
	want := slices.Clone(nodes)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
	tr, err := ImportTree(7, nil, nodes)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]RawNode{}
	if err := tr.View().RawNodes(func(n RawNode) error { got[n.Path] = n; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d nodes, want %d", len(got), len(want))
	}
	for _, n := range want {
		g, ok := got[n.Path]
		if !ok || !bytes.Equal(g.Data, n.Data) || g.Czxid != n.Czxid {
			t.Fatalf("%s: got %+v (%v), want %+v", n.Path, g, ok, n)
		}
	}
}
