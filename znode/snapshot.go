package znode

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"strings"

	"github.com/zkd-io/zkd/jute"
)

// Snapshot format, version 2. Every integer is big-endian; strings and buffers are jute's (an int
// length, -1 for a null buffer, then the bytes):
//
//	magic     8 bytes "zkdsnap\x00"
//	version   int32 (2; 1 is read too)
//	zxid      int64
//	sessions  int32 count, then per session (ascending id): id int64, timeout int32, passwd buffer,
//	          then (version 2 only) attach int64, seq int64: the attachment and position of the
//	          session's last ordered write (Txn.Attach), which decide what Apply takes next
//	nodes     int64 count, then the nodes in pre-order, children in name order; per node:
//	            acl     int32 index into the ACL table; when it equals the table's size, the ACL
//	                    follows (int32 count, then perms int32, scheme string, id string each)
//	                    and becomes that table entry
//	            name    string ("" for the root)
//	            data    buffer
//	            czxid, mzxid, pzxid, ctime, mtime    int64
//	            version, cversion (child creations), aversion    int32
//	            kind    int32 (0 persistent, 1 ephemeral, 2 container, 3 TTL)
//	            owner   int64 (session id of an ephemeral, ttl of a TTL node)
//	            children int32, the number of child records that follow
//	trailer   int32 CRC-32C (Castagnoli) of every byte before it
//
// Everything derived (descendant counts, each session's ephemerals, the container, TTL and quota
// root indexes, the counters) is rebuilt on restore. The bytes depend only on the tree's content, so two trees
// that applied the same transactions write identical snapshots.

const (
	snapMagic   = "zkdsnap\x00"
	snapVersion = 2
	// snapVersion1 is the format before sessions carried their write order; it is still read.
	snapVersion1 = 1
	// snapMaxField bounds any one string or buffer read from a snapshot.
	snapMaxField = 64 << 20
	// snapChunk is how many encoded bytes are gathered before they are written out.
	snapChunk = 256 << 10
)

// ErrCorruptSnapshot is returned (wrapped with details) by ReadSnapshot for input that is not a
// well-formed snapshot of this format.
var ErrCorruptSnapshot = errors.New("znode: corrupt snapshot")

var crcTable = crc32.MakeTable(crc32.Castagnoli)

type snapWriter struct {
	w    io.Writer
	e    jute.Encoder
	crc  uint32
	err  error
	acls map[*aclSet]int32
	keys map[string]int32
	// the last ACL written and its index: most nodes share their neighbour's ACL
	lastACL *aclSet
	lastRef int32
}

func (s *snapWriter) flush() {
	if s.err != nil || s.e.Len() == 0 {
		s.e.Reset()
		return
	}
	b := s.e.Bytes()
	s.crc = crc32.Update(s.crc, crcTable, b)
	_, s.err = s.w.Write(b)
	s.e.Reset()
}

// WriteSnapshot writes the view as a snapshot to w. It streams (memory use does not grow with the
// tree), writes the same bytes for the same content, and may run while Apply continues.
func (v *View) WriteSnapshot(w io.Writer) error {
	s := &snapWriter{
		w:    w,
		e:    *jute.NewEncoder(append(make([]byte, 0, snapChunk+4096), snapMagic...)),
		acls: make(map[*aclSet]int32),
		keys: make(map[string]int32),
	}
	e := &s.e
	e.Int32(snapVersion)
	e.Int64(v.zxid)
	var count int32
	v.sessions.ascend(func(*session) bool { count++; return true })
	e.Int32(count)
	v.sessions.ascend(func(ss *session) bool {
		e.Int64(ss.ID)
		e.Int32(ss.Timeout)
		e.Buffer(ss.Passwd)
		e.Int64(int64(ss.attach))
		e.Int64(int64(ss.seq))
		return true
	})
	e.Int64(int64(v.nodes))
	s.writeNode(v.root)
	s.flush()
	if s.err != nil {
		return fmt.Errorf("znode: write snapshot: %w", s.err)
	}
	e.Int32(int32(s.crc))
	_, err := w.Write(e.Bytes())
	if err != nil {
		return fmt.Errorf("znode: write snapshot: %w", err)
	}
	return nil
}

func (s *snapWriter) writeNode(n *node) {
	if s.err != nil {
		return
	}
	e := &s.e
	if n.acl == s.lastACL {
		e.Int32(s.lastRef)
	} else {
		s.lastACL, s.lastRef = n.acl, s.aclRef(n.acl)
	}
	e.String(n.name())
	e.Buffer(n.data())
	e.Int64(n.czxid)
	e.Int64(n.mzxid())
	e.Int64(n.pzxid())
	e.Int64(n.ctime)
	e.Int64(n.mtime())
	e.Int32(n.version())
	e.Int32(n.cversion())
	e.Int32(n.aversion())
	e.Int32(int32(n.kind()))
	e.Int64(n.owner())
	e.Int32(n.numChildren())
	if e.Len() >= snapChunk {
		s.flush()
	}
	n.kids.ascend(func(c *node) bool {
		s.writeNode(c)
		return s.err == nil
	})
}

// aclRef writes the table index of acl, with the list itself when it is new to the table.
func (s *snapWriter) aclRef(acl *aclSet) int32 {
	e := &s.e
	ref, ok := s.acls[acl]
	if !ok {
		ref, ok = s.keys[acl.key]
		if !ok {
			ref = int32(len(s.keys))
			s.keys[acl.key] = ref
			e.Int32(ref)
			e.Int32(int32(len(acl.list)))
			for i := range acl.list {
				acl.list[i].Encode(e)
			}
			s.acls[acl] = ref
			return ref
		}
		s.acls[acl] = ref
	}
	e.Int32(ref)
	return ref
}

// snapReader reads a snapshot through its own buffer with a sticky error. The checksum is taken
// over whole consumed stretches of the buffer, not field by field.
type snapReader struct {
	r       io.Reader
	buf     []byte
	pos     int // next byte to hand out
	end     int // end of the buffered bytes
	crcFrom int // buf[crcFrom:pos] is consumed but not yet checksummed
	crc     uint32
	err     error
}

const snapReadBuffer = 256 << 10

func (s *snapReader) fail(format string, args ...any) {
	if s.err == nil {
		s.err = fmt.Errorf("%w: %s", ErrCorruptSnapshot, fmt.Sprintf(format, args...))
	}
}

// sum returns the checksum of every byte consumed so far.
func (s *snapReader) sum() uint32 {
	s.crc = crc32.Update(s.crc, crcTable, s.buf[s.crcFrom:s.pos])
	s.crcFrom = s.pos
	return s.crc
}

// next returns the next n bytes; the slice is valid until the next call.
func (s *snapReader) next(n int) []byte {
	if s.err != nil {
		return nil
	}
	if s.end-s.pos >= n {
		b := s.buf[s.pos : s.pos+n]
		s.pos += n
		return b
	}
	s.sum()
	if len(s.buf) < snapReadBuffer && s.end == len(s.buf) {
		// The input is longer than the buffer so far: grow it, up to snapReadBuffer.
		nb := make([]byte, min(2*len(s.buf), snapReadBuffer))
		s.end = copy(nb, s.buf[s.pos:s.end])
		s.buf, s.pos, s.crcFrom = nb, 0, 0
	}
	if n > len(s.buf) {
		// Larger than the buffer: grow with the bytes that actually arrive rather than trusting n.
		var big bytes.Buffer
		big.Write(s.buf[s.pos:s.end])
		s.pos, s.end, s.crcFrom = 0, 0, 0
		if _, err := io.CopyN(&big, s.r, int64(n-big.Len())); err != nil {
			s.readErr(err)
			return nil
		}
		s.crc = crc32.Update(s.crc, crcTable, big.Bytes())
		return big.Bytes()
	}
	copy(s.buf, s.buf[s.pos:s.end])
	s.end -= s.pos
	s.pos, s.crcFrom = 0, 0
	for s.end < n {
		m, err := s.r.Read(s.buf[s.end:])
		s.end += m
		if err != nil && s.end < n {
			s.readErr(err)
			return nil
		}
	}
	s.pos = n
	return s.buf[:n]
}

// atEOF reports whether the input has no more bytes.
func (s *snapReader) atEOF() bool {
	if s.end > s.pos {
		return false
	}
	var one [1]byte
	for range 100 { // a reader that keeps returning nothing and no error counts as ended
		m, err := s.r.Read(one[:])
		if m > 0 {
			return false
		}
		if err != nil {
			return true
		}
	}
	return true
}

func (s *snapReader) readErr(err error) {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		s.fail("truncated")
		return
	}
	if s.err == nil {
		s.err = fmt.Errorf("znode: read snapshot: %w", err)
	}
}

func (s *snapReader) int32() int32 {
	b := s.next(4)
	if b == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(b))
}

func (s *snapReader) int64() int64 {
	b := s.next(8)
	if b == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(b))
}

func (s *snapReader) length(allowNull bool) int {
	n := s.int32()
	switch {
	case s.err != nil:
		return 0
	case n == -1 && allowNull:
		return -1
	case n < 0 || n > snapMaxField:
		s.fail("bad length %d", n)
		return 0
	}
	return int(n)
}

func (s *snapReader) string() string {
	n := s.length(false)
	if n <= 0 {
		return ""
	}
	return string(s.next(n))
}

func (s *snapReader) buffer() []byte {
	n := s.length(true)
	if n < 0 || s.err != nil {
		return nil
	}
	b := s.next(n)
	if b == nil {
		return nil
	}
	out := make([]byte, n)
	copy(out, b)
	return out
}

type restoreFrame struct {
	n         *node
	pathLen   int // length of the node's path
	remaining int32
	kids      []*node
}

// framePath builds the path of a child named name of the node on top of stack.
func framePath(stack []restoreFrame, name string) string {
	var b strings.Builder
	b.Grow(stack[len(stack)-1].pathLen + 1 + len(name))
	for _, f := range stack[1:] {
		b.WriteByte('/')
		b.WriteString(f.n.name())
	}
	b.WriteByte('/')
	b.WriteString(name)
	return b.String()
}

// ReadSnapshot restores a tree from a snapshot written by View.WriteSnapshot, streaming from r.
// Input that is not a well-formed snapshot gives an error wrapping ErrCorruptSnapshot.
func ReadSnapshot(r io.Reader) (*Tree, error) {
	s := &snapReader{r: r, buf: make([]byte, 4096)}
	if string(s.next(len(snapMagic))) != snapMagic {
		s.fail("bad magic")
	}
	version := s.int32()
	if s.err == nil && version != snapVersion && version != snapVersion1 {
		s.fail("unsupported version %d", version)
	}
	t := &Tree{}
	view := &View{zxid: s.int64()}
	nsessions := s.int32()
	if nsessions < 0 {
		s.fail("bad session count %d", nsessions)
	}
	sessions := make([]*session, 0, min(int(max(nsessions, 0)), 1<<16))
	for i := int32(0); i < nsessions && s.err == nil; i++ {
		ss := &session{Session: Session{ID: s.int64(), Timeout: s.int32(), Passwd: s.buffer()}}
		if version >= snapVersion {
			ss.attach, ss.seq = uint64(s.int64()), uint64(s.int64())
		}
		if len(sessions) > 0 && sessions[len(sessions)-1].ID >= ss.ID {
			s.fail("sessions out of order")
		}
		sessions = append(sessions, ss)
	}
	want := s.int64()
	var (
		acls       []*aclSet
		stack      []restoreFrame
		ephemerals = map[int64][]string{}
		containers []string
		ttls       []string
	)
	// readNode reads one node record; stack holds its ancestors (empty for the root).
	readNode := func() *node {
		ref := s.int32()
		switch {
		case s.err != nil:
			return nil
		case ref == int32(len(acls)):
			count := s.length(false)
			list := make([]jute.ACL, 0, min(count, 64))
			for i := 0; i < count && s.err == nil; i++ {
				list = append(list, jute.ACL{Perms: s.int32(), ID: jute.Id{Scheme: s.string(), ID: s.string()}})
			}
			acls = append(acls, t.acls.intern(list))
		case ref < 0 || ref > int32(len(acls)):
			s.fail("bad acl reference %d", ref)
			return nil
		}
		name := s.string()
		var data []byte // what next returns is valid only until the next read: newNode copies it
		if dn := s.length(true); dn == 0 {
			data = []byte{}
		} else if dn > 0 {
			data = s.next(dn)
		}
		if s.err != nil {
			return nil
		}
		n := newNode(name, data, kindPersistent, acls[ref], 0, 0)
		n.czxid = s.int64()
		mzxid, pzxid := s.int64(), s.int64()
		n.ctime = s.int64()
		mtime := s.int64()
		version, cversion, aversion := s.int32(), s.int32(), s.int32()
		kind := s.int32()
		owner := s.int64()
		numChildren := s.int32()
		if s.err != nil {
			return nil
		}
		if kind < int32(kindPersistent) || kind > int32(kindTTL) || numChildren < 0 {
			s.fail("bad node record")
			return nil
		}
		n.setKind(nodeKind(kind))
		n.setExt(nodeExt{mzxid: mzxid, mtime: mtime, pzxid: pzxid, owner: owner,
			cversion: cversion, aversion: aversion, version: version, numChildren: numChildren})
		pathLen := 1
		if len(stack) > 0 {
			if n.name() == "" || strings.IndexByte(n.name(), '/') >= 0 {
				s.fail("bad node name %q", n.name())
				return nil
			}
			if top := stack[len(stack)-1]; len(stack) > 1 {
				pathLen = top.pathLen + 1 + len(n.name())
			} else {
				pathLen = 1 + len(n.name())
			}
		} else if n.name() != "" || n.kind() != kindPersistent {
			s.fail("bad root")
			return nil
		}
		view.nodes++
		view.dataSize += int64(pathLen + n.dataLen())
		switch n.kind() {
		case kindEphemeral:
			view.ephemerals++
			ephemerals[n.owner()] = append(ephemerals[n.owner()], framePath(stack, n.name()))
		case kindContainer:
			containers = append(containers, framePath(stack, n.name()))
		case kindTTL:
			ttls = append(ttls, framePath(stack, n.name()))
		}
		// Push the node, reusing the children buffer a frame at this depth had before.
		if len(stack) < cap(stack) {
			stack = stack[:len(stack)+1]
			f := &stack[len(stack)-1]
			f.n, f.pathLen, f.remaining, f.kids = n, pathLen, numChildren, f.kids[:0]
		} else {
			stack = append(stack, restoreFrame{n: n, pathLen: pathLen, remaining: numChildren})
		}
		return n
	}

	root := readNode()
	for len(stack) > 0 && s.err == nil {
		top := &stack[len(stack)-1]
		if top.remaining > 0 {
			top.remaining--
			c := readNode()
			if c == nil {
				break
			}
			parent := &stack[len(stack)-2] // readNode pushed c, maybe moving the stack
			if k := parent.kids; len(k) > 0 && k[len(k)-1].name() >= c.name() {
				s.fail("children out of order")
				break
			}
			continue
		}
		n := top.n
		n.kids = buildBtree[string](top.kids)
		clear(top.kids)
		top.n = nil
		stack = stack[:len(stack)-1]
		if len(stack) > 0 {
			p := &stack[len(stack)-1]
			p.kids = append(p.kids, n)
		}
	}
	var crc uint32
	if s.err == nil {
		crc = s.sum()
	}
	if got := s.int32(); s.err == nil && uint32(got) != crc {
		s.fail("checksum mismatch")
	}
	if s.err == nil && want != int64(view.nodes) {
		s.fail("node count %d, header says %d", view.nodes, want)
	}
	if s.err == nil && !s.atEOF() {
		s.fail("trailing bytes")
	}
	if s.err != nil {
		return nil, s.err
	}
	view.root = root
	for _, ss := range sessions {
		paths := ephemerals[ss.ID]
		slices.Sort(paths)
		ss.ephemerals = buildBtree[string](pathKeys(paths))
	}
	view.sessions = buildBtree[int64](sessions)
	slices.Sort(containers)
	slices.Sort(ttls)
	view.containers = buildBtree[string](pathKeys(containers))
	view.ttls = buildBtree[string](pathKeys(ttls))
	view.quotas = buildBtree[string](pathKeys(collectQuotaRoots(root)))
	t.cur.Store(view)
	return t, nil
}

func pathKeys(paths []string) []pathKey {
	out := make([]pathKey, len(paths))
	for i, p := range paths {
		out[i] = pathKey(p)
	}
	return out
}
