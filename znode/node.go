package znode

import (
	"sync/atomic"

	"github.com/zkd-io/zkd/jute"
)

// nodeKind says what owns a node and how it may be reaped.
type nodeKind uint8

const (
	kindPersistent nodeKind = iota
	kindEphemeral           // owner is the session id
	kindContainer
	kindTTL // owner is the ttl in ms
)

// node is one znode. A node is never modified after it is published: Apply makes a changed copy and
// copies its ancestors (path copying), so any View can read the nodes it reaches without locks. (A
// multi changes the copies it made itself in place; see applier.own.)
// The layout is kept within a 128-byte allocation.
type node struct {
	name  string // the last path segment; "" for the root
	data  []byte // nil is kept apart from empty, as ZooKeeper does
	acl   *aclSet
	kids  btree[string, *node]
	czxid int64
	mzxid int64
	pzxid int64
	ctime int64
	mtime int64
	owner int64 // session id of an ephemeral, ttl of a TTL node, else 0
	// version, cversion and aversion as stored: cversion counts child creations (ZooKeeper's
	// cversionP); the visible value is 2*cversion - numChildren.
	version     int32
	cversion    int32
	aversion    int32
	numChildren int32
	desc        int32 // number of descendants, for getAllChildrenNumber
	kind        nodeKind
}

// stat returns the node's Stat as ZooKeeper reports it.
func (n *node) stat() jute.Stat {
	s := jute.Stat{
		Czxid:       n.czxid,
		Mzxid:       n.mzxid,
		Ctime:       n.ctime,
		Mtime:       n.mtime,
		Version:     n.version,
		Cversion:    2*n.cversion - n.numChildren,
		Aversion:    n.aversion,
		DataLength:  int32(len(n.data)),
		NumChildren: n.numChildren,
		Pzxid:       n.pzxid,
	}
	if n.kind == kindEphemeral {
		s.EphemeralOwner = n.owner
	}
	return s
}

func (n *node) key() string { return n.name }

// session is a row of the session table with the set of its ephemeral nodes' paths.
type session struct {
	Session
	ephemerals btree[string, pathKey]
	// attach and seq are the attachment and position of the session's last ordered write (see
	// Txn.Attach): the next one must be (attach, seq+1), or (a larger attach, 1).
	attach, seq uint64
}

func (s *session) key() int64 { return s.ID }

// View is an immutable, point-in-time state of the tree. It is safe for concurrent use by any
// number of goroutines, and stays valid and unchanged however many transactions are applied after
// it was taken.
type View struct {
	root       *node
	zxid       int64
	sessions   btree[int64, *session]
	containers btree[string, pathKey] // paths of container nodes
	ttls       btree[string, pathKey] // paths of TTL nodes
	quotas     btree[string, pathKey] // quota roots (see quota.go)
	dataSize   int64                  // sum of path and data lengths, as ZooKeeper approximates it
	// Counts are int32, as ZooKeeper's (Java int) are; it keeps the View within 64 bytes.
	nodes      int32 // real nodes, the root included
	ephemerals int32
}

// Tree is the replicated data tree. Apply must be called from one goroutine at a time (consensus
// serialises it); View, LastZxid and everything on a View may be called from any goroutine at any
// time.
type Tree struct {
	cur  atomic.Pointer[View]
	acls aclInterner
	// scratch space for Apply, reused between transactions
	segs  []string
	chain []*node
	// copyMultis makes a multi copy every node it changes, as single ops do, instead of changing
	// its own copies in place; the tests compare the two.
	copyMultis bool
}

// Paths of the nodes every tree has, and the data size ZooKeeper reports for them: its node map holds
// "", "/", "/zookeeper", "/zookeeper/quota" and "/zookeeper/config" (0+1+10+16+17 bytes of keys).
const (
	zookeeperPath = "/zookeeper"
	quotaPath     = "/zookeeper/quota"
	configPath    = "/zookeeper/config"
	baseDataSize  = 44
)

// New returns a fresh tree as a new ZooKeeper server has it: /, /zookeeper, /zookeeper/quota and
// /zookeeper/config, all with zero zxids and times, empty data and the world:anyone ALL ACL, except
// /zookeeper/config, which is world:anyone READ with aversion -1. The root shows cversion -1 and
// /zookeeper cversion -2, because their children were never created by a transaction.
func New() *Tree {
	t := &Tree{}
	open := t.acls.intern([]jute.ACL{{Perms: jute.PermAll, ID: jute.Id{Scheme: "world", ID: "anyone"}}})
	readOnly := t.acls.intern([]jute.ACL{{Perms: jute.PermRead, ID: jute.Id{Scheme: "world", ID: "anyone"}}})
	config := &node{name: "config", data: []byte{}, acl: readOnly, aversion: -1}
	quota := &node{name: "quota", data: []byte{}, acl: open}
	zk := &node{name: "zookeeper", data: []byte{}, acl: open, numChildren: 2, desc: 2}
	zk.kids, _ = zk.kids.set(config)
	zk.kids, _ = zk.kids.set(quota)
	root := &node{data: []byte{}, acl: open, numChildren: 1, desc: 3}
	root.kids, _ = root.kids.set(zk)
	t.cur.Store(&View{root: root, nodes: 4, dataSize: baseDataSize})
	return t
}

// View returns the current state. It is O(1) and does not block Apply.
func (t *Tree) View() *View { return t.cur.Load() }

// LastZxid returns the zxid of the last applied transaction (0 for a fresh tree).
func (t *Tree) LastZxid() int64 { return t.cur.Load().zxid }

// lookup returns the node at path, or nil. It accepts only well-formed paths: anything with an empty
// segment or without the leading '/' is not found.
func (v *View) lookup(path string) *node {
	if path == "/" {
		return v.root
	}
	if len(path) < 2 || path[0] != '/' {
		return nil
	}
	n := v.root
	rest := path[1:]
	for {
		seg := rest
		i := indexSlash(rest)
		if i >= 0 {
			seg = rest[:i]
		}
		if seg == "" {
			return nil
		}
		c, ok := n.kids.get(seg)
		if !ok {
			return nil
		}
		n = c
		if i < 0 {
			return n
		}
		rest = rest[i+1:]
	}
}

func indexSlash(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return i
		}
	}
	return -1
}
