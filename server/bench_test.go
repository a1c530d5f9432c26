package server_test

import (
	"testing"

	"github.com/zkd-io/zkd/conformance"
	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/server/zkdtest"
)

// benchPipelined sends batches of requests on one connection and reads the replies, measuring
// the server's cost per request (in memory, so writes cost Raft and apply but no fsync).
func benchPipelined(b *testing.B, op jute.Op, req jute.Record) {
	s := zkdtest.Start(b)
	r, err := conformance.DialRaw(s.Addr(), 0)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	if err := r.NewSession(10000); err != nil {
		b.Fatal(err)
	}
	if _, err := r.Do(jute.OpCreate, &jute.CreateRequest{Path: "/b", Data: make([]byte, 128), ACL: openACL}, &jute.CreateResponse{}); err != nil {
		b.Fatal(err)
	}
	const batch = 64
	var frames []byte
	for i := range batch {
		frames = append(frames, conformance.EncodeRequest(int32(i+1), op, req)...)
	}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if n%batch == 0 {
			if err := r.WriteBytes(frames); err != nil {
				b.Fatal(err)
			}
		}
		rep, err := r.ReadReply()
		if err != nil || rep.Header.Err != 0 {
			b.Fatalf("%+v %v", rep.Header, err)
		}
		n++
	}
	for n%batch != 0 {
		if _, err := r.ReadReply(); err != nil {
			b.Fatal(err)
		}
		n++
	}
}

func BenchmarkGetDataPipelined(b *testing.B) {
	benchPipelined(b, jute.OpGetData, &jute.GetDataRequest{Path: "/b"})
}

func BenchmarkSetDataPipelined(b *testing.B) {
	benchPipelined(b, jute.OpSetData, &jute.SetDataRequest{Path: "/b", Data: make([]byte, 128), Version: -1})
}
