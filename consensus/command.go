package consensus

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/znode"
)

// Log entry layout (raft.Log.Data, written by the leader only, big-endian):
//
//	[0]      type     uint8   cmdTxn; bit 0x80 = an older server may skip an unknown type
//	[1]      version  uint8   format version of the rest (1)
//	[2:10]   time     int64   leader wall clock, ms since the epoch (ctime/mtime, TTL "now")
//	[10:18]  session  int64   originating session (0 for internal transactions)
//	then jute fields:
//	         origin   ustring proposing node and incarnation (routes the result to the waiter)
//	         seq      int64   proposal number within origin
//	         op       int32   jute.Op of the transaction
//	         attach   int64   (version 2) the session's attachment the write was sent on, 0: none
//	         aseq     int64   (version 2) the write's position among the attachment's writes
//	         flags    int32   (version 2) 1: TTL nodes are refused (extendedTypesEnabled=false)
//	         auth     vector<Id> the caller's identities, for ACL checks at apply time
//	         body     buffer  the jute request record (client ops) or an internal record
//
// Version 1 entries (no attach, aseq, flags) are still read: their writes are unordered
// (znode.Txn) and TTL nodes allowed, as the servers that wrote them had already checked.
//
// A proposal is marshalled once, by the proposing node; the leader only writes its time into
// bytes 2-10 (stampTime), except for createSession, whose body it fills in.
//
// Internal bodies: OpCreateSession = {id int64, timeout int32, passwd buffer, attach int64 (the
// token of the attachment the session starts on; absent in version 1)};
// OpCloseSession = empty (the client closes its own session) or {ids vector<int64>} (expiry);
// OpDeleteContainer = {paths vector<ustring>, neverUsedInterval int64} (reaping).
const (
	cmdTxn       byte = 1
	cmdIgnorable byte = 0x80
	cmdVersion   byte = 2
	cmdVersion1  byte = 1 // before attachments; read only
)

const cmdHeaderSize = 18

// cmdNoTTL is the flag that refuses TTL nodes (extendedTypesEnabled=false).
const cmdNoTTL int32 = 1

// cmdSASLACL is the flag that accepts the sasl ACL scheme (authProvider.N naming
// SASLAuthenticationProvider). A server that predates it ignores it and refuses sasl ACLs, so
// a cluster takes sasl ACLs only once every member runs a release that knows the flag.
const cmdSASLACL int32 = 2

// errBadCommand marks an entry or proposal that does not decode.
var errBadCommand = errors.New("consensus: malformed command")

// command is a decoded log entry, or a proposal on its way to the leader (time not yet stamped).
type command struct {
	typ     byte
	time    int64
	session int64
	origin  string
	seq     uint64
	op      jute.Op
	attach  uint64 // the session's attachment (znode.Txn.Attach); 0: unordered
	aseq    uint64 // the write's position among the attachment's writes
	flags   int32
	auth    []jute.Id
	body    []byte
}

func (c *command) marshal() []byte {
	b := make([]byte, cmdHeaderSize, c.size())
	b[0] = c.typ
	b[1] = cmdVersion
	binary.BigEndian.PutUint64(b[2:], uint64(c.time))
	binary.BigEndian.PutUint64(b[10:], uint64(c.session))
	e := jute.NewEncoder(b)
	e.String(c.origin)
	e.Int64(int64(c.seq))
	e.Int32(int32(c.op))
	e.Int64(int64(c.attach))
	e.Int64(int64(c.aseq))
	e.Int32(c.flags)
	if c.auth == nil {
		e.Int32(-1)
	} else {
		e.Int32(int32(len(c.auth)))
		for i := range c.auth {
			c.auth[i].Encode(e)
		}
	}
	e.Buffer(c.body)
	return e.Bytes()
}

// size is the length of the encoded entry, so that marshal allocates once.
func (c *command) size() int {
	n := cmdHeaderSize + 4 + len(c.origin) + 8 + 4 + 8 + 8 + 4 + 4 + 4 + len(c.body)
	for _, id := range c.auth {
		n += 4 + len(id.Scheme) + 4 + len(id.ID)
	}
	return n
}

// unmarshalCommand decodes an entry. An unknown type is reported with the type set and
// errUnknownType; the caller applies the ignorable-bit policy.
func unmarshalCommand(b []byte) (command, error) {
	var c command
	if len(b) < cmdHeaderSize {
		return c, fmt.Errorf("%w: %d bytes", errBadCommand, len(b))
	}
	c.typ = b[0]
	if c.typ != cmdTxn {
		return c, errUnknownType
	}
	version := b[1]
	if version != cmdVersion && version != cmdVersion1 {
		return c, fmt.Errorf("%w: version %d", errUnknownType, version)
	}
	c.time = int64(binary.BigEndian.Uint64(b[2:]))
	c.session = int64(binary.BigEndian.Uint64(b[10:]))
	// The body aliases b: log entries and RPC frames are never modified after they are decoded,
	// and the transaction decoded from the body copies what it keeps.
	d := jute.NewAliasDecoder(b[cmdHeaderSize:], len(b))
	c.origin = d.String()
	c.seq = uint64(d.Int64())
	c.op = jute.Op(d.Int32())
	if version >= cmdVersion {
		c.attach, c.aseq, c.flags = uint64(d.Int64()), uint64(d.Int64()), d.Int32()
	}
	if n := d.VectorLen(8); n >= 0 && d.Err() == nil {
		c.auth = make([]jute.Id, n)
		for i := range c.auth {
			c.auth[i].Decode(d)
		}
	}
	c.body = d.Buffer()
	if err := d.Finish(); err != nil {
		return c, fmt.Errorf("%w: %w", errBadCommand, err)
	}
	return c, nil
}

var errUnknownType = errors.New("consensus: unknown command type")

// entryHeader is what the leader reads of an entry before proposing it.
type entryHeader struct {
	session int64
	origin  string
	seq     uint64
	op      jute.Op
}

// peekCommand reads an entry's header fields without decoding the rest.
func peekCommand(b []byte) (entryHeader, error) {
	var h entryHeader
	if len(b) < cmdHeaderSize || b[0] != cmdTxn || (b[1] != cmdVersion && b[1] != cmdVersion1) {
		return h, fmt.Errorf("%w: header", errBadCommand)
	}
	h.session = int64(binary.BigEndian.Uint64(b[10:]))
	d := jute.NewAliasDecoder(b[cmdHeaderSize:], len(b))
	h.origin = d.String()
	h.seq = uint64(d.Int64())
	h.op = jute.Op(d.Int32())
	if d.Err() != nil {
		return h, fmt.Errorf("%w: %w", errBadCommand, d.Err())
	}
	return h, nil
}

// stampTime writes the leader's clock (ms since the epoch) into a marshalled entry.
func stampTime(b []byte, ms int64) { binary.BigEndian.PutUint64(b[2:], uint64(ms)) }

// txnRequest decodes the body of an entry into the Req of a znode.Txn. This is the one decode of
// a client's request body: the server hands the bytes over as they arrived.
func txnRequest(op jute.Op, body []byte) (any, error) {
	return decodeTxn(jute.NewDecoder(body, len(body)+1), op)
}

func decodeTxn(d *jute.Decoder, op jute.Op) (any, error) {
	var req any
	switch op {
	case jute.OpCreateSession:
		s := &znode.CreateSession{ID: d.Int64(), Timeout: d.Int32(), Passwd: d.Buffer()}
		if d.Err() == nil && d.Len() > 0 {
			s.Attach = uint64(d.Int64())
		}
		req = s
	case jute.OpCloseSession:
		if d.Len() == 0 {
			return nil, nil
		}
		var ids []int64
		if n := d.VectorLen(8); n >= 0 && d.Err() == nil {
			ids = make([]int64, n)
			for i := range ids {
				ids[i] = d.Int64()
			}
		}
		req = &znode.CloseSessions{IDs: ids}
	case jute.OpDeleteContainer:
		req = &znode.Reap{Paths: d.Strings(), NeverUsedInterval: d.Int64()}
	default:
		if !op.IsClientWrite() {
			return nil, fmt.Errorf("%w: op %v is not a transaction", errBadCommand, op)
		}
		r := jute.NewRequest(op)
		if r == nil {
			return nil, fmt.Errorf("%w: op %v has no request record", errBadCommand, op)
		}
		r.Decode(d)
		req = r
		if d.Err() == nil {
			// ZooKeeper reads what a request needs and ignores any bytes after it.
			return req, nil
		}
	}
	if err := d.Finish(); err != nil {
		return nil, fmt.Errorf("%w: %v body: %w", errBadCommand, op, err)
	}
	return req, nil
}

func createSessionBody(s znode.CreateSession) []byte {
	e := jute.NewEncoder(nil)
	e.Int64(s.ID)
	e.Int32(s.Timeout)
	e.Buffer(s.Passwd)
	e.Int64(int64(s.Attach))
	return e.Bytes()
}

func closeSessionsBody(ids []int64) []byte {
	e := jute.NewEncoder(nil)
	e.Int32(int32(len(ids)))
	for _, id := range ids {
		e.Int64(id)
	}
	return e.Bytes()
}

func reapBody(paths []string, neverUsed int64) []byte {
	e := jute.NewEncoder(nil)
	e.Strings(paths)
	e.Int64(neverUsed)
	return e.Bytes()
}
