package znode

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"

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
//
// The layout fills a 48-byte allocation, less than half of what a plain struct of the same fields
// takes, so a large tree costs little beyond its names and data (docs/architecture.md, "znode
// memory"):
//   - the kind, the name and the data share one allocation (see nodeBytes) that buf points to;
//   - the fields that keep a default for most nodes (mzxid and mtime and version until the first
//     setData, pzxid, cversion and numChildren until the first child, the session or ttl of
//     ephemeral and TTL nodes, aversion) live in x, which is nil while all of them have their
//     defaults.
//
// Fields are read through the accessors below, never directly, except czxid, ctime, acl and kids.
//
// A 48-byte node may straddle two cache lines, but never across its first 16 bytes: buf, which
// every comparison in a child map reads, and kids, which a lookup reads next when it descends.
type node struct {
	buf   *byte // see nodeBytes; never nil
	kids  btree[string, *node]
	acl   *aclSet
	x     *nodeExt // nil: every field of nodeExt has its default
	czxid int64
	ctime int64
}

// nodeExt holds the fields of a node that usually have their defaults. It is never changed once a
// node refers to it: setting one of its fields gives the node a new nodeExt (see applier.ext).
type nodeExt struct {
	mzxid int64 // default czxid
	mtime int64 // default ctime
	pzxid int64 // default czxid
	owner int64 // session id of an ephemeral, ttl of a TTL node, else 0 (the default)
	// cversion as stored counts child creations (ZooKeeper's cversionP); the visible value is
	// 2*cversion - numChildren. Default 0, as aversion, version and numChildren.
	cversion    int32
	aversion    int32
	version     int32
	numChildren int32
}

const (
	kindBits = 2
	kindMask = 1<<kindBits - 1 // the kind's bits in a node's head byte
	// maxNameLen is the longest name a node may have, far beyond any packet a server accepts; the
	// applier checks it all the same, and a snapshot's fields are bounded well below it.
	maxNameLen = 1<<30 - 1
)

// nodeBytes returns the one allocation that holds a node's kind, name and data:
//
//	head  name  uvarint(len(data)+1, or 0 for null data)  data
//
// The head is one byte, len(name)<<2 | kind, for a name under 63 bytes; for a longer name it is
// 63<<2 | kind followed by the length in four bytes, little-endian. Null data is kept apart from
// empty data, as ZooKeeper does. The name comes first, behind a fixed-form length, because the
// child maps read it on every comparison: name decodes it without a loop or a call.
func nodeBytes(kind nodeKind, name string, data []byte) *byte {
	dlen := uint64(0)
	if data != nil {
		dlen = uint64(len(data)) + 1
	}
	size := 1 + len(name) + uvarintLen(dlen) + len(data)
	if len(name) >= longName {
		size += 4
	}
	b := make([]byte, 0, size)
	if len(name) < longName {
		b = append(b, byte(len(name)<<kindBits)|byte(kind))
	} else {
		b = append(b, longName<<kindBits|byte(kind))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(name)))
	}
	b = append(b, name...)
	b = binary.AppendUvarint(b, dlen)
	b = append(b, data...)
	return &b[0]
}

// longName in a head's length bits says that the name's length follows in four bytes.
const longName = 1<<(8-kindBits) - 1

func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

// uvarintAt decodes the uvarint at p, which nodeBytes wrote, and returns it and its width.
func uvarintAt(p *byte) (uint64, uintptr) {
	var v uint64
	for i := uintptr(0); ; i++ {
		b := *(*byte)(unsafe.Add(unsafe.Pointer(p), i))
		v |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			return v, i + 1
		}
	}
}

// head returns the node's kind, its name's length and where the name starts.
func (n *node) head() (nodeKind, uintptr, uintptr) { return headAt(n.buf) }

// headAt is head for the nodeBytes at buf.
func headAt(buf *byte) (nodeKind, uintptr, uintptr) {
	p := unsafe.Pointer(buf)
	h := *(*byte)(p)
	if l := uintptr(h >> kindBits); l < longName {
		return nodeKind(h & kindMask), l, 1
	}
	b := (*[5]byte)(p)
	return nodeKind(h & kindMask), uintptr(binary.LittleEndian.Uint32(b[1:])), 5
}

// dataAt returns the data's offset in buf and its stored length (len+1, 0 for null data).
func (n *node) dataAt() (uintptr, uint64) {
	_, nlen, off := n.head()
	v, w := uvarintAt((*byte)(unsafe.Add(unsafe.Pointer(n.buf), off+nlen)))
	return off + nlen + w, v
}

// newNode returns a node with the given name, data (copied), kind and creation stamp; everything
// else has its default.
func newNode(name string, data []byte, kind nodeKind, acl *aclSet, zxid, time int64) *node {
	return &node{buf: nodeBytes(kind, name, data), acl: acl, czxid: zxid, ctime: time}
}

// setKind changes the kind of a node that nothing else has seen yet: the kind is in the low bits
// of the first byte of buf, which only this node refers to.
func (n *node) setKind(k nodeKind) {
	*n.buf = *n.buf&^kindMask | byte(k)
}

// setData replaces the node's data with a copy of data.
func (n *node) setData(data []byte) { n.buf = nodeBytes(n.kind(), n.name(), data) }

// name is inlined into key, which the child maps call on every comparison, and inlines wholly
// (nameAt and headAt with it).
func (n *node) name() string { return nameAt(n.buf) }

// nameAt is name for the nodeBytes at buf.
func nameAt(buf *byte) string {
	_, nlen, off := headAt(buf)
	return unsafe.String((*byte)(unsafe.Add(unsafe.Pointer(buf), off)), nlen)
}

// data returns the node's data, nil for null data. The slice shares the node's allocation and must
// not be modified.
func (n *node) data() []byte {
	off, dlen := n.dataAt()
	switch dlen {
	case 0:
		return nil
	case 1:
		return []byte{} // not a pointer to the allocation's end
	}
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(n.buf), off)), dlen-1)
}

// dataLen is len(n.data()).
func (n *node) dataLen() int {
	_, dlen := n.dataAt()
	return int(max(dlen, 1) - 1)
}

func (n *node) kind() nodeKind {
	k, _, _ := n.head()
	return k
}

func (n *node) mzxid() int64 {
	if n.x == nil {
		return n.czxid
	}
	return n.x.mzxid
}

func (n *node) mtime() int64 {
	if n.x == nil {
		return n.ctime
	}
	return n.x.mtime
}

func (n *node) pzxid() int64 {
	if n.x == nil {
		return n.czxid
	}
	return n.x.pzxid
}

func (n *node) owner() int64 {
	if n.x == nil {
		return 0
	}
	return n.x.owner
}

func (n *node) cversion() int32 {
	if n.x == nil {
		return 0
	}
	return n.x.cversion
}

func (n *node) aversion() int32 {
	if n.x == nil {
		return 0
	}
	return n.x.aversion
}

func (n *node) version() int32 {
	if n.x == nil {
		return 0
	}
	return n.x.version
}

func (n *node) numChildren() int32 {
	if n.x == nil {
		return 0
	}
	return n.x.numChildren
}

// ext returns a copy of n's nodeExt (the defaults when it has none) for the caller to change and
// store back in n.x. Only a node that Apply owns (see applier.own) may get one stored.
func (n *node) ext() *nodeExt {
	if n.x == nil {
		return &nodeExt{mzxid: n.czxid, mtime: n.ctime, pzxid: n.czxid}
	}
	x := *n.x
	return &x
}

// setExt stores x as n's nodeExt, or none if every field of x has its default.
func (n *node) setExt(x nodeExt) {
	if x == (nodeExt{mzxid: n.czxid, mtime: n.ctime, pzxid: n.czxid}) {
		n.x = nil
		return
	}
	n.x = &x
}

// descendants counts the nodes below n (getAllChildrenNumber). Like ZooKeeper, which counts the
// paths under the node's, it visits them all.
func descendants(n *node) int32 {
	var count int32
	var walk func(*node) bool
	walk = func(c *node) bool {
		count++
		return c.kids.ascend(walk)
	}
	n.kids.ascend(walk)
	return count
}

// stat returns the node's Stat as ZooKeeper reports it.
func (n *node) stat() jute.Stat {
	s := jute.Stat{
		Czxid:      n.czxid,
		Mzxid:      n.czxid,
		Ctime:      n.ctime,
		Mtime:      n.ctime,
		DataLength: int32(n.dataLen()),
		Pzxid:      n.czxid,
	}
	if x := n.x; x != nil {
		s.Mzxid, s.Mtime, s.Pzxid = x.mzxid, x.mtime, x.pzxid
		s.Version = x.version
		s.Cversion = 2*x.cversion - x.numChildren
		s.Aversion = x.aversion
		s.NumChildren = x.numChildren
		if n.kind() == kindEphemeral {
			s.EphemeralOwner = x.owner
		}
	}
	return s
}

func (n *node) key() string { return n.name() }

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
	// noTransients makes multis and batches copy every node they change, as Apply's single ops do,
	// instead of changing their own copies in place; the tests compare the two.
	noTransients bool
	// freshWalks makes every rewrite walk from the root instead of reusing find's walk; the
	// tests compare the two.
	freshWalks bool
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
	config := newNode("config", []byte{}, kindPersistent, readOnly, 0, 0)
	config.x = config.ext()
	config.x.aversion = -1
	quota := newNode("quota", []byte{}, kindPersistent, open, 0, 0)
	zk := newNode("zookeeper", []byte{}, kindPersistent, open, 0, 0)
	zk.x = zk.ext()
	zk.x.numChildren = 2
	zk.kids, _ = zk.kids.set(config)
	zk.kids, _ = zk.kids.set(quota)
	root := newNode("", []byte{}, kindPersistent, open, 0, 0)
	root.x = root.ext()
	root.x.numChildren = 1
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
