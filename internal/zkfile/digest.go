package zkfile

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strings"
)

// digestVersion is the version of ZooKeeper's tree digest this package computes (3.6 to 3.9).
const digestVersion = 2

// nodeDigest is ZooKeeper's digest of one node: a CRC-32 of its path ("" for the root), its data
// and its persisted stat. Nodes under /zookeeper/ count as zero.
func nodeDigest(path string, n *Node) uint64 {
	// The path goes through a buffer on the stack: a hash.Hash32 and a []byte(path) conversion
	// each cost an allocation, ten million times on a large tree.
	var pb [256]byte
	d, _ := appendDigest(pb[:0], path, n)
	return d
}

// appendDigest is nodeDigest with the path copied into buf, which it returns for the next node.
func appendDigest(buf []byte, path string, n *Node) (uint64, []byte) {
	if strings.HasPrefix(path, "/zookeeper/") {
		return 0, buf
	}
	if path == "/" {
		path = ""
	}
	var b [60]byte
	st := &n.Stat
	for i, v := range []int64{st.Czxid, st.Mzxid, st.Pzxid, st.Ctime, st.Mtime} {
		binary.BigEndian.PutUint64(b[i*8:], uint64(v))
	}
	binary.BigEndian.PutUint32(b[40:], uint32(st.Version))
	binary.BigEndian.PutUint32(b[44:], uint32(st.Cversion))
	binary.BigEndian.PutUint32(b[48:], uint32(st.Aversion))
	binary.BigEndian.PutUint64(b[52:], uint64(st.EphemeralOwner))
	buf = append(buf[:0], path...)
	crc := crc32.Update(0, crc32.IEEETable, buf)
	crc = crc32.Update(crc, crc32.IEEETable, n.Data)
	return uint64(crc32.Update(crc, crc32.IEEETable, b[:])), buf
}

// The tree's digest is kept as ZooKeeper keeps its own: a sum the nodes are added to and taken
// out of as they come and go, so that checking it after a load does not read every node again
// (summing 11 M nodes at the end of an import took 15 s, most of it loading each node's path and
// data back into the cache). A node's own digest is computed when it is added, its bytes at
// hand; one whose stat changes leaves the sum and waits in dirty until digest() adds it back
// once, however often it changed. A load whose digest will not be checked (no logged
// transaction after the snapshot carries one) keeps none.

// digestKnown marks Node.digest as holding the node's digest, counted in tree.digestSum.
const digestKnown = 1 << 32

// digestGone marks a dirty node that has since been deleted.
const digestGone = 1

// added counts a new node of nodes in the sum.
func (t *tree) added(n *Node) {
	if !t.keepDigest {
		return
	}
	var d uint64
	d, t.scratch = appendDigest(t.scratch, n.path, n)
	n.digest = d | digestKnown
	t.digestSum += d
}

// changing takes n out of the sum before its stat or data change.
func (t *tree) changing(n *Node) {
	if t.keepDigest && n.digest&digestKnown != 0 {
		t.digestSum -= n.digest &^ digestKnown
		n.digest = 0
		t.dirty = append(t.dirty, n)
	}
}

// removed takes n, just deleted from nodes, out of the sum.
func (t *tree) removed(n *Node) {
	t.changing(n)
	n.digest = digestGone
}

// digest returns the sum over every node in nodes, those that changed counted as they are now.
func (t *tree) digest() int64 {
	if !t.keepDigest {
		var sum uint64
		for p, n := range t.nodes {
			sum += nodeDigest(p, n)
		}
		return int64(sum)
	}
	for _, n := range t.dirty {
		if n.digest == 0 {
			t.added(n)
		}
	}
	t.dirty = t.dirty[:0]
	return int64(t.digestSum)
}

// Digest returns ZooKeeper's digest of the whole tree: the sum of every node's digest. ZooKeeper
// logs it after every transaction (3.6 and later), so a replay can be checked against it.
func (s *State) Digest() int64 {
	var sum uint64
	for p, n := range s.Nodes {
		sum += nodeDigest(p, n)
	}
	return int64(sum)
}

// ErrDigest reports a rebuilt tree whose digest differs from the one ZooKeeper logged for it.
var ErrDigest = fmt.Errorf("tree digest mismatch")
