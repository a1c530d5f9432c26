package zkfile

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/zkd-io/zkd/jute"
)

// Node is one znode of a rebuilt tree.
type Node struct {
	Data     []byte
	ACL      []jute.ACL // nil for ZooKeeper's unnamed open ACL (reference -1 in a snapshot)
	Stat     Stat
	Children map[string]*Node // each child by name; nil while there are none (most nodes are leaves)
	// path is the node's key in the tree ("" for the root): the walk from the root takes each
	// node's path from here, not from a lookup of a path it put together.
	path string
	// digest is the node's digest while the tree's sum counts it (digest.go).
	digest uint64
}

// addChild records a child under its name.
func (n *Node) addChild(name string, c *Node) {
	if n.Children == nil {
		n.Children = make(map[string]*Node)
	}
	n.Children[name] = c
}

// State is the data a ZooKeeper server loads: a snapshot with the logged transactions after it
// applied exactly as ZooKeeper applies them on start.
type State struct {
	// Zxid is the last transaction applied (the snapshot's zxid when no log follows it).
	Zxid int64
	// Nodes maps each path to its node; the root is "/".
	Nodes map[string]*Node
	// Sessions maps each live session to its timeout in milliseconds.
	Sessions map[int64]int32
}

// Container and TTL nodes are marked by special ephemeral owners.
const (
	containerOwner = int64(-1 << 63)
	ttlMarker      = 0xFF
)

// Owner classifies an ephemeral owner as ZooKeeper does with extended types enabled.
func Owner(owner int64) (session int64, container bool, ttl int64) {
	switch {
	case owner == containerOwner:
		return 0, true, 0
	case uint64(owner)>>56 == ttlMarker:
		return 0, false, owner & (1<<56 - 1)
	}
	return owner, false, 0
}

// key maps a path to ZooKeeper's internal key: the root is "".
func key(path string) string {
	if path == "/" {
		return ""
	}
	return path
}

// split returns a path's parent key and its last component.
func split(path string) (string, string) {
	i := strings.LastIndexByte(path, '/')
	if i < 0 {
		return "", path
	}
	return path[:i], path[i+1:]
}

// tree is the state while it is rebuilt: keys as ZooKeeper keeps them (the root is "").
type tree struct {
	nodes      map[string]*Node
	sessions   map[int64]int32
	ephemerals map[int64]map[string]struct{}
	zxid       int64
	// parentKey and parent are the parent of the last node created: logged creates come in runs
	// under one parent (a multi of a table's leaves), so most find it here and not in nodes, a
	// map of millions of paths. A delete of parentKey clears it.
	parentKey string
	parent    *Node
	// keepDigest, digestSum, dirty and scratch keep the tree's digest (digest.go).
	keepDigest bool
	digestSum  uint64
	dirty      []*Node
	scratch    []byte
}

// lookupParent returns the node at key, through the last parent created under.
func (t *tree) lookupParent(key string) *Node {
	if t.parent != nil && t.parentKey == key {
		return t.parent
	}
	p := t.nodes[key]
	if p != nil {
		t.parentKey, t.parent = key, p
	}
	return p
}

// FromSnapshot builds the state a snapshot holds.
func FromSnapshot(s *Snapshot) (*State, error) {
	t, err := newTree(s)
	if err != nil {
		return nil, err
	}
	return t.takeState(), nil
}

func newTree(s *Snapshot) (*tree, error) {
	b := newBuilder(len(s.Nodes), true)
	for _, sn := range s.Nodes {
		if err := b.add(s, sn); err != nil {
			return nil, err
		}
	}
	return b.finish(s)
}

// builder builds a tree from a snapshot's nodes as they are read, each parent before its
// children (ZooKeeper writes its tree depth first).
type builder struct {
	t *tree
	// stack is the path from the root to the last node added: where the parent of the next node
	// is found, unless the order is not depth first (then it is looked up).
	stack []*Node
	err   error // the first node that does not fit: later ones are passed over
}

// newBuilder returns a builder for a tree of about size nodes, keeping its digest as it changes
// if keepDigest is set.
func newBuilder(size int, keepDigest bool) *builder {
	return &builder{t: &tree{
		nodes:      make(map[string]*Node, size),
		ephemerals: make(map[int64]map[string]struct{}),
		keepDigest: keepDigest,
	}}
}

// add adds a node of snapshot s. A node that does not fit the tree is recorded in b.err, and
// add goes on taking nodes without adding them, so that the rest of the file is still read and
// checked: a snapshot that fails its checksum is passed over, not refused.
func (b *builder) add(s *Snapshot, sn SnapNode) error {
	if b.err != nil {
		return nil
	}
	t := b.t
	n := &Node{Data: sn.Data, Stat: sn.Stat, path: sn.Path}
	if sn.ACL != OpenACL {
		n.ACL = s.ACLs[sn.ACL]
	}
	if sn.Path == "" {
		if t.nodes[""] != nil {
			b.err = fmt.Errorf("snapshot holds %q twice", sn.Path)
			return nil
		}
	} else {
		if sn.Path[0] != '/' {
			b.err = fmt.Errorf("snapshot holds a node with a bad path %q", sn.Path)
			return nil
		}
		parent, name := split(sn.Path)
		for len(b.stack) > 0 && b.stack[len(b.stack)-1].path != parent {
			b.stack = b.stack[:len(b.stack)-1]
		}
		var p *Node
		if len(b.stack) > 0 {
			p = b.stack[len(b.stack)-1]
		} else if p = t.nodes[parent]; p != nil {
			b.stack = append(b.stack, p)
		}
		if p == nil {
			b.err = fmt.Errorf("snapshot holds %q before its parent", sn.Path)
			return nil
		}
		if _, dup := p.Children[name]; dup {
			b.err = fmt.Errorf("snapshot holds %q twice", sn.Path)
			return nil
		}
		p.addChild(name, n)
	}
	b.stack = append(b.stack, n)
	t.nodes[sn.Path] = n
	t.added(n)
	t.addEphemeral(sn.Path, sn.Stat.EphemeralOwner)
	return nil
}

// finish returns the tree of snapshot s once all its nodes are added.
func (b *builder) finish(s *Snapshot) (*tree, error) {
	if b.err != nil {
		return nil, b.err
	}
	if b.t.nodes[""] == nil {
		return nil, errors.New("snapshot has no root node")
	}
	b.t.sessions, b.t.zxid = maps.Clone(s.Sessions), s.Zxid
	return b.t, nil
}

func (t *tree) addEphemeral(path string, owner int64) {
	if s, _, _ := Owner(owner); s != 0 {
		set := t.ephemerals[s]
		if set == nil {
			set = make(map[string]struct{})
			t.ephemerals[s] = set
		}
		set[path] = struct{}{}
	}
}

// state returns a copy of the tree's state, the root under "/".
func (t *tree) state() *State {
	st := &State{Zxid: t.zxid, Nodes: make(map[string]*Node, len(t.nodes)), Sessions: t.sessions}
	for k, n := range t.nodes {
		if k == "" {
			k = "/"
		}
		st.Nodes[k] = n
	}
	return st
}

// takeState is state for a tree that is done with: the state takes over its map, and only the
// root moves (copying the map cost 5.7 s of CPU in a profile of an 11 M-node load).
func (t *tree) takeState() *State {
	st := &State{Zxid: t.zxid, Nodes: t.nodes, Sessions: t.sessions}
	if root, ok := st.Nodes[""]; ok {
		delete(st.Nodes, "")
		st.Nodes["/"] = root
	}
	t.nodes = nil
	return st
}

// Ephemerals returns the paths session owns, sorted.
func (s *State) Ephemerals(session int64) []string {
	var out []string
	for p, n := range s.Nodes {
		if o, _, _ := Owner(n.Stat.EphemeralOwner); o == session && o != 0 {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// errNoNode and errNodeExists are what ZooKeeper's tree reports while replaying; like ZooKeeper,
// replay records them and goes on (a fuzzy snapshot may already hold a change).
var (
	errNoNode     = errors.New("no node")
	errNodeExists = errors.New("node exists")
)

// apply applies one logged transaction as ZooKeeper does when it loads its logs.
func (t *tree) apply(x *Txn) {
	h := x.Header
	switch h.Type {
	case jute.OpCreateSession:
		t.sessions[h.ClientID] = x.Op.Timeout
	case jute.OpCloseSession:
		delete(t.sessions, h.ClientID)
	}
	err := t.applyOp(h, &x.Op)
	if h.Type == jute.OpCreate && errors.Is(err, errNodeExists) {
		// The node was in the fuzzy snapshot already: bring the parent's cversion and pzxid up.
		parent, _ := split(x.Op.Path)
		t.setCversionPzxid(parent, x.Op.ParentCVersion, h.Zxid)
	}
	t.zxid = h.Zxid
}

func (t *tree) applyOp(h TxnHeader, op *Op) error {
	switch op.Type {
	case jute.OpCreate, jute.OpCreate2:
		owner := int64(0)
		if op.Ephemeral {
			owner = h.ClientID
		}
		return t.create(op, owner, h)
	case jute.OpCreateTTL:
		return t.create(op, ttlOwner(op.TTL), h)
	case jute.OpCreateContainer:
		return t.create(op, containerOwner, h)
	case jute.OpDelete, jute.OpDeleteContainer:
		return t.delete(op.Path, h.Zxid)
	case jute.OpSetData, jute.OpReconfig:
		n := t.nodes[key(op.Path)]
		if n == nil {
			return errNoNode
		}
		t.changing(n)
		n.Data, n.Stat.Mtime, n.Stat.Mzxid, n.Stat.Version = op.Data, h.Time, h.Zxid, op.Version
	case jute.OpSetACL:
		n := t.nodes[key(op.Path)]
		if n == nil {
			return errNoNode
		}
		t.changing(n)
		n.Stat.Aversion, n.ACL = op.Version, op.ACL
	case jute.OpCloseSession:
		local := t.ephemerals[h.ClientID]
		delete(t.ephemerals, h.ClientID)
		for _, p := range op.Paths {
			_ = t.delete(p, h.Zxid)
			delete(local, p)
		}
		for _, p := range slices.Sorted(maps.Keys(local)) {
			_ = t.delete(p, h.Zxid)
		}
	case jute.OpMulti:
		failed := slices.ContainsFunc(op.Multi, func(s Op) bool { return s.Type == jute.OpError })
		if failed {
			return nil // every operation of a failed multi is an error record: nothing changes
		}
		var first error
		for i := range op.Multi {
			sh := h
			sh.Type = op.Multi[i].Type
			if err := t.applyOp(sh, &op.Multi[i]); err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	return nil
}

func (t *tree) create(op *Op, owner int64, h TxnHeader) error {
	parentKey, name := split(op.Path)
	parent := t.lookupParent(parentKey)
	if parent == nil {
		return errNoNode
	}
	// A node is in nodes exactly when it is among its parent's children: the parent's map is
	// the smaller one to ask.
	if existing := parent.Children[name]; existing != nil {
		existing.ACL = op.ACL // ZooKeeper replaces the ACL even then
		return errNodeExists
	}
	cv := op.ParentCVersion
	if cv == -1 {
		cv = parent.Stat.Cversion + 1
	}
	if cv > parent.Stat.Cversion {
		t.changing(parent)
		parent.Stat.Cversion, parent.Stat.Pzxid = cv, h.Zxid
	}
	n := &Node{
		Data: op.Data,
		ACL:  op.ACL,
		Stat: Stat{Czxid: h.Zxid, Mzxid: h.Zxid, Pzxid: h.Zxid, Ctime: h.Time, Mtime: h.Time,
			EphemeralOwner: owner},
		path: op.Path,
	}
	parent.addChild(name, n)
	t.nodes[op.Path] = n
	t.added(n)
	t.addEphemeral(op.Path, owner)
	return nil
}

func (t *tree) delete(path string, zxid int64) error {
	parentKey, name := split(path)
	parent := t.nodes[parentKey]
	if parent == nil {
		return errNoNode
	}
	delete(parent.Children, name)
	if zxid > parent.Stat.Pzxid {
		t.changing(parent)
		parent.Stat.Pzxid = zxid
	}
	n := t.nodes[path]
	if n == nil {
		return errNoNode
	}
	delete(t.nodes, path)
	t.removed(n)
	if t.parent != nil && t.parentKey == path {
		t.parentKey, t.parent = "", nil
	}
	if s, _, _ := Owner(n.Stat.EphemeralOwner); s != 0 {
		delete(t.ephemerals[s], path)
	}
	return nil
}

func (t *tree) setCversionPzxid(path string, cv int32, zxid int64) {
	n := t.nodes[path]
	if n == nil {
		return
	}
	if cv == -1 {
		cv = n.Stat.Cversion + 1
	}
	if cv > n.Stat.Cversion {
		t.changing(n)
		n.Stat.Cversion, n.Stat.Pzxid = cv, zxid
	}
}

// ttlOwner is the ephemeral owner ZooKeeper stores for a TTL node: 0xFF in the top byte, the
// TTL in milliseconds below it.
func ttlOwner(ttl int64) int64 {
	return int64(uint64(ttlMarker)<<56 | uint64(ttl)&(1<<56-1))
}

// ClientStat is the node's Stat as ZooKeeper shows it to clients, which differs from what it
// persists in two ways: the cversion a client sees is twice the persisted one less the number
// of children (ZooKeeper persists a count that only creates raise, and derives from it a
// cversion that deletes raise too), and containers and TTL nodes show no ephemeral owner.
func (n *Node) ClientStat() jute.Stat {
	owner, _, _ := Owner(n.Stat.EphemeralOwner)
	kids := int32(len(n.Children))
	return jute.Stat{
		Czxid: n.Stat.Czxid, Mzxid: n.Stat.Mzxid, Ctime: n.Stat.Ctime, Mtime: n.Stat.Mtime,
		Version: n.Stat.Version, Cversion: n.Stat.Cversion*2 - kids, Aversion: n.Stat.Aversion,
		EphemeralOwner: owner, DataLength: int32(len(n.Data)), NumChildren: kids, Pzxid: n.Stat.Pzxid,
	}
}
