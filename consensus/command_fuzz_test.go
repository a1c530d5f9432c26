package consensus

import (
	"testing"

	"github.com/zkd-io/zkd/internal/third_party/raft"
)

// FuzzLogEntry: decoding a log entry's command and its transaction body never panics whatever
// the bytes (what zkd dump log and the FSM do with an entry read back).
func FuzzLogEntry(f *testing.F) {
	for _, p := range []Proposal{
		createReq("/a", []byte("data"), 0),
		setReq("/a", []byte("x"), 3),
		deleteReq("/a", -1),
	} {
		c, err := p.command()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(c.marshal())
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := unmarshalCommand(b)
		if err != nil {
			return
		}
		req, err := txnRequest(c.op, c.body)
		if err == nil {
			txnPath(req)
		}
		_ = logRecord(&raft.Log{Type: raft.LogCommand, Data: b})
	})
}
