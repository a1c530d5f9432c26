package zkfile

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/snappy"

	"github.com/zkd-io/zkd/jute"
)

// File magics: "ZKSN" starts a snapshot, "ZKLG" a transaction log.
const (
	snapMagic = 0x5A4B534E
	logMagic  = 0x5A4B4C47
	version   = 2
)

// OpenACL is the ACL reference ZooKeeper uses for world:anyone with every permission; it is not
// stored in a snapshot's ACL table.
const OpenACL = -1

// Stat is ZooKeeper's persisted stat: what a snapshot keeps of a node's Stat (the data length
// and the number of children follow from the tree).
type Stat struct {
	Czxid, Mzxid   int64
	Ctime, Mtime   int64
	Version        int32
	Cversion       int32
	Aversion       int32
	EphemeralOwner int64
	Pzxid          int64
}

// SnapNode is one znode as a snapshot stores it. ACL refers to the snapshot's ACL table.
type SnapNode struct {
	Path string // "" for the root, as ZooKeeper writes it
	Data []byte
	ACL  int64
	Stat Stat
}

// Digest is the tree digest ZooKeeper 3.6 and later append to a snapshot and to log entries.
type Digest struct {
	Zxid    int64 // zero in a log entry's digest
	Version int32
	Value   int64
}

// Snapshot is one ZooKeeper snapshot file, decoded and verified.
type Snapshot struct {
	// Zxid is the zxid in the file's name: the last transaction applied when the (fuzzy)
	// snapshot started. Transactions after it are replayed from the logs.
	Zxid int64
	// DBID is the header's database id.
	DBID int64
	// Sessions maps each session id to its timeout in milliseconds.
	Sessions map[int64]int32
	// ACLs is the ACL table nodes refer to.
	ACLs map[int64][]jute.ACL
	// Nodes lists the nodes in the order the file holds them: each parent before its children.
	Nodes []SnapNode
	// Digest is the tree digest written after the tree, if any.
	Digest *Digest
}

// ZxidFromName returns the zxid in a ZooKeeper file name such as snapshot.1a2b or
// log.100000001 (an optional compression suffix follows), or false.
func ZxidFromName(name, prefix string) (int64, bool) {
	rest, ok := strings.CutPrefix(name, prefix+".")
	if !ok {
		return 0, false
	}
	hex, _, _ := strings.Cut(rest, ".")
	var z uint64
	if hex == "" || len(hex) > 16 {
		return 0, false
	}
	for _, c := range hex {
		switch {
		case c >= '0' && c <= '9':
			z = z<<4 | uint64(c-'0')
		case c >= 'a' && c <= 'f':
			z = z<<4 | uint64(c-'a'+10)
		case c >= 'A' && c <= 'F':
			z = z<<4 | uint64(c-'A'+10)
		default:
			return 0, false
		}
	}
	return int64(z), true
}

// ReadSnapshotFile reads and verifies the snapshot at path. The compression (none, .gz or
// .snappy) follows the file name, as in ZooKeeper.
func ReadSnapshotFile(path string) (*Snapshot, error) {
	return readSnapshotFile(path, func(s *Snapshot, n SnapNode) error {
		s.Nodes = append(s.Nodes, n)
		return nil
	})
}

// readSnapshotFile is ReadSnapshotFile handing each node to node; see readSnapshot.
func readSnapshotFile(path string, node func(*Snapshot, SnapNode) error) (*Snapshot, error) {
	zxid, ok := ZxidFromName(filepath.Base(path), "snapshot")
	if !ok {
		return nil, fmt.Errorf("%s: not a ZooKeeper snapshot name (snapshot.<zxid in hex>)", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var in io.Reader = f
	switch {
	case strings.HasSuffix(path, ".gz"):
		gz, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		defer gz.Close()
		in = gz
	case strings.HasSuffix(path, ".snappy"):
		in = &xerialSnappy{r: f}
	}
	s, err := readSnapshot(in, node)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s.Zxid = zxid
	return s, nil
}

// ErrChecksum reports a checksum that does not match the data.
var ErrChecksum = errors.New("checksum mismatch")

// ReadSnapshot decodes an uncompressed snapshot stream and verifies its Adler-32 seal. Zxid is
// left zero: it comes from the file name.
func ReadSnapshot(in io.Reader) (*Snapshot, error) {
	return readSnapshot(in, func(s *Snapshot, n SnapNode) error {
		s.Nodes = append(s.Nodes, n)
		return nil
	})
}

// readSnapshot is ReadSnapshot handing each node to node as it is read, in the file's order,
// instead of keeping it in Nodes. The snapshot is verified only at its end: until readSnapshot
// returns, its nodes may be damaged ones.
func readSnapshot(in io.Reader, node func(*Snapshot, SnapNode) error) (*Snapshot, error) {
	r := newReader(in)
	magic, err := r.int32()
	if err != nil {
		return nil, fmt.Errorf("reading the header: %w", err)
	}
	if magic != snapMagic {
		return nil, fmt.Errorf("not a ZooKeeper snapshot (magic %#x)", uint32(magic))
	}
	ver, err := r.int32()
	if err != nil {
		return nil, err
	}
	if ver != version {
		return nil, fmt.Errorf("unsupported snapshot version %d", ver)
	}
	s := &Snapshot{Sessions: make(map[int64]int32), ACLs: make(map[int64][]jute.ACL)}
	if s.DBID, err = r.int64(); err != nil {
		return nil, err
	}
	if err := s.readBody(r, node); err != nil {
		return nil, fmt.Errorf("at offset %d: %w", r.off, err)
	}
	if err := checkSeal(r); err != nil {
		return nil, err
	}
	// ZooKeeper 3.6+ may follow the seal with a digest record and a second seal; an older
	// snapshot simply ends here.
	end := r.off
	zxid, err := r.int64()
	if errors.Is(err, io.ErrUnexpectedEOF) && r.off == end {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the digest: %w", err)
	}
	d := &Digest{Zxid: zxid}
	if d.Version, err = r.int32(); err != nil {
		return nil, fmt.Errorf("reading the digest: %w", err)
	}
	if d.Value, err = r.int64(); err != nil {
		return nil, fmt.Errorf("reading the digest: %w", err)
	}
	if err := checkSeal(r); err != nil {
		return nil, fmt.Errorf("after the digest: %w", err)
	}
	if d.Zxid > 0 {
		s.Digest = d
	}
	return s, nil
}

// checkSeal reads a seal, the Adler-32 of everything before it and the string "/", and checks it.
func checkSeal(r *reader) error {
	want := int64(r.sum32())
	got, err := r.int64()
	if err != nil {
		return fmt.Errorf("reading the checksum: %w", err)
	}
	slash, err := r.string()
	if err != nil {
		return fmt.Errorf("reading the checksum: %w", err)
	}
	if got != want || slash != "/" {
		return fmt.Errorf("%w: the snapshot's Adler-32 is %#x, its content gives %#x", ErrChecksum, got, want)
	}
	return nil
}

// readBody reads the session table, the ACL table and the nodes up to the "/" that ends them.
func (s *Snapshot) readBody(r *reader, node func(*Snapshot, SnapNode) error) error {
	n, err := r.int32()
	if err != nil {
		return err
	}
	if n < 0 {
		return fmt.Errorf("bad session count %d", n)
	}
	for range n {
		id, err := r.int64()
		if err != nil {
			return err
		}
		to, err := r.int32()
		if err != nil {
			return err
		}
		s.Sessions[id] = to
	}
	if n, err = r.int32(); err != nil {
		return err
	}
	if n < 0 {
		return fmt.Errorf("bad ACL table size %d", n)
	}
	for range n {
		ref, err := r.int64()
		if err != nil {
			return err
		}
		acl, err := readACLs(r)
		if err != nil {
			return err
		}
		s.ACLs[ref] = acl
	}
	for {
		path, err := r.string()
		if err != nil {
			return err
		}
		if path == "/" {
			return nil
		}
		nd := SnapNode{Path: path}
		if nd.Data, err = r.buffer(); err != nil {
			return err
		}
		if nd.ACL, err = r.int64(); err != nil {
			return err
		}
		if nd.Stat, err = readStat(r); err != nil {
			return err
		}
		if nd.ACL != OpenACL {
			if _, ok := s.ACLs[nd.ACL]; !ok {
				return fmt.Errorf("node %q refers to ACL %d, which the ACL table lacks", path, nd.ACL)
			}
		}
		if err := node(s, nd); err != nil {
			return err
		}
	}
}

func readACLs(r *reader) ([]jute.ACL, error) {
	n, err := r.int32()
	if err != nil {
		return nil, err
	}
	if n == -1 {
		return nil, nil
	}
	if n < 0 || n > maxBuffer/12 {
		return nil, fmt.Errorf("bad ACL count %d", n)
	}
	out := make([]jute.ACL, n)
	for i := range out {
		if out[i].Perms, err = r.int32(); err != nil {
			return nil, err
		}
		if out[i].ID.Scheme, err = r.string(); err != nil {
			return nil, err
		}
		if out[i].ID.ID, err = r.string(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func readStat(r *reader) (st Stat, err error) {
	for _, p := range []*int64{&st.Czxid, &st.Mzxid, &st.Ctime, &st.Mtime} {
		if *p, err = r.int64(); err != nil {
			return st, err
		}
	}
	for _, p := range []*int32{&st.Version, &st.Cversion, &st.Aversion} {
		if *p, err = r.int32(); err != nil {
			return st, err
		}
	}
	if st.EphemeralOwner, err = r.int64(); err != nil {
		return st, err
	}
	st.Pzxid, err = r.int64()
	return st, err
}

// xerialSnappy reads the stream format of xerial's snappy-java (SnappyOutputStream), which
// ZooKeeper uses for .snappy snapshots: an 8-byte magic and two version ints, then blocks, each a
// big-endian length and one raw Snappy block. Streams may be concatenated.
type xerialSnappy struct {
	r   io.Reader
	hdr bool
	out []byte
	blk []byte
}

var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

func (x *xerialSnappy) Read(p []byte) (int, error) {
	for len(x.out) == 0 {
		var l [4]byte
		if _, err := io.ReadFull(x.r, l[:]); err != nil {
			if errors.Is(err, io.EOF) && x.hdr {
				return 0, io.EOF
			}
			return 0, fmt.Errorf("snappy stream: %w", unexpected(err))
		}
		if l[0] == xerialMagic[0] {
			// A stream header (the first, or one of a concatenated stream).
			var rest [12]byte
			if _, err := io.ReadFull(x.r, rest[:]); err != nil {
				return 0, fmt.Errorf("snappy stream header: %w", unexpected(err))
			}
			if !bytes.Equal(append(l[:], rest[:4]...), xerialMagic) {
				return 0, errors.New("snappy stream: bad magic")
			}
			x.hdr = true
			continue
		}
		if !x.hdr {
			return 0, errors.New("snappy stream: no header")
		}
		n := binary.BigEndian.Uint32(l[:])
		if n > maxBuffer {
			return 0, fmt.Errorf("snappy stream: bad block length %d", n)
		}
		x.blk = append(x.blk[:0], make([]byte, n)...)
		if _, err := io.ReadFull(x.r, x.blk); err != nil {
			return 0, fmt.Errorf("snappy stream: %w", unexpected(err))
		}
		out, err := snappy.Decode(x.out[:0], x.blk)
		if err != nil {
			return 0, fmt.Errorf("snappy stream: %w", err)
		}
		x.out = out
	}
	n := copy(p, x.out)
	x.out = x.out[n:]
	return n, nil
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
