package consensus

import (
	"fmt"
	"time"

	"github.com/zkd-io/zkd/internal/storage"
	"github.com/zkd-io/zkd/internal/third_party/raft"

	"github.com/zkd-io/zkd/jute"
)

// LogRecord is one log entry as DumpLog shows it.
type LogRecord struct {
	Index uint64 `json:"index"`
	Term  uint64 `json:"term"`
	// Kind is "txn" for a client or session transaction, else Raft's entry type
	// (configuration, noop, barrier...).
	Kind    string    `json:"kind"`
	Time    time.Time `json:"time,omitzero"`
	Session string    `json:"session,omitempty"`
	Op      string    `json:"op,omitempty"`
	Path    string    `json:"path,omitempty"`
	// DataSize is the znode data a create or setData carries; Size the entry's bytes.
	DataSize int `json:"dataSize,omitempty"`
	Size     int `json:"size"`
}

// DumpLog calls fn for every entry of a stopped server's log, oldest first, each verified.
func DumpLog(dataDir string, fn func(LogRecord) error) error {
	store, _, _, done, err := storage.OpenDir(dataDir)
	if err != nil {
		return err
	}
	defer done()
	first, last, err := store.Verify()
	if err != nil {
		return err
	}
	if last == 0 {
		return nil
	}
	var l raft.Log
	for i := first; i <= last; i++ {
		if err := store.GetLog(i, &l); err != nil {
			return store.AsDamage(i, err)
		}
		if err := fn(logRecord(&l)); err != nil {
			return err
		}
	}
	return nil
}

func logRecord(l *raft.Log) LogRecord {
	r := LogRecord{Index: l.Index, Term: l.Term, Size: len(l.Data), Kind: l.Type.String()}
	if l.Type != raft.LogCommand {
		return r
	}
	c, err := unmarshalCommand(l.Data)
	if err != nil {
		r.Kind = "undecodable"
		return r
	}
	r.Kind = "txn"
	r.Time = time.UnixMilli(c.time).UTC()
	r.Session = fmt.Sprintf("0x%x", c.session)
	r.Op = c.op.String()
	if req, err := txnRequest(c.op, c.body); err == nil {
		r.Path, r.DataSize = txnPath(req)
	}
	return r
}

// txnPath returns the path and data size a decoded transaction names, for dumps; a multi shows
// how many more operations it holds.
func txnPath(req any) (string, int) {
	r, _ := req.(jute.Record)
	path := jute.RequestPath(r)
	switch q := req.(type) {
	case *jute.CreateRequest:
		return path, len(q.Data)
	case *jute.CreateTTLRequest:
		return path, len(q.Data)
	case *jute.SetDataRequest:
		return path, len(q.Data)
	case *jute.MultiRequest:
		if len(q.Ops) > 1 {
			path = fmt.Sprintf("%s (+%d ops)", path, len(q.Ops)-1)
		}
	}
	return path, 0
}
