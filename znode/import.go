package znode

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"strconv"
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
// every parent must be among them, the root included. It orders them and hands them to
// ImportWalk.
func ImportTree(zxid int64, sessions []Session, nodes []RawNode) (*Tree, error) {
	index := make(map[string]int32, len(nodes))
	for i := range nodes {
		if _, dup := index[nodes[i].Path]; dup {
			return nil, fmt.Errorf("znode: import: %q twice", nodes[i].Path)
		}
		index[nodes[i].Path] = int32(i)
	}
	root, ok := index["/"]
	if !ok {
		return nil, fmt.Errorf("znode: import: no root node")
	}
	// The children of node i are kids[start[i]:start[i+1]], in name order.
	parent := make([]int32, len(nodes))
	start := make([]int32, len(nodes)+1)
	for i := range nodes {
		p := nodes[i].Path
		if p == "/" {
			parent[i] = -1
			continue
		}
		pp := p[:max(strings.LastIndexByte(p, '/'), 1)]
		j, ok := index[pp]
		if !ok || !strings.HasPrefix(p, "/") {
			return nil, fmt.Errorf("znode: import: %q has no parent", p)
		}
		parent[i] = j
		start[j+1]++
	}
	clear(index)
	for i := range nodes {
		start[i+1] += start[i]
	}
	kids := make([]int32, len(nodes))
	fill := slices.Clone(start[:len(nodes)])
	for i, p := range parent {
		if p >= 0 {
			kids[fill[p]] = int32(i)
			fill[p]++
		}
	}
	name := func(i int32) string { p := nodes[i].Path; return p[strings.LastIndexByte(p, '/')+1:] }
	for i := range nodes {
		slices.SortFunc(kids[start[i]:start[i+1]], func(a, b int32) int { return strings.Compare(name(a), name(b)) })
	}
	return ImportWalk(zxid, sessions, int64(len(nodes)), func(emit func(*RawNode, int) error) error {
		var visit func(i int32) error
		visit = func(i int32) error {
			ks := kids[start[i]:start[i+1]]
			if err := emit(&nodes[i], len(ks)); err != nil {
				return err
			}
			for _, k := range ks {
				if err := visit(k); err != nil {
					return err
				}
			}
			return nil
		}
		return visit(root)
	})
}

// errImportStopped tells ImportWalk's encoder that the snapshot reader stopped reading.
var errImportStopped = errors.New("znode: import: the reader stopped")

// ImportWalk builds a tree at zxid from sessions and the count nodes walk gives to emit: in
// pre-order (a node, then the subtrees of its children), children in name order, each with its
// number of children, the root ("/") first. The nodes stream through the snapshot reader as they
// are encoded, so an imported tree meets every check a restored one does (names, order, counts,
// checksum), its derived indexes (each session's ephemerals, containers, TTL nodes, quotas) are
// built the same way, and the encoded snapshot is never held whole. An error from walk or emit
// ends the import and is returned.
func ImportWalk(zxid int64, sessions []Session, count int64, walk func(emit func(n *RawNode, children int) error) error) (*Tree, error) {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { // the encoder; ImportWalk waits for it
		err := encodeImport(pw, zxid, sessions, count, walk)
		_ = pw.CloseWithError(err)
		done <- err
	}()
	t, rerr := ReadSnapshot(bufio.NewReaderSize(pr, 1<<20))
	_ = pr.CloseWithError(errImportStopped)
	if werr := <-done; werr != nil && !errors.Is(werr, errImportStopped) {
		return nil, werr
	}
	if rerr != nil {
		return nil, fmt.Errorf("znode: import: %w", rerr)
	}
	return t, nil
}

// encodeImport writes the snapshot of ImportWalk's nodes to w, a megabyte at a time.
func encodeImport(w io.Writer, zxid int64, sessions []Session, count int64, walk func(emit func(*RawNode, int) error) error) error {
	e := jute.NewEncoder(make([]byte, 0, 1<<20+64<<10))
	var crc uint32
	flush := func() error {
		crc = crc32.Update(crc, crcTable, e.Bytes())
		_, err := w.Write(e.Bytes())
		e.Reset()
		return err
	}
	hdr := jute.NewEncoder([]byte(snapMagic))
	hdr.Int32(snapVersion)
	hdr.Int64(zxid)
	ss := slices.Clone(sessions)
	slices.SortFunc(ss, func(a, b Session) int { return cmp.Compare(a.ID, b.ID) })
	hdr.Int32(int32(len(ss)))
	for _, s := range ss {
		hdr.Int64(s.ID)
		hdr.Int32(s.Timeout)
		hdr.Buffer(s.Passwd)
		hdr.Int64(0) // no ordered write yet
		hdr.Int64(0)
	}
	hdr.Int64(count)
	crc = crc32.Update(crc, crcTable, hdr.Bytes())
	if _, err := w.Write(hdr.Bytes()); err != nil {
		return err
	}
	var acls aclRefs
	var emitted int64
	err := walk(func(n *RawNode, children int) error {
		name := ""
		if emitted > 0 {
			if err := ValidatePath(n.Path); err != nil {
				return fmt.Errorf("znode: import: %q: %w", n.Path, err)
			}
			name = n.Path[strings.LastIndexByte(n.Path, '/')+1:]
		} else if n.Path != "/" {
			return fmt.Errorf("znode: import: the walk starts at %q, not the root", n.Path)
		}
		emitted++
		if emitted > count {
			return fmt.Errorf("znode: import: more than the %d nodes announced", count)
		}
		acls.encode(e, n.ACL)
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
		e.Int32(int32(children))
		if e.Len() >= 1<<20 {
			return flush()
		}
		return nil
	})
	if err != nil {
		return err
	}
	if emitted != count {
		return fmt.Errorf("znode: import: %d nodes announced, %d given", count, emitted)
	}
	crc = crc32.Update(crc, crcTable, e.Bytes())
	e.Int32(int32(crc))
	_, err = w.Write(e.Bytes())
	return err
}

// aclRefs numbers the distinct ACL lists of an import as the snapshot refers to them: the first
// use of a list writes it after its number, later uses only the number. Most nodes share one
// list, which is compared before any key is built.
type aclRefs struct {
	refs    map[string]int32
	last    []jute.ACL
	lastRef int32
	key     []byte
}

// openACLList is what an empty ACL list stands for: world:anyone with every permission.
var openACLList = []jute.ACL{{Perms: jute.PermAll, ID: jute.Id{Scheme: "world", ID: "anyone"}}}

func (a *aclRefs) encode(e *jute.Encoder, acl []jute.ACL) {
	if len(acl) == 0 {
		acl = openACLList
	}
	if a.refs != nil && slices.Equal(acl, a.last) {
		e.Int32(a.lastRef)
		return
	}
	if a.refs == nil {
		a.refs = map[string]int32{}
	}
	a.key = a.key[:0]
	for i := range acl {
		a.key = strconv.AppendInt(a.key, int64(acl[i].Perms), 10)
		a.key = append(a.key, 0)
		a.key = append(a.key, acl[i].ID.Scheme...)
		a.key = append(a.key, 0)
		a.key = append(a.key, acl[i].ID.ID...)
		a.key = append(a.key, 0)
	}
	ref, ok := a.refs[string(a.key)]
	if !ok {
		ref = int32(len(a.refs))
		a.refs[string(a.key)] = ref
	}
	a.last, a.lastRef = acl, ref
	e.Int32(ref)
	if !ok {
		e.Int32(int32(len(acl)))
		for i := range acl {
			acl[i].Encode(e)
		}
	}
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
