package conformance

import (
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/zkd-io/zkd/jute"
)

// addWatch registers a persistent or persistent-recursive watch through r and checks the reply
// body is the 4-byte ErrorResponse{0} the Java client reads.
func addWatch(t *testing.T, r *Raw, path string, mode jute.AddWatchMode) {
	t.Helper()
	var resp jute.ErrorResponse
	_, err := r.Do(jute.OpAddWatch, &jute.AddWatchRequest{Path: path, Mode: mode}, &resp)
	must(t, "addWatch "+path, err)
	if resp.Err != 0 {
		t.Fatalf("addWatch body ErrorResponse{%d}; want 0", resp.Err)
	}
}

func TestPersistentWatches(t *testing.T) {
	runChecks(t, "persistent", []check{
		{"addWatch_reply_body_is_ErrorResponse_zero", func(t *testing.T, e *env) {
			r := e.raw()
			rep, err := r.Call(jute.OpAddWatch, &jute.AddWatchRequest{Path: e.base, Mode: jute.AddWatchPersistent})
			must(t, "addWatch", err)
			if rep.Header.Err != 0 || len(rep.Body) != 4 || string(rep.Body) != "\x00\x00\x00\x00" {
				t.Fatalf("addWatch reply %+v body % x; want err 0 and a 4-byte zero body", rep.Header, rep.Body)
			}
		}},
		{"addWatch_with_unknown_mode_fails_MarshallingError", func(t *testing.T, e *env) {
			r := e.raw()
			_, err := r.Do(jute.OpAddWatch, &jute.AddWatchRequest{Path: e.base, Mode: 7}, &jute.ErrorResponse{})
			wantCode(t, "addWatch mode 7", err, jute.CodeMarshallingError)
		}},
		{"addWatch_on_a_missing_node_is_accepted", func(t *testing.T, e *env) {
			r := e.raw()
			addWatch(t, r, e.p("later"), jute.AddWatchPersistent)
			e.mk(e.p("later"), nil)
			wantRawEvent(t, r, jute.EventNodeCreated, e.p("later"))
		}},
		{"persistent_watch_fires_repeatedly", func(t *testing.T, e *env) {
			e.mk(e.p("w"), nil)
			r := e.raw()
			addWatch(t, r, e.p("w"), jute.AddWatchPersistent)
			for range 3 {
				_, err := e.zk.Set(e.p("w"), []byte("x"), -1)
				must(t, "set", err)
				wantRawEvent(t, r, jute.EventNodeDataChanged, e.p("w"))
			}
		}},
		{"persistent_watch_gets_NodeChildrenChanged", func(t *testing.T, e *env) {
			e.mk(e.p("w"), nil)
			r := e.raw()
			addWatch(t, r, e.p("w"), jute.AddWatchPersistent)
			e.mk(e.p("w", "c"), nil)
			wantRawEvent(t, r, jute.EventNodeChildrenChanged, e.p("w"))
			must(t, "delete", e.zk.Delete(e.p("w", "c"), -1))
			wantRawEvent(t, r, jute.EventNodeChildrenChanged, e.p("w"))
		}},
		{"persistent_watch_survives_delete_and_recreate", func(t *testing.T, e *env) {
			e.mk(e.p("w"), nil)
			r := e.raw()
			addWatch(t, r, e.p("w"), jute.AddWatchPersistent)
			must(t, "delete", e.zk.Delete(e.p("w"), -1))
			wantRawEvent(t, r, jute.EventNodeDeleted, e.p("w"))
			e.mk(e.p("w"), nil)
			wantRawEvent(t, r, jute.EventNodeCreated, e.p("w"))
		}},
		{"persistent_watch_ignores_grandchildren", func(t *testing.T, e *env) {
			e.mk(e.p("w"), nil)
			e.mk(e.p("w", "c"), nil)
			r := e.raw()
			addWatch(t, r, e.p("w"), jute.AddWatchPersistent)
			e.mk(e.p("w", "c", "g"), nil)
			_, err := e.zk.Set(e.p("w", "c"), []byte("x"), -1)
			must(t, "set child", err)
			e.watchBarrier(r)
		}},
		{"recursive_watch_sees_the_subtree_without_NodeChildrenChanged", func(t *testing.T, e *env) {
			r := e.raw()
			addWatch(t, r, e.p("r"), jute.AddWatchPersistentRecursive)
			e.mk(e.p("r"), nil)
			e.mk(e.p("r", "c"), nil)
			_, err := e.zk.Set(e.p("r", "c"), []byte("x"), -1)
			must(t, "set", err)
			must(t, "delete", e.zk.Delete(e.p("r", "c"), -1))
			wantRawEvent(t, r, jute.EventNodeCreated, e.p("r"))
			wantRawEvent(t, r, jute.EventNodeCreated, e.p("r", "c"))
			wantRawEvent(t, r, jute.EventNodeDataChanged, e.p("r", "c"))
			wantRawEvent(t, r, jute.EventNodeDeleted, e.p("r", "c"))
			e.watchBarrier(r)
		}},
		{"recursive_watch_sees_deep_descendants", func(t *testing.T, e *env) {
			e.mk(e.p("r"), nil)
			r := e.raw()
			addWatch(t, r, e.p("r"), jute.AddWatchPersistentRecursive)
			e.mk(e.p("r", "a"), nil)
			e.mk(e.p("r", "a", "b"), nil)
			e.mk(e.p("r", "a", "b", "c"), nil)
			wantRawEvent(t, r, jute.EventNodeCreated, e.p("r", "a"))
			wantRawEvent(t, r, jute.EventNodeCreated, e.p("r", "a", "b"))
			wantRawEvent(t, r, jute.EventNodeCreated, e.p("r", "a", "b", "c"))
		}},
		{"recursive_watch_ignores_siblings_with_a_common_prefix", func(t *testing.T, e *env) {
			e.mk(e.p("r"), nil)
			r := e.raw()
			addWatch(t, r, e.p("r"), jute.AddWatchPersistentRecursive)
			e.mk(e.p("rx"), nil)
			e.watchBarrier(r)
		}},
		{"standard_child_watch_below_recursive_watch_still_fires", func(t *testing.T, e *env) {
			e.mk(e.p("r"), nil)
			r := e.raw()
			addWatch(t, r, e.p("r"), jute.AddWatchPersistentRecursive)
			rawWatchChildren(t, r, e.p("r"))
			e.mk(e.p("r", "c"), nil)
			got := map[jute.EventType]string{}
			for range 2 {
				ev, _, err := r.WaitEvent()
				must(t, "wait", err)
				got[ev.Type] = ev.Path
			}
			if got[jute.EventNodeCreated] != e.p("r", "c") || got[jute.EventNodeChildrenChanged] != e.p("r") {
				t.Fatalf("events %v; want NodeCreated on the child and NodeChildrenChanged from the standard watch", got)
			}
		}},
		{"removeWatches_any_removes_a_persistent_watch", func(t *testing.T, e *env) {
			e.mk(e.p("w"), nil)
			r := e.raw()
			addWatch(t, r, e.p("w"), jute.AddWatchPersistent)
			_, err := r.Do(jute.OpRemoveWatches, &jute.RemoveWatchesRequest{Path: e.p("w"), Type: jute.WatcherAny}, nil)
			must(t, "removeWatches any", err)
			_, err = e.zk.Set(e.p("w"), []byte("x"), -1)
			must(t, "set", err)
			e.watchBarrier(r)
		}},
		{"removeWatches_any_removes_a_recursive_watch", func(t *testing.T, e *env) {
			e.mk(e.p("w"), nil)
			r := e.raw()
			addWatch(t, r, e.p("w"), jute.AddWatchPersistentRecursive)
			_, err := r.Do(jute.OpRemoveWatches, &jute.RemoveWatchesRequest{Path: e.p("w"), Type: jute.WatcherAny}, nil)
			must(t, "removeWatches any", err)
			e.mk(e.p("w", "c"), nil)
			e.watchBarrier(r)
		}},
		{"checkWatches_persistent_type_3_8_or_3_9", func(t *testing.T, e *env) {
			r := e.raw()
			addWatch(t, r, e.base, jute.AddWatchPersistent)
			_, err := r.Do(jute.OpCheckWatches, &jute.CheckWatchesRequest{Path: e.base, Type: jute.WatcherPersistent}, nil)
			switch wantOneOf(t, "checkWatches type Persistent", err, jute.CodeOK, jute.CodeMarshallingError) {
			case jute.CodeOK:
				e.seen("checkWatches type 4 is accepted (ZooKeeper 3.9 behaviour)")
			default:
				e.seen("checkWatches type 4 gives MarshallingError (ZooKeeper 3.8 behaviour)")
			}
		}},
		{"addWatch_needs_no_READ_permission", func(t *testing.T, e *env) {
			owner := e.conn()
			must(t, "addauth", owner.AddAuth("digest", []byte("o:pw")))
			_, err := owner.Create(e.p("secret"), nil, 0, digestACL("o", "pw"))
			must(t, "create", err)
			r := e.raw()
			addWatch(t, r, e.p("secret"), jute.AddWatchPersistent)
		}},
		{"addWatch_does_not_validate_the_path", func(t *testing.T, e *env) {
			r := e.raw()
			_, err := r.Do(jute.OpAddWatch, &jute.AddWatchRequest{Path: "relative/path", Mode: jute.AddWatchPersistent}, &jute.ErrorResponse{})
			got := wantOneOf(t, "addWatch on a relative path", err, jute.CodeOK, jute.CodeBadArguments)
			e.seen("addWatch on an invalid path: %v", got)
		}},
		{"persistent_watch_is_gone_after_reconnect", func(t *testing.T, e *env) {
			e.mk(e.p("w"), nil)
			a := e.raw()
			addWatch(t, a, e.p("w"), jute.AddWatchPersistent)
			b := e.dial()
			_, _, err := b.Handshake(jute.ConnectRequest{TimeOut: 10000, SessionID: a.Session.SessionID, Passwd: a.Session.Passwd})
			must(t, "reattach", err)
			_, err = e.zk.Set(e.p("w"), []byte("x"), -1)
			must(t, "set", err)
			e.watchBarrier(b)
		}},
		{"standard_and_persistent_watch_on_one_path_give_one_event", func(t *testing.T, e *env) {
			e.mk(e.p("w"), nil)
			r := e.raw()
			rawWatchData(t, r, e.p("w"))
			addWatch(t, r, e.p("w"), jute.AddWatchPersistent)
			for range 2 {
				_, err := e.zk.Set(e.p("w"), []byte("x"), -1)
				must(t, "set", err)
				wantRawEvent(t, r, jute.EventNodeDataChanged, e.p("w"))
			}
			e.watchBarrier(r)
		}},
		{"recursive_watch_on_root_of_subtree_sees_deletes_by_session_close", func(t *testing.T, e *env) {
			r := e.raw()
			addWatch(t, r, e.base, jute.AddWatchPersistentRecursive)
			c := e.conn()
			_, err := c.Create(e.p("eph"), nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
			must(t, "create", err)
			wantRawEvent(t, r, jute.EventNodeCreated, e.p("eph"))
			c.Close()
			wantRawEvent(t, r, jute.EventNodeDeleted, e.p("eph"))
		}},
	})
}

func TestRemoveWatches(t *testing.T) {
	runChecks(t, "removewatches", []check{
		{"checkWatches_without_a_watch_fails_NoWatcher", func(t *testing.T, e *env) {
			r := e.raw()
			for _, typ := range []jute.WatcherType{jute.WatcherData, jute.WatcherChildren, jute.WatcherAny} {
				_, err := r.Do(jute.OpCheckWatches, &jute.CheckWatchesRequest{Path: e.base, Type: typ}, nil)
				wantCode(t, "checkWatches "+typ.String(), err, jute.CodeNoWatcher)
			}
		}},
		{"checkWatches_finds_a_data_watch_and_leaves_it", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			r := e.raw()
			rawWatchData(t, r, e.p("n"))
			for range 2 {
				_, err := r.Do(jute.OpCheckWatches, &jute.CheckWatchesRequest{Path: e.p("n"), Type: jute.WatcherData}, nil)
				must(t, "checkWatches data", err)
			}
			_, err := e.zk.Set(e.p("n"), []byte("x"), -1)
			must(t, "set", err)
			wantRawEvent(t, r, jute.EventNodeDataChanged, e.p("n"))
		}},
		{"checkWatches_data_does_not_see_a_child_watch", func(t *testing.T, e *env) {
			r := e.raw()
			rawWatchChildren(t, r, e.base)
			_, err := r.Do(jute.OpCheckWatches, &jute.CheckWatchesRequest{Path: e.base, Type: jute.WatcherData}, nil)
			wantCode(t, "checkWatches data with only a child watch", err, jute.CodeNoWatcher)
			_, err = r.Do(jute.OpCheckWatches, &jute.CheckWatchesRequest{Path: e.base, Type: jute.WatcherChildren}, nil)
			must(t, "checkWatches children", err)
		}},
		{"checkWatches_sees_an_exists_watch_on_a_missing_node", func(t *testing.T, e *env) {
			r := e.raw()
			_, err := r.Do(jute.OpExists, &jute.ExistsRequest{Path: e.p("n"), Watch: true}, &jute.ExistsResponse{})
			wantCode(t, "exists", err, jute.CodeNoNode)
			_, err = r.Do(jute.OpCheckWatches, &jute.CheckWatchesRequest{Path: e.p("n"), Type: jute.WatcherData}, nil)
			must(t, "checkWatches", err)
		}},
		{"removeWatches_data_stops_the_event", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			r := e.raw()
			rawWatchData(t, r, e.p("n"))
			_, err := r.Do(jute.OpRemoveWatches, &jute.RemoveWatchesRequest{Path: e.p("n"), Type: jute.WatcherData}, nil)
			must(t, "removeWatches", err)
			_, err = e.zk.Set(e.p("n"), []byte("x"), -1)
			must(t, "set", err)
			e.watchBarrier(r)
		}},
		{"removeWatches_twice_fails_NoWatcher", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			r := e.raw()
			rawWatchData(t, r, e.p("n"))
			_, err := r.Do(jute.OpRemoveWatches, &jute.RemoveWatchesRequest{Path: e.p("n"), Type: jute.WatcherData}, nil)
			must(t, "first removeWatches", err)
			_, err = r.Do(jute.OpRemoveWatches, &jute.RemoveWatchesRequest{Path: e.p("n"), Type: jute.WatcherData}, nil)
			wantCode(t, "second removeWatches", err, jute.CodeNoWatcher)
		}},
		{"removeWatches_children_keeps_the_data_watch", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			r := e.raw()
			rawWatchData(t, r, e.p("n"))
			rawWatchChildren(t, r, e.p("n"))
			_, err := r.Do(jute.OpRemoveWatches, &jute.RemoveWatchesRequest{Path: e.p("n"), Type: jute.WatcherChildren}, nil)
			must(t, "removeWatches children", err)
			e.mk(e.p("n", "c"), nil)
			_, err = e.zk.Set(e.p("n"), []byte("x"), -1)
			must(t, "set", err)
			wantRawEvent(t, r, jute.EventNodeDataChanged, e.p("n"))
		}},
		{"removeWatches_any_removes_data_and_child_watches", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			r := e.raw()
			rawWatchData(t, r, e.p("n"))
			rawWatchChildren(t, r, e.p("n"))
			_, err := r.Do(jute.OpRemoveWatches, &jute.RemoveWatchesRequest{Path: e.p("n"), Type: jute.WatcherAny}, nil)
			must(t, "removeWatches any", err)
			must(t, "delete", e.zk.Delete(e.p("n"), -1))
			e.watchBarrier(r)
		}},
		{"removeWatches_acts_only_on_this_connection", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			a, b := e.raw(), e.raw()
			rawWatchData(t, a, e.p("n"))
			_, err := b.Do(jute.OpRemoveWatches, &jute.RemoveWatchesRequest{Path: e.p("n"), Type: jute.WatcherData}, nil)
			wantCode(t, "removeWatches from another connection", err, jute.CodeNoWatcher)
			_, err = e.zk.Set(e.p("n"), []byte("x"), -1)
			must(t, "set", err)
			wantRawEvent(t, a, jute.EventNodeDataChanged, e.p("n"))
		}},
		{"removeWatches_is_not_recursive", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			r := e.raw()
			rawWatchData(t, r, e.p("n"))
			_, err := r.Do(jute.OpRemoveWatches, &jute.RemoveWatchesRequest{Path: e.base, Type: jute.WatcherAny}, nil)
			wantCode(t, "removeWatches on the parent", err, jute.CodeNoWatcher)
		}},
		{"fired_watch_is_gone_for_checkWatches", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			r := e.raw()
			rawWatchData(t, r, e.p("n"))
			_, err := e.zk.Set(e.p("n"), []byte("x"), -1)
			must(t, "set", err)
			wantRawEvent(t, r, jute.EventNodeDataChanged, e.p("n"))
			_, err = r.Do(jute.OpCheckWatches, &jute.CheckWatchesRequest{Path: e.p("n"), Type: jute.WatcherData}, nil)
			wantCode(t, "checkWatches after firing", err, jute.CodeNoWatcher)
		}},
	})
}
