package server_test

import (
	"testing"

	"github.com/zkd-io/zkd/conformance"
	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/server/zkdtest"
)

// A burst of interleaved writes and reads on one connection is answered in request order, and
// every read sees exactly the writes sent before it (a session reads its own writes, never a later
// one), with reply zxids that never go back.
func TestPipelineOrderAndReadYourWrites(t *testing.T) {
	s := zkdtest.Start(t, zkdtest.WithoutRaft())
	r := rawSession(t, s.Addr())
	mustCreate(t, r, "/p", openACL, 0)
	const n = 200
	var batch []byte
	for i := range n {
		xid := int32(2*i + 1)
		batch = append(batch, conformance.EncodeRequest(xid, jute.OpSetData, &jute.SetDataRequest{Path: "/p", Data: []byte{byte(i)}, Version: int32(i)})...)
		batch = append(batch, conformance.EncodeRequest(xid+1, jute.OpGetData, &jute.GetDataRequest{Path: "/p"})...)
	}
	if err := r.WriteBytes(batch); err != nil {
		t.Fatal(err)
	}
	var last int64
	for i := range 2 * n {
		rep, err := r.ReadReply()
		if err != nil {
			t.Fatal(err)
		}
		if rep.Header.Xid != int32(i+1) || rep.Header.Err != 0 || rep.Header.Zxid < last {
			t.Fatalf("reply %d: %+v (previous zxid %d); want xid %d, OK, zxid not going back", i, rep.Header, last, i+1)
		}
		last = rep.Header.Zxid
		if i%2 == 1 {
			var gd jute.GetDataResponse
			if err := rep.Decode(&gd); err != nil {
				t.Fatal(err)
			}
			if want := byte(i / 2); len(gd.Data) != 1 || gd.Data[0] != want || gd.Stat.Version != int32(i/2+1) {
				t.Fatalf("read %d saw data %v version %d; want [%d] version %d", i/2, gd.Data, gd.Stat.Version, want, i/2+1)
			}
		}
	}
}

// A write whose body does not decode is a failed write decided where writes are applied: it is
// answered MarshallingError at a zxid of its own, changes nothing, and the connection goes on.
// (ZooKeeper answers the same; the conformance suite compares the two.)
func TestUndecodableWriteIsMarshallingError(t *testing.T) {
	s := zkdtest.Start(t, zkdtest.WithoutRaft())
	r := rawSession(t, s.Addr())
	before, err := r.Call(jute.OpExists, &jute.ExistsRequest{Path: "/"})
	if err != nil {
		t.Fatal(err)
	}
	frame := conformance.Frame(append(conformance.EncodeRequest(7, jute.OpCreate, nil)[4:], 0, 0, 0, 9, 'x'))
	if err := r.WriteBytes(frame); err != nil {
		t.Fatal(err)
	}
	rep, err := r.ReadReply()
	if err != nil || rep.Header.Xid != 7 || rep.Header.Err != jute.CodeMarshallingError {
		t.Fatalf("undecodable create: %+v %v; want MarshallingError", rep.Header, err)
	}
	if rep.Header.Zxid <= before.Header.Zxid {
		t.Fatalf("failed write at zxid %d, not after %d", rep.Header.Zxid, before.Header.Zxid)
	}
	if _, err := r.Do(jute.OpExists, &jute.ExistsRequest{Path: "/p"}, &jute.ExistsResponse{}); err != jute.CodeNoNode {
		t.Fatalf("exists after the failed write = %v; want NoNode and the connection still open", err)
	}
}

// Connections that end with requests still unanswered hand their buffers to later connections
// (conn.go); a later connection must get exactly its own replies, in order, and nothing of what the
// earlier ones left behind.
func TestAbandonedConnectionsLeaveNothingBehind(t *testing.T) {
	s := zkdtest.Start(t, zkdtest.WithoutRaft())
	setup := rawSession(t, s.Addr())
	mustCreate(t, setup, "/p", openACL, 0)
	for round := range 30 {
		// A burst of writes and reads, and the socket closed before any reply is read.
		a := rawSession(t, s.Addr())
		var burst []byte
		for i := range 50 {
			burst = append(burst, conformance.EncodeRequest(int32(1000+i), jute.OpSetData, &jute.SetDataRequest{Path: "/p", Data: []byte("a"), Version: -1})...)
			burst = append(burst, conformance.EncodeRequest(int32(2000+i), jute.OpGetData, &jute.GetDataRequest{Path: "/p"})...)
		}
		if err := a.WriteBytes(burst); err != nil {
			t.Fatal(err)
		}
		_ = a.Close()

		b := rawSession(t, s.Addr())
		var mine []byte
		for i := range 5 {
			mine = append(mine, conformance.EncodeRequest(int32(i+1), jute.OpExists, &jute.ExistsRequest{Path: "/p"})...)
		}
		if err := b.WriteBytes(mine); err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			rep, err := b.ReadReply()
			if err != nil {
				t.Fatalf("round %d: reply %d: %v", round, i, err)
			}
			if rep.Header.Xid != int32(i+1) || rep.Header.Err != 0 {
				t.Fatalf("round %d: reply %d is %+v; want xid %d, OK", round, i, rep.Header, i+1)
			}
		}
		// Nothing else arrives: a ping is answered next.
		if err := b.WriteBytes(conformance.EncodeRequest(-2, jute.OpPing, nil)); err != nil {
			t.Fatal(err)
		}
		rep, err := b.ReadReply()
		if err != nil || rep.Header.Xid != -2 {
			t.Fatalf("round %d: after its own replies the connection got %+v, %v; want the ping reply", round, rep.Header, err)
		}
		_ = b.Close()
	}
}
