package zkfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/adler32"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/zkd-io/zkd/jute"
)

// TxnHeader is the header of every logged transaction.
type TxnHeader struct {
	ClientID int64 // the session that sent it
	Cxid     int32
	Zxid     int64
	Time     int64 // milliseconds since the epoch, as the leader stamped it
	Type     jute.Op
}

// Op is one transaction record, or one operation inside a multi. Which fields are set follows
// Type, as in ZooKeeper's txn records.
type Op struct {
	Type           jute.Op
	Path           string
	Data           []byte
	ACL            []jute.ACL
	Ephemeral      bool  // create, create2
	ParentCVersion int32 // creates; -1 asks for the parent's cversion plus one
	TTL            int64 // createTTL
	Version        int32 // setData, setACL, check
	Timeout        int32 // createSession
	// Paths are the ephemerals a closeSession deletes; nil for a log written without them
	// (ZooKeeper before 3.6, or with closeSessionTxn disabled).
	Paths []string
	Err   int32 // error
	Multi []Op  // multi
}

// Txn is one logged transaction.
type Txn struct {
	Header TxnHeader
	Op     Op
	Digest *Digest // the tree digest after it, from ZooKeeper 3.6 on
}

// Log is one transaction log file, read to its end.
type Log struct {
	Path string
	// FirstZxid is the zxid in the file name.
	FirstZxid int64
	Txns      []Txn
	// Torn reports that the file ended in a partly written entry, which ZooKeeper (and this
	// package) takes as the end of the log: a crash cut the last append short.
	Torn bool
}

// ReadLogFile reads a transaction log. A CRC mismatch in a complete entry is an error, as in
// ZooKeeper; a partly written last entry, or the preallocated zero padding, ends the log.
func ReadLogFile(path string) (*Log, error) { return ReadLogFileAfter(path, math.MinInt64) }

// ReadLogFileAfter is ReadLogFile keeping only the transactions after zxid: earlier entries
// are checked against their checksums but not decoded, as ZooKeeper passes over the part of a
// log its snapshot already holds.
func ReadLogFileAfter(path string, zxid int64) (*Log, error) {
	first, ok := ZxidFromName(filepath.Base(path), "log")
	if !ok {
		return nil, fmt.Errorf("%s: not a ZooKeeper log name (log.<zxid in hex>)", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	l, err := readLog(f, zxid)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	l.Path, l.FirstZxid = path, first
	return l, nil
}

// ReadLog reads a transaction log stream; see ReadLogFile.
func ReadLog(in io.Reader) (*Log, error) { return readLog(in, math.MinInt64) }

// readLog reads a transaction log stream, keeping the transactions after zxid.
func readLog(in io.Reader, after int64) (*Log, error) {
	r := newReader(in)
	magic, err := r.int32()
	if err != nil {
		return nil, fmt.Errorf("reading the header: %w", err)
	}
	if magic != logMagic {
		return nil, fmt.Errorf("not a ZooKeeper transaction log (magic %#x)", uint32(magic))
	}
	ver, err := r.int32()
	if err != nil {
		return nil, fmt.Errorf("reading the header: %w", err)
	}
	if ver != version {
		return nil, fmt.Errorf("unsupported log version %d", ver)
	}
	if _, err := r.int64(); err != nil {
		return nil, fmt.Errorf("reading the header: %w", err)
	}
	l := &Log{}
	for {
		at := r.off
		crc, err := r.int64()
		if err != nil {
			l.Torn = r.off != at // a few bytes of a checksum, or none: the end either way
			return l, nil
		}
		n, err := r.int32()
		if err != nil {
			l.Torn = true
			return l, nil
		}
		if n == 0 {
			// Preallocated padding: the log ends here.
			return l, nil
		}
		if n < 0 || n > maxBuffer {
			// ZooKeeper reads this as a broken last entry too (its buffer read fails).
			l.Torn = true
			return l, nil
		}
		b := make([]byte, n)
		if err := r.full(b); err != nil {
			l.Torn = true
			return l, nil
		}
		var end [1]byte
		if err := r.full(end[:]); err != nil || end[0] != 'B' {
			l.Torn = true
			return l, nil
		}
		if sum := int64(adler32.Checksum(b)); sum != crc {
			return nil, fmt.Errorf("entry at offset %d: %w: logged Adler-32 %#x, content gives %#x", at, ErrChecksum, crc, sum)
		}
		// The header: client id (8 bytes), cxid (4), then the zxid.
		if len(b) >= 20 && int64(binary.BigEndian.Uint64(b[12:20])) <= after {
			continue
		}
		t, err := decodeTxn(b)
		if err != nil {
			return nil, fmt.Errorf("entry at offset %d: %w", at, err)
		}
		l.Txns = append(l.Txns, t)
	}
}

// decodeTxn decodes one entry: the header, the record its type names, and an optional digest.
func decodeTxn(b []byte) (Txn, error) {
	d := jute.NewDecoder(b, maxBuffer)
	var t Txn
	h := &t.Header
	h.ClientID, h.Cxid, h.Zxid, h.Time, h.Type = d.Int64(), d.Int32(), d.Int64(), d.Int64(), jute.Op(d.Int32())
	if err := d.Err(); err != nil {
		return t, fmt.Errorf("txn header: %w", err)
	}
	rest := d.Rest()
	op, n, err := decodeOp(h.Type, rest, true)
	if err != nil {
		return t, fmt.Errorf("%v txn at zxid %#x: %w", h.Type, h.Zxid, err)
	}
	t.Op = op
	rest = rest[n:]
	if len(rest) >= 12 {
		dd := jute.NewDecoder(rest, maxBuffer)
		t.Digest = &Digest{Version: dd.Int32(), Value: dd.Int64()}
		rest = dd.Rest()
	}
	if len(rest) != 0 {
		return t, fmt.Errorf("%v txn at zxid %#x: %d bytes left over", h.Type, h.Zxid, len(rest))
	}
	return t, nil
}

var errUnknownTxn = errors.New("unknown transaction type")

// decodeOp decodes the record of a transaction of type typ from b and returns it with the
// number of bytes it took. top is true outside a multi, where old formats may be shorter.
func decodeOp(typ jute.Op, b []byte, top bool) (Op, int, error) {
	d := jute.NewDecoder(b, maxBuffer)
	op := Op{Type: typ}
	switch typ {
	case jute.OpCreate, jute.OpCreate2:
		op.Path, op.Data, op.ACL, op.Ephemeral = d.String(), d.Buffer(), decodeACLs(d), d.Bool()
		if d.Err() == nil && d.Len() < 4 && top && typ == jute.OpCreate {
			// A create written by ZooKeeper before parentCVersion existed (CreateTxnV0).
			op.ParentCVersion = -1
			break
		}
		op.ParentCVersion = d.Int32()
	case jute.OpCreateContainer:
		op.Path, op.Data, op.ACL, op.ParentCVersion = d.String(), d.Buffer(), decodeACLs(d), d.Int32()
	case jute.OpCreateTTL:
		op.Path, op.Data, op.ACL, op.ParentCVersion, op.TTL = d.String(), d.Buffer(), decodeACLs(d), d.Int32(), d.Int64()
	case jute.OpDelete, jute.OpDeleteContainer:
		op.Path = d.String()
	case jute.OpSetData, jute.OpReconfig:
		op.Path, op.Data, op.Version = d.String(), d.Buffer(), d.Int32()
	case jute.OpSetACL:
		op.Path, op.ACL, op.Version = d.String(), decodeACLs(d), d.Int32()
	case jute.OpCheck:
		op.Path, op.Version = d.String(), d.Int32()
	case jute.OpCreateSession:
		op.Timeout = d.Int32()
	case jute.OpCloseSession:
		// ZooKeeper 3.6 and later log the ephemerals to delete; older logs have nothing here.
		// Like ZooKeeper, try the list and fall back to none when it does not decode.
		if d.Len() == 0 {
			break
		}
		sd := jute.NewDecoder(d.Rest(), maxBuffer)
		if paths := sd.Strings(); sd.Err() == nil {
			op.Paths = paths
			if op.Paths == nil {
				op.Paths = []string{}
			}
			d.Reset(sd.Rest())
		}
	case jute.OpError:
		op.Err = d.Int32()
	case jute.OpMulti:
		n := d.VectorLen(8)
		for i := 0; i < n && d.Err() == nil; i++ {
			sub := jute.Op(d.Int32())
			sb := d.Buffer()
			if d.Err() != nil {
				break
			}
			s, used, err := decodeOp(sub, sb, false)
			if err != nil {
				return op, 0, fmt.Errorf("multi op %d: %w", i, err)
			}
			if used != len(sb) {
				return op, 0, fmt.Errorf("multi op %d (%v): %d bytes left over", i, sub, len(sb)-used)
			}
			op.Multi = append(op.Multi, s)
		}
	default:
		return op, 0, fmt.Errorf("%w %d", errUnknownTxn, int32(typ))
	}
	if err := d.Err(); err != nil {
		return op, 0, err
	}
	return op, len(b) - d.Len(), nil
}

func decodeACLs(d *jute.Decoder) []jute.ACL {
	n := d.VectorLen(12)
	if n < 0 {
		return nil
	}
	out := make([]jute.ACL, 0, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		var a jute.ACL
		a.Decode(d)
		out = append(out, a)
	}
	return out
}
