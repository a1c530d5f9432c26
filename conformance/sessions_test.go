package conformance

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkd-io/zkd/jute"
)

// expiryWait bounds how long a check waits for a 4 s session to expire: ZooKeeper expires it
// between timeout and timeout+tickTime after the last packet.
const expiryWait = 20 * time.Second

func TestSessions(t *testing.T) {
	runChecks(t, "sessions", []check{
		{"silent_session_expires_and_its_ephemerals_go", func(t *testing.T, e *env) {
			r := e.rawTimeout(4000)
			rawCreate(t, r, e.p("eph"), nil, jute.ModeEphemeral)
			ok, _, ch, err := e.zk.ExistsW(e.p("eph"))
			if err != nil || !ok {
				t.Fatalf("existsW: %v %v", ok, err)
			}
			select {
			case ev := <-ch:
				if ev.Type != zk.EventNodeDeleted {
					t.Fatalf("event %+v; want NodeDeleted", ev)
				}
			case <-time.After(expiryWait):
				t.Fatalf("ephemeral of a silent 4 s session still there after %v", expiryWait)
			}
		}},
		{"expired_session_socket_is_closed_without_a_message", func(t *testing.T, e *env) {
			r := e.rawTimeout(4000)
			if err := r.ExpectClosed(expiryWait); err != nil {
				t.Fatalf("socket of a silent 4 s session: %v", err)
			}
		}},
		{"expired_session_reattach_gets_the_expired_response", func(t *testing.T, e *env) {
			r := e.rawTimeout(4000)
			rawCreate(t, r, e.p("eph"), nil, jute.ModeEphemeral)
			_, _, ch, err := e.zk.ExistsW(e.p("eph"))
			must(t, "existsW", err)
			zkEvent2(t, ch, expiryWait)
			expiredHandshake(t, e, e.dial(), jute.ConnectRequest{TimeOut: 4000, SessionID: r.Session.SessionID, Passwd: r.Session.Passwd})
		}},
		{"silent_connection_without_handshake_is_eventually_closed", func(t *testing.T, e *env) {
			if testing.Short() {
				t.Skip("takes the server's sessionless-connection timeout (10 s on ZooKeeper)")
			}
			r := e.dial()
			if err := r.ExpectClosed(20 * time.Second); err != nil {
				t.Fatalf("connection that never sent a ConnectRequest: %v", err)
			}
		}},
		{"session_survives_silence_shorter_than_its_timeout", func(t *testing.T, e *env) {
			r := e.rawTimeout(4000)
			rawCreate(t, r, e.p("eph"), nil, jute.ModeEphemeral)
			<-time.After(3 * time.Second) // a silence shorter than the 4 s timeout
			_, err := r.Do(jute.OpExists, &jute.ExistsRequest{Path: e.p("eph")}, &jute.ExistsResponse{})
			must(t, "exists after 3 s of silence", err)
		}},
		{"pings_keep_a_session_alive", func(t *testing.T, e *env) {
			r := e.rawTimeout(4000)
			rawCreate(t, r, e.p("eph"), nil, jute.ModeEphemeral)
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			end := time.Now().Add(7 * time.Second)
			for time.Now().Before(end) {
				<-tick.C
				must(t, "ping", r.Send(jute.XidPing, jute.OpPing, nil))
				if _, err := r.ReadReplyFor(jute.XidPing); err != nil {
					t.Fatalf("ping: %v", err)
				}
			}
			if !e.exists(e.p("eph")) {
				t.Fatalf("ephemeral gone although the session pinged every second")
			}
		}},
		{"requests_keep_a_session_alive", func(t *testing.T, e *env) {
			r := e.rawTimeout(4000)
			rawCreate(t, r, e.p("eph"), nil, jute.ModeEphemeral)
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			end := time.Now().Add(7 * time.Second)
			for time.Now().Before(end) {
				<-tick.C
				_, err := r.Do(jute.OpExists, &jute.ExistsRequest{Path: e.base}, &jute.ExistsResponse{})
				must(t, "exists", err)
			}
			if !e.exists(e.p("eph")) {
				t.Fatalf("ephemeral gone although the session sent a request every second")
			}
		}},
		{"close_deletes_ephemerals_at_once", func(t *testing.T, e *env) {
			c := e.conn()
			_, err := c.Create(e.p("eph"), nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
			must(t, "create", err)
			c.Close()
			if e.exists(e.p("eph")) {
				t.Fatalf("ephemeral still exists after its session closed")
			}
		}},
		{"close_fires_NodeDeleted_for_ephemerals", func(t *testing.T, e *env) {
			c := e.conn()
			_, err := c.Create(e.p("eph"), nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
			must(t, "create", err)
			_, _, ch, err := e.zk.GetW(e.p("eph"))
			must(t, "getW", err)
			c.Close()
			if ev := zkEvent(t, ch); ev.Type != zk.EventNodeDeleted || ev.Path != e.p("eph") {
				t.Fatalf("event %+v; want NodeDeleted %s", ev, e.p("eph"))
			}
		}},
		{"close_deletes_every_ephemeral_of_the_session", func(t *testing.T, e *env) {
			c := e.conn()
			for _, n := range []string{"a", "b", "c"} {
				_, err := c.Create(e.p(n), nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
				must(t, "create", err)
			}
			c.Close()
			e.exists(e.base) // sync
			if st := e.stat(e.base); st.NumChildren != 0 || st.Cversion != 6 {
				t.Fatalf("parent numChildren %d cversion %d; want 0 and 6 (3 creates, 3 deletes)", st.NumChildren, st.Cversion)
			}
		}},
		{"reattached_session_keeps_its_ephemerals", func(t *testing.T, e *env) {
			a := e.raw()
			rawCreate(t, a, e.p("eph"), nil, jute.ModeEphemeral)
			b := e.dial()
			_, _, err := b.Handshake(jute.ConnectRequest{TimeOut: 10000, SessionID: a.Session.SessionID, Passwd: a.Session.Passwd})
			must(t, "reattach", err)
			var resp jute.ExistsResponse
			_, err = b.Do(jute.OpExists, &jute.ExistsRequest{Path: e.p("eph")}, &resp)
			must(t, "exists after reattach", err)
			if resp.Stat.EphemeralOwner != a.Session.SessionID {
				t.Fatalf("owner 0x%x; want 0x%x", resp.Stat.EphemeralOwner, a.Session.SessionID)
			}
		}},
		{"go_client_reports_session_id", func(t *testing.T, e *env) {
			if e.zk.SessionID() == 0 {
				t.Fatalf("go-zookeeper has no session id")
			}
		}},
		{"closed_go_client_gets_ErrClosing", func(t *testing.T, e *env) {
			c := e.conn()
			c.Close()
			if _, _, err := c.Get(e.base); !errors.Is(err, zk.ErrClosing) && !errors.Is(err, zk.ErrConnectionClosed) {
				t.Fatalf("get on a closed client: %v", err)
			}
		}},
	})
}

func TestEphemerals(t *testing.T) {
	runChecks(t, "ephemerals", []check{
		{"child_of_ephemeral_fails_NoChildrenForEphemerals", func(t *testing.T, e *env) {
			_, err := e.zk.Create(e.p("e"), nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
			must(t, "create ephemeral", err)
			_, err = e.zk.Create(e.p("e", "c"), nil, 0, zk.WorldACL(zk.PermAll))
			if !errors.Is(err, zk.ErrNoChildrenForEphemerals) {
				t.Fatalf("create under ephemeral: %v; want ErrNoChildrenForEphemerals", err)
			}
		}},
		{"ephemeral_child_of_ephemeral_also_fails", func(t *testing.T, e *env) {
			_, err := e.zk.Create(e.p("e"), nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
			must(t, "create ephemeral", err)
			_, err = e.zk.Create(e.p("e", "c"), nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
			if !errors.Is(err, zk.ErrNoChildrenForEphemerals) {
				t.Fatalf("create under ephemeral: %v; want ErrNoChildrenForEphemerals", err)
			}
		}},
		{"another_session_may_delete_an_ephemeral", func(t *testing.T, e *env) {
			c := e.conn()
			_, err := c.Create(e.p("e"), nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
			must(t, "create", err)
			must(t, "delete from another session", e.zk.Delete(e.p("e"), -1))
		}},
		{"persistent_nodes_survive_their_session", func(t *testing.T, e *env) {
			c := e.conn()
			_, err := c.Create(e.p("p"), nil, 0, zk.WorldACL(zk.PermAll))
			must(t, "create", err)
			c.Close()
			if !e.exists(e.p("p")) {
				t.Fatalf("persistent node gone with its session")
			}
		}},
		{"getEphemerals_lists_only_this_sessions_nodes", func(t *testing.T, e *env) {
			a, b := e.raw(), e.raw()
			rawCreate(t, a, e.p("mine"), nil, jute.ModeEphemeral)
			rawCreate(t, b, e.p("theirs"), nil, jute.ModeEphemeral)
			rawCreate(t, a, e.p("persistent"), nil, jute.ModePersistent)
			var resp jute.GetEphemeralsResponse
			_, err := a.Do(jute.OpGetEphemerals, &jute.GetEphemeralsRequest{PrefixPath: e.base}, &resp)
			must(t, "getEphemerals", err)
			if !slices.Equal(resp.Ephemerals, []string{e.p("mine")}) {
				t.Fatalf("getEphemerals %v; want [%s]", resp.Ephemerals, e.p("mine"))
			}
		}},
		{"getEphemerals_with_root_prefix_lists_all_of_the_session", func(t *testing.T, e *env) {
			a := e.raw()
			rawCreate(t, a, e.p("x"), nil, jute.ModeEphemeral)
			rawCreate(t, a, e.p("y"), nil, jute.ModeEphemeralSequential)
			for _, prefix := range []string{"/", ""} {
				var resp jute.GetEphemeralsResponse
				_, err := a.Do(jute.OpGetEphemerals, &jute.GetEphemeralsRequest{PrefixPath: prefix}, &resp)
				must(t, "getEphemerals", err)
				got := slices.Sorted(slices.Values(resp.Ephemerals))
				if !slices.Equal(got, []string{e.p("x"), e.p("y0000000001")}) {
					t.Fatalf("getEphemerals(%q) = %v", prefix, got)
				}
			}
		}},
		{"getEphemerals_prefix_is_a_plain_string_prefix", func(t *testing.T, e *env) {
			a := e.raw()
			rawCreate(t, a, e.p("e"), nil, jute.ModeEphemeral)
			rawCreate(t, a, e.p("es-"), nil, jute.ModeEphemeralSequential)
			rawCreate(t, a, e.p("f"), nil, jute.ModeEphemeral)
			var resp jute.GetEphemeralsResponse
			_, err := a.Do(jute.OpGetEphemerals, &jute.GetEphemeralsRequest{PrefixPath: e.p("e")}, &resp)
			must(t, "getEphemerals", err)
			got := slices.Sorted(slices.Values(resp.Ephemerals))
			if !slices.Equal(got, []string{e.p("e"), e.p("es-0000000001")}) {
				t.Fatalf("getEphemerals(%q) = %v", e.p("e"), got)
			}
		}},
		{"getEphemerals_of_a_session_without_any_is_empty", func(t *testing.T, e *env) {
			a := e.raw()
			var resp jute.GetEphemeralsResponse
			_, err := a.Do(jute.OpGetEphemerals, &jute.GetEphemeralsRequest{PrefixPath: "/"}, &resp)
			must(t, "getEphemerals", err)
			if len(resp.Ephemerals) != 0 {
				t.Fatalf("getEphemerals = %v; want none", resp.Ephemerals)
			}
		}},
		{"deleted_ephemeral_leaves_getEphemerals", func(t *testing.T, e *env) {
			a := e.raw()
			rawCreate(t, a, e.p("e"), nil, jute.ModeEphemeral)
			_, err := a.Do(jute.OpDelete, &jute.DeleteRequest{Path: e.p("e"), Version: -1}, nil)
			must(t, "delete", err)
			var resp jute.GetEphemeralsResponse
			_, err = a.Do(jute.OpGetEphemerals, &jute.GetEphemeralsRequest{PrefixPath: e.base}, &resp)
			must(t, "getEphemerals", err)
			if len(resp.Ephemerals) != 0 {
				t.Fatalf("getEphemerals = %v after delete", resp.Ephemerals)
			}
		}},
	})
}

// zkEvent2 is zkEvent with a custom wait.
func zkEvent2(t *testing.T, ch <-chan zk.Event, wait time.Duration) zk.Event {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(wait):
		t.Fatalf("no watch event within %v", wait)
		return zk.Event{}
	}
}
