package conformance

import (
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/zkd-io/zkd/jute"
)

// rawWatchData sets a data watch on path through r with getData.
func rawWatchData(t *testing.T, r *Raw, path string) {
	t.Helper()
	_, err := r.Do(jute.OpGetData, &jute.GetDataRequest{Path: path, Watch: true}, &jute.GetDataResponse{})
	must(t, "getData watch "+path, err)
}

// rawWatchChildren sets a child watch on path through r with getChildren2.
func rawWatchChildren(t *testing.T, r *Raw, path string) {
	t.Helper()
	_, err := r.Do(jute.OpGetChildren2, &jute.GetChildren2Request{Path: path, Watch: true}, &jute.GetChildren2Response{})
	must(t, "getChildren2 watch "+path, err)
}

// wantRawEvent waits for the next notification on r and checks its type and path.
func wantRawEvent(t *testing.T, r *Raw, typ jute.EventType, path string) Reply {
	t.Helper()
	ev, rep, err := r.WaitEvent()
	must(t, "wait for "+typ.String(), err)
	if ev.Type != typ || ev.Path != path {
		t.Fatalf("event %v %s; want %v %s", ev.Type, ev.Path, typ, path)
	}
	return rep
}

func TestWatches(t *testing.T) {
	runChecks(t, "watches", []check{
		{"getData_watch_fires_NodeDataChanged", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			_, _, ch, err := e.zk.GetW(e.p("n"))
			must(t, "getW", err)
			_, err = e.conn().Set(e.p("n"), []byte("x"), -1)
			must(t, "set", err)
			if ev := zkEvent(t, ch); ev.Type != zk.EventNodeDataChanged || ev.Path != e.p("n") {
				t.Fatalf("event %+v", ev)
			}
		}},
		{"getData_watch_fires_NodeDeleted", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			_, _, ch, err := e.zk.GetW(e.p("n"))
			must(t, "getW", err)
			must(t, "delete", e.conn().Delete(e.p("n"), -1))
			if ev := zkEvent(t, ch); ev.Type != zk.EventNodeDeleted || ev.Path != e.p("n") {
				t.Fatalf("event %+v", ev)
			}
		}},
		{"exists_watch_on_missing_node_fires_NodeCreated", func(t *testing.T, e *env) {
			ok, _, ch, err := e.zk.ExistsW(e.p("n"))
			if err != nil || ok {
				t.Fatalf("existsW: %v %v", ok, err)
			}
			_, err = e.conn().Create(e.p("n"), nil, 0, zk.WorldACL(zk.PermAll))
			must(t, "create", err)
			if ev := zkEvent(t, ch); ev.Type != zk.EventNodeCreated || ev.Path != e.p("n") {
				t.Fatalf("event %+v", ev)
			}
		}},
		{"exists_watch_on_existing_node_fires_NodeDataChanged", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			_, _, ch, err := e.zk.ExistsW(e.p("n"))
			must(t, "existsW", err)
			_, err = e.conn().Set(e.p("n"), []byte("x"), -1)
			must(t, "set", err)
			if ev := zkEvent(t, ch); ev.Type != zk.EventNodeDataChanged {
				t.Fatalf("event %+v", ev)
			}
		}},
		{"exists_watch_fires_NodeDeleted", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			_, _, ch, err := e.zk.ExistsW(e.p("n"))
			must(t, "existsW", err)
			must(t, "delete", e.conn().Delete(e.p("n"), -1))
			if ev := zkEvent(t, ch); ev.Type != zk.EventNodeDeleted {
				t.Fatalf("event %+v", ev)
			}
		}},
		{"children_watch_fires_on_child_create", func(t *testing.T, e *env) {
			_, _, ch, err := e.zk.ChildrenW(e.base)
			must(t, "childrenW", err)
			_, err = e.conn().Create(e.p("c"), nil, 0, zk.WorldACL(zk.PermAll))
			must(t, "create", err)
			if ev := zkEvent(t, ch); ev.Type != zk.EventNodeChildrenChanged || ev.Path != e.base {
				t.Fatalf("event %+v; want NodeChildrenChanged on the parent", ev)
			}
		}},
		{"children_watch_fires_on_child_delete", func(t *testing.T, e *env) {
			e.mk(e.p("c"), nil)
			_, _, ch, err := e.zk.ChildrenW(e.base)
			must(t, "childrenW", err)
			must(t, "delete", e.conn().Delete(e.p("c"), -1))
			if ev := zkEvent(t, ch); ev.Type != zk.EventNodeChildrenChanged || ev.Path != e.base {
				t.Fatalf("event %+v", ev)
			}
		}},
		{"children_watch_fires_NodeDeleted_when_the_node_goes", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			_, _, ch, err := e.zk.ChildrenW(e.p("n"))
			must(t, "childrenW", err)
			must(t, "delete", e.conn().Delete(e.p("n"), -1))
			if ev := zkEvent(t, ch); ev.Type != zk.EventNodeDeleted || ev.Path != e.p("n") {
				t.Fatalf("event %+v", ev)
			}
		}},
		{"notification_frame_shape", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			r := e.raw()
			rawWatchData(t, r, e.p("n"))
			st, err := e.zk.Set(e.p("n"), []byte("x"), -1)
			must(t, "set", err)
			rep := wantRawEvent(t, r, jute.EventNodeDataChanged, e.p("n"))
			ev, _ := rep.Event()
			if rep.Header.Xid != -1 || rep.Header.Err != 0 || ev.State != jute.StateSyncConnected {
				t.Fatalf("notification header %+v state %v; want xid -1, err 0, state SyncConnected", rep.Header, ev.State)
			}
			switch rep.Header.Zxid {
			case -1:
				e.seen("notification zxid is -1 (ZooKeeper 3.8 behaviour)")
			case st.Mzxid:
				e.seen("notification zxid is the txn zxid (ZooKeeper 3.9 behaviour)")
			default:
				t.Fatalf("notification zxid 0x%x; want -1 (3.8) or the txn zxid 0x%x (3.9)", rep.Header.Zxid, st.Mzxid)
			}
		}},
		{"child_setData_does_not_fire_the_parents_child_watch", func(t *testing.T, e *env) {
			e.mk(e.p("p"), nil)
			e.mk(e.p("p", "c"), nil)
			r := e.raw()
			rawWatchChildren(t, r, e.p("p"))
			_, err := e.zk.Set(e.p("p", "c"), []byte("x"), -1)
			must(t, "set child", err)
			e.watchBarrier(r)
		}},
		{"setACL_fires_nothing", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			r := e.raw()
			rawWatchData(t, r, e.p("n"))
			rawWatchChildren(t, r, e.p("n"))
			_, err := e.zk.SetACL(e.p("n"), zk.WorldACL(zk.PermAll), -1)
			must(t, "setACL", err)
			e.watchBarrier(r)
		}},
		{"sync_fires_nothing", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			r := e.raw()
			rawWatchData(t, r, e.p("n"))
			_, err := e.zk.Sync(e.p("n"))
			must(t, "sync", err)
			e.watchBarrier(r)
		}},
		{"getData_on_missing_node_leaves_no_watch", func(t *testing.T, e *env) {
			r := e.raw()
			_, err := r.Do(jute.OpGetData, &jute.GetDataRequest{Path: e.p("n"), Watch: true}, &jute.GetDataResponse{})
			wantCode(t, "getData missing", err, jute.CodeNoNode)
			e.mk(e.p("n"), nil)
			e.watchBarrier(r)
		}},
		{"getChildren_on_missing_node_leaves_no_watch", func(t *testing.T, e *env) {
			r := e.raw()
			_, err := r.Do(jute.OpGetChildren, &jute.GetChildrenRequest{Path: e.p("n"), Watch: true}, &jute.GetChildrenResponse{})
			wantCode(t, "getChildren missing", err, jute.CodeNoNode)
			e.mk(e.p("n"), nil)
			e.mk(e.p("n", "c"), nil)
			e.watchBarrier(r)
		}},
		{"exists_on_missing_node_with_watch_registers_it", func(t *testing.T, e *env) {
			r := e.raw()
			_, err := r.Do(jute.OpExists, &jute.ExistsRequest{Path: e.p("n"), Watch: true}, &jute.ExistsResponse{})
			wantCode(t, "exists missing", err, jute.CodeNoNode)
			e.mk(e.p("n"), nil)
			wantRawEvent(t, r, jute.EventNodeCreated, e.p("n"))
		}},
		{"standard_watch_fires_only_once", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			r := e.raw()
			rawWatchData(t, r, e.p("n"))
			for range 3 {
				_, err := e.zk.Set(e.p("n"), []byte("x"), -1)
				must(t, "set", err)
			}
			wantRawEvent(t, r, jute.EventNodeDataChanged, e.p("n"))
			e.watchBarrier(r)
		}},
		{"watch_can_be_set_again_after_it_fired", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			r := e.raw()
			for range 2 {
				rawWatchData(t, r, e.p("n"))
				_, err := e.zk.Set(e.p("n"), []byte("x"), -1)
				must(t, "set", err)
				wantRawEvent(t, r, jute.EventNodeDataChanged, e.p("n"))
			}
		}},
		{"data_and_child_watch_on_a_deleted_node_give_one_NodeDeleted", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			r := e.raw()
			rawWatchData(t, r, e.p("n"))
			rawWatchChildren(t, r, e.p("n"))
			must(t, "delete", e.zk.Delete(e.p("n"), -1))
			wantRawEvent(t, r, jute.EventNodeDeleted, e.p("n"))
			e.watchBarrier(r)
		}},
		{"exists_and_getData_watch_on_one_path_give_one_event", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			r := e.raw()
			rawWatchData(t, r, e.p("n"))
			_, err := r.Do(jute.OpExists, &jute.ExistsRequest{Path: e.p("n"), Watch: true}, &jute.ExistsResponse{})
			must(t, "exists watch", err)
			_, err = e.zk.Set(e.p("n"), []byte("x"), -1)
			must(t, "set", err)
			wantRawEvent(t, r, jute.EventNodeDataChanged, e.p("n"))
			e.watchBarrier(r)
		}},
		{"delete_fires_the_nodes_and_the_parents_watches", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			r := e.raw()
			rawWatchData(t, r, e.p("n"))
			rawWatchChildren(t, r, e.base)
			must(t, "delete", e.zk.Delete(e.p("n"), -1))
			got := map[jute.EventType]string{}
			for range 2 {
				ev, _, err := r.WaitEvent()
				must(t, "wait", err)
				got[ev.Type] = ev.Path
			}
			if got[jute.EventNodeDeleted] != e.p("n") || got[jute.EventNodeChildrenChanged] != e.base {
				t.Fatalf("events %v; want NodeDeleted on the node and NodeChildrenChanged on the parent", got)
			}
		}},
		{"event_comes_before_the_reply_of_the_triggering_write", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			r := e.raw()
			rawWatchData(t, r, e.p("n"))
			_, err := r.Do(jute.OpSetData, &jute.SetDataRequest{Path: e.p("n"), Data: []byte("x"), Version: -1}, &jute.SetDataResponse{})
			must(t, "setData", err)
			if len(r.Events) != 1 {
				t.Fatalf("%d notifications before the setData reply; want 1", len(r.Events))
			}
			wantRawEvent(t, r, jute.EventNodeDataChanged, e.p("n"))
		}},
		{"event_comes_before_a_read_that_shows_the_change", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			r := e.raw()
			rawWatchData(t, r, e.p("n"))
			st, err := e.zk.Set(e.p("n"), []byte("new"), -1)
			must(t, "set", err)
			for {
				var resp jute.GetDataResponse
				_, err := r.Do(jute.OpGetData, &jute.GetDataRequest{Path: e.p("n")}, &resp)
				must(t, "getData", err)
				if resp.Stat.Version == st.Version {
					break
				}
				if len(r.Events) > 0 {
					t.Fatalf("event arrived while reads still show the old data")
				}
			}
			if len(r.Events) != 1 {
				t.Fatalf("the read showed the new data but %d notifications came before it; want 1", len(r.Events))
			}
		}},
		{"events_follow_the_order_of_updates", func(t *testing.T, e *env) {
			var paths []string
			for _, n := range []string{"a", "b", "c", "d"} {
				e.mk(e.p(n), nil)
				paths = append(paths, e.p(n))
			}
			r := e.raw()
			for _, p := range paths {
				rawWatchData(t, r, p)
			}
			for i := len(paths) - 1; i >= 0; i-- {
				_, err := e.zk.Set(paths[i], []byte("x"), -1)
				must(t, "set", err)
			}
			for i := len(paths) - 1; i >= 0; i-- {
				wantRawEvent(t, r, jute.EventNodeDataChanged, paths[i])
			}
		}},
		{"every_watching_connection_gets_the_event", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			rs := []*Raw{e.raw(), e.raw(), e.raw()}
			for _, r := range rs {
				rawWatchData(t, r, e.p("n"))
			}
			_, err := e.zk.Set(e.p("n"), []byte("x"), -1)
			must(t, "set", err)
			for _, r := range rs {
				wantRawEvent(t, r, jute.EventNodeDataChanged, e.p("n"))
			}
		}},
		{"multi_fires_events_before_its_reply", func(t *testing.T, e *env) {
			e.mk(e.p("a"), nil)
			r := e.raw()
			rawWatchData(t, r, e.p("a"))
			rawWatchChildren(t, r, e.base)
			req := &jute.MultiRequest{Ops: []jute.MultiOp{
				{Type: jute.OpSetData, Req: &jute.SetDataRequest{Path: e.p("a"), Data: []byte("x"), Version: -1}},
				{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: e.p("b"), ACL: openACL()}},
			}}
			_, err := r.Do(jute.OpMulti, req, &jute.MultiResponse{})
			must(t, "multi", err)
			if len(r.Events) != 2 {
				t.Fatalf("%d notifications before the multi reply; want 2", len(r.Events))
			}
		}},
		{"watches_belong_to_the_connection_not_the_session", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			a := e.raw()
			rawWatchData(t, a, e.p("n"))
			b := e.dial()
			_, _, err := b.Handshake(jute.ConnectRequest{TimeOut: 10000, SessionID: a.Session.SessionID, Passwd: a.Session.Passwd})
			must(t, "reattach", err)
			_, err = e.zk.Set(e.p("n"), []byte("x"), -1)
			must(t, "set", err)
			e.watchBarrier(b)
		}},
		{"event_is_not_delivered_without_READ_permission", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			r := e.raw()
			rawWatchData(t, r, e.p("n"))
			owner := e.conn()
			must(t, "addauth", owner.AddAuth("digest", []byte("owner:pw")))
			_, err := owner.SetACL(e.p("n"), zk.DigestACL(zk.PermAll, "owner", "pw"), -1)
			must(t, "setACL", err)
			_, err = owner.Set(e.p("n"), []byte("secret"), -1)
			must(t, "set", err)
			e.watchBarrier(r)
		}},
		{"create_fires_parent_child_watch_with_the_parent_path", func(t *testing.T, e *env) {
			r := e.raw()
			rawWatchChildren(t, r, e.base)
			e.mk(e.p("kid"), nil)
			wantRawEvent(t, r, jute.EventNodeChildrenChanged, e.base)
		}},
		{"own_write_fires_own_watch", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			_, _, ch, err := e.zk.GetW(e.p("n"))
			must(t, "getW", err)
			_, err = e.zk.Set(e.p("n"), []byte("x"), -1)
			must(t, "set", err)
			if ev := zkEvent(t, ch); ev.Type != zk.EventNodeDataChanged {
				t.Fatalf("event %+v", ev)
			}
		}},
		{"no_event_for_an_unrelated_path", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			e.mk(e.p("other"), nil)
			_, _, ch, err := e.zk.GetW(e.p("n"))
			must(t, "getW", err)
			_, err = e.zk.Set(e.p("other"), []byte("x"), -1)
			must(t, "set", err)
			noZKEvent(t, ch)
		}},
	})
}
