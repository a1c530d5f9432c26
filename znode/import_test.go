package znode

import (
	"reflect"
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
