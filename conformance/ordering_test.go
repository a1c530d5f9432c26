package conformance

import (
	"sync"
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/zkd-io/zkd/jute"
)

func TestOrdering(t *testing.T) {
	runChecks(t, "ordering", []check{
		{"pipelined_replies_come_back_in_request_order", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			r := e.raw()
			var buf []byte
			const n = 200
			for i := int32(1); i <= n; i++ {
				switch i % 4 {
				case 0:
					buf = append(buf, EncodeRequest(i, jute.OpSetData, &jute.SetDataRequest{Path: e.p("n"), Data: []byte{byte(i)}, Version: -1})...)
				case 1:
					buf = append(buf, EncodeRequest(i, jute.OpGetData, &jute.GetDataRequest{Path: e.p("n")})...)
				case 2:
					buf = append(buf, EncodeRequest(i, jute.OpExists, &jute.ExistsRequest{Path: e.p("missing")})...)
				case 3:
					buf = append(buf, EncodeRequest(i, jute.OpCreate, &jute.CreateRequest{Path: e.p("c" + itoa(int(i))), ACL: openACL()})...)
				}
			}
			must(t, "write the batch", r.WriteBytes(buf))
			for i := int32(1); i <= n; i++ {
				rep, err := r.ReadReply()
				must(t, "read", err)
				if rep.Header.Xid != i {
					t.Fatalf("reply %d has xid %d; replies must follow request order", i, rep.Header.Xid)
				}
			}
		}},
		{"pipelined_read_sees_the_preceding_write", func(t *testing.T, e *env) {
			e.mk(e.p("n"), []byte("old"))
			r := e.raw()
			buf := EncodeRequest(1, jute.OpSetData, &jute.SetDataRequest{Path: e.p("n"), Data: []byte("new"), Version: -1})
			buf = append(buf, EncodeRequest(2, jute.OpGetData, &jute.GetDataRequest{Path: e.p("n")})...)
			buf = append(buf, EncodeRequest(3, jute.OpCreate, &jute.CreateRequest{Path: e.p("k"), ACL: openACL()})...)
			buf = append(buf, EncodeRequest(4, jute.OpGetChildren, &jute.GetChildrenRequest{Path: e.base})...)
			must(t, "write", r.WriteBytes(buf))
			var replies []Reply
			for range 4 {
				rep, err := r.ReadReply()
				must(t, "read", err)
				replies = append(replies, rep)
			}
			var gd jute.GetDataResponse
			must(t, "decode getData", replies[1].Decode(&gd))
			if string(gd.Data) != "new" {
				t.Fatalf("pipelined getData saw %q; want the preceding write's data", gd.Data)
			}
			if replies[1].Header.Zxid < replies[0].Header.Zxid {
				t.Fatalf("read reply zxid 0x%x before the write's 0x%x", replies[1].Header.Zxid, replies[0].Header.Zxid)
			}
		}},
		{"reply_zxids_never_go_backwards_on_a_connection", func(t *testing.T, e *env) {
			r := e.raw()
			var last int64
			for i := range 30 {
				var rep Reply
				var err error
				if i%3 == 0 {
					rep, err = r.Call(jute.OpCreate, &jute.CreateRequest{Path: e.p("n" + itoa(i)), ACL: openACL()})
				} else {
					rep, err = r.Call(jute.OpExists, &jute.ExistsRequest{Path: e.base})
				}
				must(t, "call", err)
				if rep.Header.Zxid < last {
					t.Fatalf("reply %d zxid 0x%x after 0x%x", i, rep.Header.Zxid, last)
				}
				last = rep.Header.Zxid
			}
		}},
		{"a_session_reads_its_own_writes_from_go_client", func(t *testing.T, e *env) {
			for i := range 20 {
				p := e.p("n" + itoa(i))
				e.mk(p, []byte(itoa(i)))
				data, _, err := e.zk.Get(p)
				if err != nil || string(data) != itoa(i) {
					t.Fatalf("get %s right after create = %q, %v", p, data, err)
				}
			}
		}},
		{"concurrent_go_client_calls_all_complete", func(t *testing.T, e *env) {
			var wg sync.WaitGroup
			errs := make(chan error, 100)
			for i := range 100 {
				wg.Go(func() {
					if _, err := e.zk.Create(e.p("c"+itoa(i)), nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
						errs <- err
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatalf("concurrent create: %v", err)
			}
			if st := e.stat(e.base); st.NumChildren != 100 {
				t.Fatalf("numChildren %d; want 100", st.NumChildren)
			}
		}},
		{"writes_from_two_sessions_are_seen_in_one_order", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			a, b := e.raw(), e.raw()
			rawWatchData(t, a, e.p("n"))
			_, err := b.Do(jute.OpSetData, &jute.SetDataRequest{Path: e.p("n"), Data: []byte("b"), Version: 0}, &jute.SetDataResponse{})
			must(t, "b setData", err)
			_, err = a.Do(jute.OpSetData, &jute.SetDataRequest{Path: e.p("n"), Data: []byte("a"), Version: 0}, &jute.SetDataResponse{})
			wantCode(t, "a setData with a stale version", err, jute.CodeBadVersion)
			if len(a.Events) != 1 {
				t.Fatalf("a got %d events before its failed write's reply; want the NodeDataChanged from b's write", len(a.Events))
			}
		}},
		{"ping_between_pipelined_requests_keeps_order", func(t *testing.T, e *env) {
			r := e.raw()
			buf := EncodeRequest(1, jute.OpExists, &jute.ExistsRequest{Path: e.base})
			buf = append(buf, EncodeRequest(jute.XidPing, jute.OpPing, nil)...)
			buf = append(buf, EncodeRequest(2, jute.OpExists, &jute.ExistsRequest{Path: e.base})...)
			must(t, "write", r.WriteBytes(buf))
			for _, want := range []int32{1, jute.XidPing, 2} {
				rep, err := r.ReadReply()
				must(t, "read", err)
				if rep.Header.Xid != want {
					t.Fatalf("reply xid %d; want %d", rep.Header.Xid, want)
				}
			}
		}},
	})
}
