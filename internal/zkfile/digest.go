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
	if strings.HasPrefix(path, "/zookeeper/") {
		return 0
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
	// The path goes through a buffer on the stack: a hash.Hash32 and a []byte(path) conversion
	// each cost an allocation, ten million times on a large tree.
	var pb [256]byte
	crc := crc32.Update(0, crc32.IEEETable, append(pb[:0], path...))
	crc = crc32.Update(crc, crc32.IEEETable, n.Data)
	return uint64(crc32.Update(crc, crc32.IEEETable, b[:]))
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
