package conformance

import (
	"testing"

	"github.com/zkd-io/zkd/jute"
)

func TestSetWatches(t *testing.T) {
	runChecks(t, "setwatches", []check{
		{"catch_up_events_in_list_order_before_the_reply", func(t *testing.T, e *env) {
			e.mk(e.p("w"), nil)
			r := e.raw()
			req := &jute.SetWatches{
				RelativeZxid: 0,
				DataWatches:  []string{e.p("w"), e.p("gone")},
				ExistWatches: []string{e.p("w")},
				ChildWatches: []string{e.p("w"), e.p("gone2")},
			}
			rep, err := r.Call(jute.OpSetWatches, req)
			must(t, "setWatches", err)
			if rep.Header.Err != 0 || len(rep.Body) != 0 {
				t.Fatalf("setWatches reply %+v body %d bytes; want err 0 and no body", rep.Header, len(rep.Body))
			}
			want := []jute.WatcherEvent{
				{Type: jute.EventNodeDataChanged, Path: e.p("w")},
				{Type: jute.EventNodeDeleted, Path: e.p("gone")},
				{Type: jute.EventNodeCreated, Path: e.p("w")},
				{Type: jute.EventNodeChildrenChanged, Path: e.p("w")},
				{Type: jute.EventNodeDeleted, Path: e.p("gone2")},
			}
			if len(r.Events) != len(want) {
				t.Fatalf("%d catch-up events before the reply; want %d", len(r.Events), len(want))
			}
			for i, w := range want {
				ev, rep, err := r.WaitEvent()
				must(t, "event", err)
				if ev.Type != w.Type || ev.Path != w.Path || ev.State != jute.StateSyncConnected {
					t.Fatalf("catch-up event %d: %v %s state %v; want %v %s", i, ev.Type, ev.Path, ev.State, w.Type, w.Path)
				}
				if rep.Header.Zxid != -1 {
					t.Fatalf("catch-up event %d header zxid 0x%x; want -1", i, rep.Header.Zxid)
				}
			}
		}},
		{"up_to_date_watches_are_registered_without_events", func(t *testing.T, e *env) {
			e.mk(e.p("w"), nil)
			zx := e.stat(e.p("w")).Mzxid
			r := e.raw()
			rep, err := r.Call(jute.OpSetWatches, &jute.SetWatches{RelativeZxid: zx, DataWatches: []string{e.p("w")}, ExistWatches: []string{}, ChildWatches: []string{e.p("w")}})
			must(t, "setWatches", err)
			if rep.Header.Err != 0 || len(r.Events) != 0 {
				t.Fatalf("setWatches reply %+v with %d events; want err 0 and no events", rep.Header, len(r.Events))
			}
			e.mk(e.p("w", "c"), nil)
			wantRawEvent(t, r, jute.EventNodeChildrenChanged, e.p("w"))
			_, err = e.zk.Set(e.p("w"), []byte("x"), -1)
			must(t, "set", err)
			wantRawEvent(t, r, jute.EventNodeDataChanged, e.p("w"))
		}},
		{"exist_watch_on_missing_node_is_registered", func(t *testing.T, e *env) {
			r := e.raw()
			_, err := r.Do(jute.OpSetWatches, &jute.SetWatches{RelativeZxid: 0, DataWatches: []string{}, ExistWatches: []string{e.p("later")}, ChildWatches: []string{}}, nil)
			must(t, "setWatches", err)
			if len(r.Events) != 0 {
				t.Fatalf("%d events for an exist watch on a missing node", len(r.Events))
			}
			e.mk(e.p("later"), nil)
			wantRawEvent(t, r, jute.EventNodeCreated, e.p("later"))
		}},
		{"data_watch_newer_than_relative_zxid_fires_NodeDataChanged", func(t *testing.T, e *env) {
			e.mk(e.p("w"), nil)
			zx := e.stat(e.p("w")).Mzxid
			_, err := e.zk.Set(e.p("w"), []byte("changed"), -1)
			must(t, "set", err)
			r := e.raw()
			_, err = r.Do(jute.OpSetWatches, &jute.SetWatches{RelativeZxid: zx, DataWatches: []string{e.p("w")}, ExistWatches: []string{}, ChildWatches: []string{}}, nil)
			must(t, "setWatches", err)
			if len(r.Events) != 1 {
				t.Fatalf("%d events; want 1 NodeDataChanged", len(r.Events))
			}
			wantRawEvent(t, r, jute.EventNodeDataChanged, e.p("w"))
		}},
		{"child_watch_uses_pzxid_for_catch_up", func(t *testing.T, e *env) {
			e.mk(e.p("w"), nil)
			zx := e.stat(e.p("w")).Mzxid
			e.mk(e.p("w", "c"), nil)
			r := e.raw()
			_, err := r.Do(jute.OpSetWatches, &jute.SetWatches{RelativeZxid: zx, DataWatches: []string{e.p("w")}, ExistWatches: []string{}, ChildWatches: []string{e.p("w")}}, nil)
			must(t, "setWatches", err)
			if len(r.Events) != 1 {
				t.Fatalf("%d events; want only NodeChildrenChanged (the data did not change)", len(r.Events))
			}
			wantRawEvent(t, r, jute.EventNodeChildrenChanged, e.p("w"))
		}},
		{"reply_echoes_a_positive_xid", func(t *testing.T, e *env) {
			r := e.raw()
			rep, err := r.CallXid(77, jute.OpSetWatches, &jute.SetWatches{DataWatches: []string{}, ExistWatches: []string{}, ChildWatches: []string{}})
			must(t, "setWatches", err)
			if rep.Header.Xid != 77 || rep.Header.Err != 0 {
				t.Fatalf("reply %+v; want xid 77 err 0", rep.Header)
			}
		}},
		{"reply_echoes_xid_minus_8", func(t *testing.T, e *env) {
			r := e.raw()
			rep, err := r.CallXid(jute.XidSetWatches, jute.OpSetWatches, &jute.SetWatches{DataWatches: []string{}, ExistWatches: []string{}, ChildWatches: []string{}})
			must(t, "setWatches", err)
			if rep.Header.Xid != jute.XidSetWatches || rep.Header.Err != 0 {
				t.Fatalf("reply %+v; want xid -8 err 0", rep.Header)
			}
		}},
		{"registered_watch_is_one_shot", func(t *testing.T, e *env) {
			e.mk(e.p("w"), nil)
			zx := e.stat(e.p("w")).Mzxid
			r := e.raw()
			_, err := r.Do(jute.OpSetWatches, &jute.SetWatches{RelativeZxid: zx, DataWatches: []string{e.p("w")}, ExistWatches: []string{}, ChildWatches: []string{}}, nil)
			must(t, "setWatches", err)
			for range 2 {
				_, err = e.zk.Set(e.p("w"), []byte("x"), -1)
				must(t, "set", err)
			}
			wantRawEvent(t, r, jute.EventNodeDataChanged, e.p("w"))
			e.watchBarrier(r)
		}},
		{"setWatches2_registers_persistent_watches_without_catch_up", func(t *testing.T, e *env) {
			e.mk(e.p("p"), []byte("old"))
			e.mk(e.p("r"), nil)
			_, err := e.zk.Set(e.p("p"), []byte("new"), -1)
			must(t, "set", err)
			r := e.raw()
			rep, err := r.Call(jute.OpSetWatches2, &jute.SetWatches2{
				RelativeZxid: 0, DataWatches: []string{}, ExistWatches: []string{}, ChildWatches: []string{},
				PersistentWatches: []string{e.p("p")}, PersistentRecursiveWatches: []string{e.p("r")},
			})
			must(t, "setWatches2", err)
			if rep.Header.Err != 0 || len(rep.Body) != 0 || len(r.Events) != 0 {
				t.Fatalf("setWatches2 reply %+v body %d, %d events; want err 0, no body, no catch-up", rep.Header, len(rep.Body), len(r.Events))
			}
			for range 2 {
				_, err = e.zk.Set(e.p("p"), []byte("x"), -1)
				must(t, "set", err)
				wantRawEvent(t, r, jute.EventNodeDataChanged, e.p("p"))
			}
			e.mk(e.p("r", "deep"), nil)
			wantRawEvent(t, r, jute.EventNodeCreated, e.p("r", "deep"))
		}},
		{"setWatches2_standard_lists_catch_up_like_setWatches", func(t *testing.T, e *env) {
			r := e.raw()
			_, err := r.Do(jute.OpSetWatches2, &jute.SetWatches2{
				RelativeZxid: 0, DataWatches: []string{e.p("gone")}, ExistWatches: []string{}, ChildWatches: []string{},
				PersistentWatches: []string{}, PersistentRecursiveWatches: []string{},
			}, nil)
			must(t, "setWatches2", err)
			if len(r.Events) != 1 {
				t.Fatalf("%d events; want NodeDeleted for the missing node", len(r.Events))
			}
			wantRawEvent(t, r, jute.EventNodeDeleted, e.p("gone"))
		}},
		{"catch_up_events_ignore_the_acl", func(t *testing.T, e *env) {
			owner := e.conn()
			must(t, "addauth", owner.AddAuth("digest", []byte("o:pw")))
			_, err := owner.Create(e.p("secret"), nil, 0, digestACL("o", "pw"))
			must(t, "create", err)
			r := e.raw()
			_, err = r.Do(jute.OpSetWatches, &jute.SetWatches{RelativeZxid: 0, DataWatches: []string{e.p("secret")}, ExistWatches: []string{}, ChildWatches: []string{}}, nil)
			must(t, "setWatches", err)
			if len(r.Events) != 1 {
				t.Fatalf("%d catch-up events for a node the client cannot read; want 1 (catch-up skips the ACL filter)", len(r.Events))
			}
			wantRawEvent(t, r, jute.EventNodeDataChanged, e.p("secret"))
		}},
		{"empty_setWatches_is_accepted", func(t *testing.T, e *env) {
			r := e.raw()
			_, err := r.Do(jute.OpSetWatches, &jute.SetWatches{DataWatches: []string{}, ExistWatches: []string{}, ChildWatches: []string{}}, nil)
			must(t, "setWatches", err)
		}},
	})
}
