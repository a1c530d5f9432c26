package server_test

import (
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/server/zkdtest"
)

func mustCreate(t *testing.T, r interface {
	Do(jute.Op, jute.Record, jute.Record) (jute.ReplyHeader, error)
}, path string, acl []jute.ACL, mode jute.CreateMode) {
	t.Helper()
	if _, err := r.Do(jute.OpCreate, &jute.CreateRequest{Path: path, ACL: acl, Flags: mode}, &jute.CreateResponse{}); err != nil {
		t.Fatalf("create %s: %v", path, err)
	}
}

// A client that watches /w and then writes it gets the event before its own write's reply.
func TestEventBeforeOwnReply(t *testing.T) {
	s := zkdtest.Start(t, zkdtest.WithoutRaft())
	r := rawSession(t, s.Addr())
	mustCreate(t, r, "/w", openACL, 0)
	if _, err := r.Do(jute.OpGetData, &jute.GetDataRequest{Path: "/w", Watch: true}, &jute.GetDataResponse{}); err != nil {
		t.Fatal(err)
	}
	rep, err := r.Call(jute.OpSetData, &jute.SetDataRequest{Path: "/w", Data: []byte("x"), Version: -1})
	if err != nil || rep.Header.Err != 0 {
		t.Fatalf("setData: %+v %v", rep.Header, err)
	}
	if len(r.Events) != 1 {
		t.Fatalf("events before the setData reply = %d; want 1", len(r.Events))
	}
	ev, _ := r.Events[0].Event()
	if ev.Type != jute.EventNodeDataChanged || ev.Path != "/w" || ev.State != jute.StateSyncConnected {
		t.Errorf("event %+v; want NodeDataChanged /w SyncConnected", ev)
	}
	if r.Events[0].Header.Zxid != rep.Header.Zxid {
		t.Errorf("event zxid 0x%x; want the write's zxid 0x%x (3.9 behaviour)", r.Events[0].Header.Zxid, rep.Header.Zxid)
	}
	// The watch was one-shot: a second write fires nothing.
	r.Events = nil
	if _, err := r.Do(jute.OpSetData, &jute.SetDataRequest{Path: "/w", Data: []byte("y"), Version: -1}, &jute.SetDataResponse{}); err != nil {
		t.Fatal(err)
	}
	if len(r.Events) != 0 {
		t.Errorf("a fired one-shot watch fired again: %d events", len(r.Events))
	}
}

// A data and a child watch on one deleted node give one NodeDeleted, plus the parent's
// NodeChildrenChanged.
func TestOneEventPerTrigger(t *testing.T) {
	s := zkdtest.Start(t, zkdtest.WithoutRaft())
	r := rawSession(t, s.Addr())
	mustCreate(t, r, "/p", openACL, 0)
	mustCreate(t, r, "/p/c", openACL, 0)
	for _, req := range []struct {
		op  jute.Op
		req jute.Record
		rsp jute.Record
	}{
		{jute.OpExists, &jute.ExistsRequest{Path: "/p/c", Watch: true}, &jute.ExistsResponse{}},
		{jute.OpGetChildren2, &jute.GetChildren2Request{Path: "/p/c", Watch: true}, &jute.GetChildren2Response{}},
		{jute.OpGetChildren, &jute.GetChildrenRequest{Path: "/p", Watch: true}, &jute.GetChildrenResponse{}},
	} {
		if _, err := r.Do(req.op, req.req, req.rsp); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Do(jute.OpDelete, &jute.DeleteRequest{Path: "/p/c", Version: -1}, nil); err != nil {
		t.Fatal(err)
	}
	var got []jute.WatcherEvent
	for _, rep := range r.Events {
		ev, _ := rep.Event()
		got = append(got, ev)
	}
	if len(got) != 2 || got[0].Type != jute.EventNodeDeleted || got[0].Path != "/p/c" ||
		got[1].Type != jute.EventNodeChildrenChanged || got[1].Path != "/p" {
		t.Errorf("events %+v; want NodeDeleted /p/c then NodeChildrenChanged /p", got)
	}
}

func TestPersistentWatches(t *testing.T) {
	s := zkdtest.Start(t, zkdtest.WithoutRaft())
	r := rawSession(t, s.Addr())
	var er jute.ErrorResponse
	rep, err := r.Call(jute.OpAddWatch, &jute.AddWatchRequest{Path: "/r", Mode: jute.AddWatchPersistentRecursive})
	if err != nil || rep.Header.Err != 0 || rep.Decode(&er) != nil {
		t.Fatalf("addWatch recursive: %+v body %d bytes, %v; want err 0 and a 4-byte body", rep.Header, len(rep.Body), err)
	}
	if _, err := r.Do(jute.OpAddWatch, &jute.AddWatchRequest{Path: "/w", Mode: jute.AddWatchPersistent}, &er); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Do(jute.OpAddWatch, &jute.AddWatchRequest{Path: "/w", Mode: 7}, &er); err != jute.CodeMarshallingError {
		t.Errorf("addWatch mode 7: %v; want MarshallingError", err)
	}
	w := rawSession(t, s.Addr())
	mustCreate(t, w, "/r", openACL, 0)
	mustCreate(t, w, "/r/c", openACL, 0)
	if _, err := w.Do(jute.OpSetData, &jute.SetDataRequest{Path: "/r/c", Data: []byte("d"), Version: -1}, &jute.SetDataResponse{}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Do(jute.OpDelete, &jute.DeleteRequest{Path: "/r/c", Version: -1}, nil); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, w, "/w", openACL, 0)
	mustCreate(t, w, "/w/p", openACL, 0)
	for range 2 {
		if _, err := w.Do(jute.OpSetData, &jute.SetDataRequest{Path: "/w", Data: []byte("d"), Version: -1}, &jute.SetDataResponse{}); err != nil {
			t.Fatal(err)
		}
	}
	want := []jute.WatcherEvent{
		{Type: jute.EventNodeCreated, Path: "/r"},
		{Type: jute.EventNodeCreated, Path: "/r/c"},
		{Type: jute.EventNodeDataChanged, Path: "/r/c"},
		{Type: jute.EventNodeDeleted, Path: "/r/c"},
		{Type: jute.EventNodeCreated, Path: "/w"},
		{Type: jute.EventNodeChildrenChanged, Path: "/w"},
		{Type: jute.EventNodeDataChanged, Path: "/w"},
		{Type: jute.EventNodeDataChanged, Path: "/w"},
	}
	for i, wv := range want {
		ev, _, err := r.WaitEvent()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if ev.Type != wv.Type || ev.Path != wv.Path {
			t.Errorf("event %d = %v %s; want %v %s", i, ev.Type, ev.Path, wv.Type, wv.Path)
		}
	}
	// checkWatches / removeWatches act on this connection's watches at exactly the path.
	if _, err := r.Do(jute.OpCheckWatches, &jute.CheckWatchesRequest{Path: "/w", Type: jute.WatcherPersistent}, nil); err != nil {
		t.Errorf("checkWatches persistent /w: %v", err)
	}
	if _, err := r.Do(jute.OpCheckWatches, &jute.CheckWatchesRequest{Path: "/w", Type: jute.WatcherData}, nil); err != jute.CodeNoWatcher {
		t.Errorf("checkWatches data /w: %v; want NoWatcher", err)
	}
	if _, err := r.Do(jute.OpRemoveWatches, &jute.RemoveWatchesRequest{Path: "/w", Type: jute.WatcherAny}, nil); err != nil {
		t.Errorf("removeWatches any /w: %v", err)
	}
	if _, err := r.Do(jute.OpRemoveWatches, &jute.RemoveWatchesRequest{Path: "/w", Type: jute.WatcherAny}, nil); err != jute.CodeNoWatcher {
		t.Errorf("removeWatches again: %v; want NoWatcher", err)
	}
}

// Events are dropped for connections without READ on the node.
func TestWatchACLFilter(t *testing.T) {
	s := zkdtest.Start(t, zkdtest.WithoutRaft())
	owner := rawSession(t, s.Addr())
	if _, err := owner.Do(jute.OpAuth, &jute.AuthPacket{Scheme: "digest", Auth: []byte("bob:pw")}, nil); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, owner, "/secret", []jute.ACL{{Perms: jute.PermAll, ID: jute.Id{Scheme: "auth"}}}, 0)
	other := rawSession(t, s.Addr())
	if _, err := other.Do(jute.OpExists, &jute.ExistsRequest{Path: "/secret", Watch: true}, &jute.ExistsResponse{}); err != jute.CodeNoAuth && err != nil {
		t.Fatal(err)
	}
	if _, err := other.Do(jute.OpAddWatch, &jute.AddWatchRequest{Path: "/secret", Mode: jute.AddWatchPersistent}, &jute.ErrorResponse{}); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Do(jute.OpSetData, &jute.SetDataRequest{Path: "/secret", Data: []byte("x"), Version: -1}, &jute.SetDataResponse{}); err != nil {
		t.Fatal(err)
	}
	// A marker event the other connection may see proves delivery has happened by now.
	if _, err := other.Do(jute.OpAddWatch, &jute.AddWatchRequest{Path: "/marker", Mode: jute.AddWatchPersistent}, &jute.ErrorResponse{}); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, owner, "/marker", openACL, 0)
	ev, _, err := other.WaitEvent()
	if err != nil || ev.Path != "/marker" {
		t.Errorf("first event for the unauthorised connection: %+v, %v; want only /marker", ev, err)
	}
}

// go-zookeeper re-registers watches with setWatches after it moves to another connection.
func TestWatchSurvivesReconnect(t *testing.T) {
	s := zkdtest.Start(t, zkdtest.WithoutRaft())
	c, _ := connect(t, s.Addr())
	if _, err := c.Create("/rw", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	_, _, ch, err := c.GetW("/rw")
	if err != nil {
		t.Fatal(err)
	}
	// Cut every connection: the client reconnects with the same session and sends setWatches.
	zkdtest.DropClients(s)
	w, _ := connect(t, s.Addr())
	if _, err := w.Set("/rw", []byte("new"), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-ch:
		if ev.Type != zk.EventNodeDataChanged || ev.Path != "/rw" {
			t.Errorf("event %+v; want NodeDataChanged /rw", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event after reconnect")
	}
}
