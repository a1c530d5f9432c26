package conformance

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/zkd-io/zkd/jute"
)

// stillServing checks the server still answers a new session after a check fed it bad input.
func (e *env) stillServing() {
	e.t.Helper()
	r := e.raw()
	_, err := r.Do(jute.OpExists, &jute.ExistsRequest{Path: e.base}, &jute.ExistsResponse{})
	must(e.t, "exists on a fresh session after bad input", err)
}

// rawFrame builds a request frame by hand: header, then body bytes as given.
func rawFrame(xid int32, op jute.Op, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(xid))
	b = binary.BigEndian.AppendUint32(b, uint32(op))
	return Frame(append(b, body...))
}

// badInputOutcome reads what the server does after bad input: an error reply with the given xid
// and one of the allowed codes (returned), or a close without reply (closed true). Anything else
// fails the check.
func badInputOutcome(t *testing.T, r *Raw, xid int32, allowed ...jute.Code) (code jute.Code, closed bool) {
	t.Helper()
	rep, err := r.ReadReply()
	if err != nil {
		if closedOrStillOpen(errors.Unwrap(err)) == nil {
			return 0, true
		}
		t.Fatalf("reading after bad input: %v", err)
	}
	for _, c := range allowed {
		if rep.Header.Err == c && rep.Header.Xid == xid {
			return c, false
		}
	}
	t.Fatalf("reply %+v after bad input; want a close or one of %v", rep.Header, allowed)
	return 0, false
}

func TestLimits(t *testing.T) {
	runChecks(t, "limits", []check{
		{"unknown_opcode_gets_Unimplemented_then_close", func(t *testing.T, e *env) {
			r := e.raw()
			must(t, "send op 99", r.WriteBytes(rawFrame(5, 99, nil)))
			got, err := r.ReadUntilClosed(waitTimeout)
			must(t, "read until close", err)
			if len(got) != 1 || got[0].Header.Xid != 5 || got[0].Header.Err != jute.CodeUnimplemented || len(got[0].Body) != 0 {
				t.Fatalf("got %+v; want one Unimplemented reply with xid 5, then a close", got)
			}
			e.stillServing()
		}},
		{"opcode_10_is_unknown", func(t *testing.T, e *env) {
			r := e.raw()
			must(t, "send op 10", r.WriteBytes(rawFrame(5, 10, nil)))
			got, err := r.ReadUntilClosed(waitTimeout)
			must(t, "read until close", err)
			if len(got) != 1 || got[0].Header.Err != jute.CodeUnimplemented {
				t.Fatalf("got %+v; want Unimplemented then a close", got)
			}
		}},
		{"negative_frame_length_closes_the_connection", func(t *testing.T, e *env) {
			r := e.raw()
			must(t, "write", r.WriteBytes([]byte{0xff, 0xff, 0xff, 0xfe}))
			if err := r.ExpectClosed(waitTimeout); err != nil {
				t.Fatalf("after a negative length: %v", err)
			}
			e.stillServing()
		}},
		{"frame_over_jute_maxbuffer_closes_the_connection", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			r := e.raw()
			big := EncodeRequest(1, jute.OpSetData, &jute.SetDataRequest{Path: e.p("n"), Data: make([]byte, 1<<20), Version: -1})
			_ = r.WriteBytes(big) // the server may close before it has read everything
			if err := r.ExpectClosed(waitTimeout); err != nil {
				t.Fatalf("after a frame of %d bytes: %v", len(big)-4, err)
			}
			if st := e.stat(e.p("n")); st.DataLength != 0 {
				t.Fatalf("oversized setData was applied")
			}
			e.stillServing()
		}},
		{"length_prefix_over_the_limit_before_handshake_closes", func(t *testing.T, e *env) {
			r := e.dial()
			must(t, "write", r.WriteBytes([]byte{0x7f, 0xff, 0xff, 0xff}))
			if err := r.ExpectClosed(waitTimeout); err != nil {
				t.Fatalf("after a 2 GiB length prefix: %v", err)
			}
			e.stillServing()
		}},
		{"frame_just_under_the_limit_is_served", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			r := e.raw()
			data := bytes.Repeat([]byte{1}, jute.DefaultMaxBuffer-1024)
			var resp jute.SetDataResponse
			_, err := r.Do(jute.OpSetData, &jute.SetDataRequest{Path: e.p("n"), Data: data, Version: -1}, &resp)
			must(t, "setData just under the limit", err)
			if resp.Stat.DataLength != int32(len(data)) {
				t.Fatalf("dataLength %d; want %d", resp.Stat.DataLength, len(data))
			}
		}},
		{"a_client_that_reads_its_replies_late_gets_them_all", func(t *testing.T, e *env) {
			// A client pipelines reads whose replies (64 MiB) are more than a server would queue
			// for one connection, and reads nothing until another client has been served; then it
			// reads them all, in order. ZooKeeper queues them; zkd stops reading the connection
			// while its replies wait, so TCP pushes back; neither drops the client.
			data := bytes.Repeat([]byte{7}, 512<<10)
			e.mk(e.p("big"), data)
			r := e.raw()
			const n = 128
			first := r.NextXid()
			for i := range int32(n) {
				must(t, "send getData", r.Send(first+i, jute.OpGetData, &jute.GetDataRequest{Path: e.p("big")}))
			}
			r.xid = first + n
			other := e.raw()
			for range 20 {
				_, err := other.Do(jute.OpExists, &jute.ExistsRequest{Path: e.p("big")}, &jute.ExistsResponse{})
				must(t, "another client's exists while the first reads nothing", err)
			}
			for i := range int32(n) {
				rep, err := r.ReadReply()
				must(t, "read a late reply", err)
				var resp jute.GetDataResponse
				if rep.Header.Xid != first+i || rep.Header.Err != jute.CodeOK {
					t.Fatalf("reply %d: %+v; want xid %d, OK", i, rep.Header, first+i)
				}
				must(t, "decode", rep.Decode(&resp))
				if len(resp.Data) != len(data) {
					t.Fatalf("reply %d: %d bytes of data; want %d", i, len(resp.Data), len(data))
				}
			}
			_, err := r.Do(jute.OpExists, &jute.ExistsRequest{Path: e.p("big")}, &jute.ExistsResponse{})
			must(t, "exists on the same session afterwards", err)
		}},
		{"truncated_request_body_fails_or_closes", func(t *testing.T, e *env) {
			r := e.raw()
			body := binary.BigEndian.AppendUint32(nil, 100) // a path of 100 bytes ...
			body = append(body, "/ab"...)                   // ... with 3 present
			must(t, "write", r.WriteBytes(rawFrame(3, jute.OpGetData, body)))
			code, closed := badInputOutcome(t, r, 3, jute.CodeMarshallingError)
			e.seen("truncated getData: code %d, closed %v", code, closed)
			e.stillServing()
		}},
		{"null_path_in_a_read_fails_MarshallingError", func(t *testing.T, e *env) {
			r := e.raw()
			body := binary.BigEndian.AppendUint32(nil, 0xffffffff) // null string
			body = append(body, 0)                                 // watch=false
			must(t, "write", r.WriteBytes(rawFrame(4, jute.OpGetData, body)))
			rep, err := r.ReadReplyFor(4)
			must(t, "read reply", err)
			if rep.Header.Err != jute.CodeMarshallingError || len(rep.Body) != 0 {
				t.Fatalf("getData with a null path: %+v; want MarshallingError", rep.Header)
			}
			e.stillServing()
		}},
		{"empty_request_body_fails_or_closes", func(t *testing.T, e *env) {
			r := e.raw()
			must(t, "write", r.WriteBytes(rawFrame(6, jute.OpCreate, nil)))
			code, closed := badInputOutcome(t, r, 6, jute.CodeMarshallingError)
			e.seen("create without a body: code %d, closed %v", code, closed)
			e.stillServing()
		}},
		{"undecodable_write_fails_MarshallingError_at_its_own_zxid", func(t *testing.T, e *env) {
			// ZooKeeper makes a failed transaction of a write whose body does not decode: it is
			// answered MarshallingError with a zxid of its own, and the connection goes on.
			r := e.raw()
			before, err := r.Call(jute.OpExists, &jute.ExistsRequest{Path: e.base})
			must(t, "exists", err)
			body := []byte{0, 0, 0, 9, 'x'} // a path of 9 bytes with 1 present
			must(t, "write", r.WriteBytes(rawFrame(9, jute.OpCreate, body)))
			rep, err := r.ReadReplyFor(9)
			must(t, "read reply", err)
			if rep.Header.Err != jute.CodeMarshallingError || rep.Header.Zxid <= before.Header.Zxid {
				t.Fatalf("undecodable create: %+v (zxid before %d); want MarshallingError at a new zxid", rep.Header, before.Header.Zxid)
			}
			_, err = r.Do(jute.OpExists, &jute.ExistsRequest{Path: e.base}, &jute.ExistsResponse{})
			must(t, "exists on the same connection", err)
		}},
		{"string_length_beyond_the_frame_fails_or_closes", func(t *testing.T, e *env) {
			r := e.raw()
			body := binary.BigEndian.AppendUint32(nil, 900000)
			body = append(body, "/x"...)
			must(t, "write", r.WriteBytes(rawFrame(7, jute.OpExists, body)))
			code, closed := badInputOutcome(t, r, 7, jute.CodeMarshallingError)
			e.seen("exists with a path length past the frame: code %d, closed %v", code, closed)
			e.stillServing()
		}},
		{"short_connect_request_closes_the_connection", func(t *testing.T, e *env) {
			r := e.dial()
			must(t, "write", r.WriteBytes(Frame([]byte{0, 0, 0})))
			if err := r.ExpectClosed(waitTimeout); err != nil {
				t.Fatalf("after a 3-byte ConnectRequest: %v", err)
			}
			e.stillServing()
		}},
		{"xid_zero_is_answered", func(t *testing.T, e *env) {
			r := e.raw()
			rep, err := r.CallXid(0, jute.OpExists, &jute.ExistsRequest{Path: e.base})
			must(t, "exists with xid 0", err)
			if rep.Header.Err != 0 {
				t.Fatalf("reply %+v", rep.Header)
			}
		}},
		{"deep_paths_work", func(t *testing.T, e *env) {
			p := e.base
			for i := range 50 {
				p += "/d" + itoa(i)
				e.mk(p, nil)
			}
			if !e.exists(p) {
				t.Fatalf("deep node missing")
			}
		}},
		{"long_node_names_work", func(t *testing.T, e *env) {
			p := e.p(strings.Repeat("n", 4000))
			e.mk(p, nil)
			kids, _, err := e.zk.Children(e.base)
			if err != nil || len(kids) != 1 || len(kids[0]) != 4000 {
				t.Fatalf("children: %d names, %v", len(kids), err)
			}
		}},
		{"multi_with_unknown_op_type_fails_or_closes", func(t *testing.T, e *env) {
			r := e.raw()
			enc := jute.NewEncoder(nil)
			h := jute.MultiHeader{Type: 99, Done: false, Err: -1}
			h.Encode(enc)
			enc.String(e.p("x"))
			end := jute.MultiHeader{Type: -1, Done: true, Err: -1}
			end.Encode(enc)
			must(t, "write", r.WriteBytes(rawFrame(8, jute.OpMulti, enc.Bytes())))
			code, closed := badInputOutcome(t, r, 8, jute.CodeMarshallingError)
			e.seen("multi with op type 99: code %d, closed %v", code, closed)
			e.stillServing()
		}},
		{"frame_shorter_than_a_request_header_fails_or_closes", func(t *testing.T, e *env) {
			r := e.raw()
			must(t, "write", r.WriteBytes(Frame([]byte{0xde, 0xad})))
			rep, err := r.ReadReply()
			switch {
			case err != nil && closedOrStillOpen(errors.Unwrap(err)) == nil:
				e.seen("2-byte frame: connection closed")
			case err == nil && rep.Header.Err != 0:
				e.seen("2-byte frame: error reply %+v", rep.Header)
			default:
				t.Fatalf("after a 2-byte frame: %+v, %v; want an error reply or a close", rep.Header, err)
			}
			e.stillServing()
		}},
		{"getChildren_reply_may_exceed_jute_maxbuffer", func(t *testing.T, e *env) {
			// The server does not limit reply size: 300 names of 4000 bytes come back in one
			// 1.2 MB frame (go-zookeeper itself could not read it).
			long := strings.Repeat("c", 3990)
			for batch := range 3 {
				var ops []jute.MultiOp
				for i := range 100 {
					ops = append(ops, mCreate(e.p(long+itoa(batch*100+i)), 0))
				}
				r := e.raw()
				rawMulti(t, r, jute.OpMulti, ops...)
			}
			r := e.raw()
			var resp jute.GetChildrenResponse
			_, err := r.Do(jute.OpGetChildren, &jute.GetChildrenRequest{Path: e.base}, &resp)
			must(t, "getChildren", err)
			if len(resp.Children) != 300 {
				t.Fatalf("%d children; want 300", len(resp.Children))
			}
		}},
	})
}
