package znode

import (
	"bytes"
	"cmp"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"

	"github.com/zkd-io/zkd/jute"
)

// RawNode is one node with every persisted field: what ImportTree takes and RawNodes gives,
// to move a tree from and to another store (Apache ZooKeeper's files).
type RawNode struct {
	Path                              string // absolute; "/" for the root
	Data                              []byte
	ACL                               []jute.ACL // empty means world:anyone with every permission
	Czxid, Mzxid, Pzxid, Ctime, Mtime int64
	// Cversion is the persisted child version: child creations only, as ZooKeeper persists it
	// (clients see 2*Cversion - children).
	Version, Cversion, Aversion int32
	Ephemeral                   int64 // the owning session of an ephemeral node, else 0
	Container                   bool
	TTL                         int64 // the TTL in milliseconds of a TTL node, else 0
}

// ImportTree builds a tree at zxid from sessions and nodes. The nodes may come in any order;
// every parent must be among them, the root included. It goes through the snapshot reader, so
// an imported tree meets every check a restored one does, and its derived indexes (each
// session's ephemerals, containers, TTL nodes, quotas) are built the same way.
func ImportTree(zxid int64, sessions []Session, nodes []RawNode) (*Tree, error) {
	byPath := make(map[string]*RawNode, len(nodes))
	kids := make(map[string][]string, len(nodes))
	for i := range nodes {
		n := &nodes[i]
		if _, dup := byPath[n.Path]; dup {
			return nil, fmt.Errorf("znode: import: %q twice", n.Path)
		}
		byPath[n.Path] = n
	}
	if byPath["/"] == nil {
		return nil, fmt.Errorf("znode: import: no root node")
	}
	for p := range byPath {
		if p == "/" {
			continue
		}
		if err := ValidatePath(p); err != nil {
			return nil, fmt.Errorf("znode: import: %q: %w", p, err)
		}
		parent := p[:strings.LastIndexByte(p, '/')]
		if parent == "" {
			parent = "/"
		}
		if byPath[parent] == nil {
			return nil, fmt.Errorf("znode: import: %q has no parent", p)
		}
		kids[parent] = append(kids[parent], p[strings.LastIndexByte(p, '/')+1:])
	}
	e := jute.NewEncoder([]byte(snapMagic))
	e.Int32(snapVersion)
	e.Int64(zxid)
	ss := slices.Clone(sessions)
	slices.SortFunc(ss, func(a, b Session) int { return cmp.Compare(a.ID, b.ID) })
	e.Int32(int32(len(ss)))
	for _, s := range ss {
		e.Int64(s.ID)
		e.Int32(s.Timeout)
		e.Buffer(s.Passwd)
		e.Int64(0) // no ordered write yet
		e.Int64(0)
	}
	e.Int64(int64(len(byPath)))
	acls := map[string]int32{}
	var write func(path, name string)
	write = func(path, name string) {
		n := byPath[path]
		acl := n.ACL
		if len(acl) == 0 {
			acl = []jute.ACL{{Perms: jute.PermAll, ID: jute.Id{Scheme: "world", ID: "anyone"}}}
		}
		var kb bytes.Buffer
		for i := range acl {
			fmt.Fprintf(&kb, "%d\x00%s\x00%s\x00", acl[i].Perms, acl[i].ID.Scheme, acl[i].ID.ID)
		}
		if ref, ok := acls[kb.String()]; ok {
			e.Int32(ref)
		} else {
			ref = int32(len(acls))
			acls[kb.String()] = ref
			e.Int32(ref)
			e.Int32(int32(len(acl)))
			for i := range acl {
				acl[i].Encode(e)
			}
		}
		e.String(name)
		e.Buffer(n.Data)
		e.Int64(n.Czxid)
		e.Int64(n.Mzxid)
		e.Int64(n.Pzxid)
		e.Int64(n.Ctime)
		e.Int64(n.Mtime)
		e.Int32(n.Version)
		e.Int32(n.Cversion)
		e.Int32(n.Aversion)
		kind, owner := kindPersistent, int64(0)
		switch {
		case n.Container:
			kind = kindContainer
		case n.TTL > 0:
			kind, owner = kindTTL, n.TTL
		case n.Ephemeral != 0:
			kind, owner = kindEphemeral, n.Ephemeral
		}
		e.Int32(int32(kind))
		e.Int64(owner)
		names := kids[path]
		slices.Sort(names)
		e.Int32(int32(len(names)))
		for _, c := range names {
			cp := path + "/" + c
			if path == "/" {
				cp = "/" + c
			}
			write(cp, c)
		}
	}
	write("/", "")
	e.Int32(int32(crc32.Checksum(e.Bytes(), crcTable)))
	t, err := ReadSnapshot(bytes.NewReader(e.Bytes()))
	if err != nil {
		return nil, fmt.Errorf("znode: import: %w", err)
	}
	return t, nil
}

// RawNodes calls fn for every node of the view in pre-order, children in name order, with its
// persisted fields. fn's error stops the walk and is returned.
func (v *View) RawNodes(fn func(RawNode) error) error {
	return v.walk(func(path string, n *node) error {
		r := RawNode{
			Path: path, Data: n.data(), ACL: n.acl.list,
			Czxid: n.czxid, Mzxid: n.mzxid(), Pzxid: n.pzxid(), Ctime: n.ctime, Mtime: n.mtime(),
			Version: n.version(), Cversion: n.cversion(), Aversion: n.aversion(),
		}
		switch n.kind() {
		case kindEphemeral:
			r.Ephemeral = n.owner()
		case kindContainer:
			r.Container = true
		case kindTTL:
			r.TTL = n.owner()
		}
		return fn(r)
	})
}
