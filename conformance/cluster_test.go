package conformance

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkd-io/zkd/jute"
)

// needCluster skips a check on a standalone target.
func needCluster(t *testing.T, e *env) {
	t.Helper()
	if e.tg.Standalone() {
		t.Skip("needs a target of several servers")
	}
}

func TestReconfig(t *testing.T) {
	runChecks(t, "reconfig", []check{
		{"reconfig_when_disabled_fails_ReconfigDisabled", func(t *testing.T, e *env) {
			if e.tg.Caps.Reconfig {
				t.Skip("target enables reconfig")
			}
			r := e.raw()
			_, err := r.Do(jute.OpReconfig, &jute.ReconfigRequest{JoiningServers: "server.9=127.0.0.1:1:2;3", CurConfigID: -1}, &jute.GetDataResponse{})
			wantCode(t, "reconfig", err, jute.CodeReconfigDisabled)
		}},
		{"go_client_reconfig_when_disabled_fails", func(t *testing.T, e *env) {
			if e.tg.Caps.Reconfig {
				t.Skip("target enables reconfig")
			}
			_, err := e.zk.IncrementalReconfig([]string{"server.9=127.0.0.1:1:2;3"}, nil, -1)
			if !errors.Is(err, zk.ErrReconfigDisabled) {
				t.Fatalf("IncrementalReconfig: %v; want ErrReconfigDisabled", err)
			}
		}},
		{"config_node_data_matches_the_topology", func(t *testing.T, e *env) {
			data, _, err := e.zk.Get("/zookeeper/config")
			must(t, "get /zookeeper/config", err)
			if e.tg.Standalone() {
				if len(data) != 0 {
					t.Fatalf("standalone /zookeeper/config holds %q; want it empty", data)
				}
				return
			}
			lines := strings.Split(strings.TrimSpace(string(data)), "\n")
			srv := regexp.MustCompile(`^server\.\d+=[^:]+:\d+:\d+:(participant|observer)(;[^:]*:?\d+)?$`)
			for i, l := range lines {
				if i == len(lines)-1 {
					if !regexp.MustCompile(`^version=[0-9a-f]+$`).MatchString(l) {
						t.Fatalf("last config line %q; want version=<hex>", l)
					}
					continue
				}
				if !srv.MatchString(l) {
					t.Fatalf("config line %q does not have the server.N=host:port:port:role;client shape", l)
				}
			}
			if len(lines)-1 != len(e.tg.Addrs) {
				t.Fatalf("config lists %d servers; target has %d:\n%s", len(lines)-1, len(e.tg.Addrs), data)
			}
		}},
		{"config_node_accepts_a_watch", func(t *testing.T, e *env) {
			_, _, ch, err := e.zk.GetW("/zookeeper/config")
			must(t, "getW /zookeeper/config", err)
			_, err = e.zk.Sync("/zookeeper/config")
			must(t, "sync", err)
			noZKEvent(t, ch)
		}},
	})
}

func TestCluster(t *testing.T) {
	runChecks(t, "cluster", []check{
		{"exactly_one_leader", func(t *testing.T, e *env) {
			needCluster(t, e)
			leaders := 0
			for _, a := range e.tg.Addrs {
				out, err := FourLetterWord(a, "srvr", waitTimeout)
				must(t, "srvr "+a, err)
				m := regexp.MustCompile(`(?m)^Mode: (\w+)$`).FindStringSubmatch(out)
				if m == nil || (m[1] != "leader" && m[1] != "follower" && m[1] != "observer") {
					t.Fatalf("%s srvr mode %v:\n%s", a, m, out)
				}
				if m[1] == "leader" {
					leaders++
				}
			}
			if leaders != 1 {
				t.Fatalf("%d leaders among %d servers", leaders, len(e.tg.Addrs))
			}
		}},
		{"write_on_one_server_is_read_on_every_server_after_sync", func(t *testing.T, e *env) {
			needCluster(t, e)
			e.mk(e.p("n"), []byte("v"))
			for _, a := range e.tg.Addrs[1:] {
				c, _ := e.connectTo([]string{a}, 10*time.Second)
				_, err := c.Sync(e.p("n"))
				must(t, "sync on "+a, err)
				data, _, err := c.Get(e.p("n"))
				if err != nil || string(data) != "v" {
					t.Fatalf("get on %s after sync = %q, %v", a, data, err)
				}
			}
		}},
		{"session_moves_to_another_server", func(t *testing.T, e *env) {
			needCluster(t, e)
			a := e.raw()
			rawCreate(t, a, e.p("eph"), nil, jute.ModeEphemeral)
			b := e.dialAddr(e.tg.Addrs[1])
			resp, _, err := b.Handshake(jute.ConnectRequest{TimeOut: 10000, SessionID: a.Session.SessionID, Passwd: a.Session.Passwd})
			must(t, "reattach on another server", err)
			if resp.SessionID != a.Session.SessionID {
				t.Fatalf("reattach on %s gave session 0x%x; want 0x%x", e.tg.Addrs[1], resp.SessionID, a.Session.SessionID)
			}
			_, err = b.Do(jute.OpSync, &jute.SyncRequest{Path: e.p("eph")}, &jute.SyncResponse{})
			must(t, "sync", err)
			var st jute.ExistsResponse
			_, err = b.Do(jute.OpExists, &jute.ExistsRequest{Path: e.p("eph")}, &st)
			must(t, "exists on the new server", err)
			if st.Stat.EphemeralOwner != a.Session.SessionID {
				t.Fatalf("ephemeral owner 0x%x", st.Stat.EphemeralOwner)
			}
		}},
		{"old_connection_of_a_moved_session_is_refused", func(t *testing.T, e *env) {
			needCluster(t, e)
			a := e.raw()
			b := e.dialAddr(e.tg.Addrs[1])
			_, _, err := b.Handshake(jute.ConnectRequest{TimeOut: 10000, SessionID: a.Session.SessionID, Passwd: a.Session.Passwd})
			must(t, "reattach on another server", err)
			_, err = b.Do(jute.OpCreate, &jute.CreateRequest{Path: e.p("moved"), ACL: openACL()}, &jute.CreateResponse{})
			must(t, "write on the new server", err)
			xid := a.NextXid()
			_ = a.Send(xid, jute.OpCreate, &jute.CreateRequest{Path: e.p("stale"), ACL: openACL()})
			got, err := a.ReadUntilClosed(waitTimeout)
			// zkd never acts for the session through its old connection. A real ensemble usually
			// refuses too, but in CI one acknowledged the stale create, so that is recorded for
			// ZooKeeper rather than failed.
			for _, rep := range got {
				if rep.Header.Xid == xid && rep.Header.Err == 0 {
					if e.isZkd() {
						t.Fatalf("old connection got a successful reply %+v after the session moved", rep.Header)
					}
					e.seen("old connection got a successful reply %+v after the session moved", rep.Header)
					return
				}
			}
			if err == nil {
				e.seen("old connection after a move: %d replies before the close", len(got))
				return
			}
			// zkd refuses the write and closes the connection (SessionMoved). Real ZooKeeper 3.8
			// usually does the same, but in CI an ensemble once kept the connection open past
			// the timeout with the write unanswered, so only zkd is held to the close.
			if e.isZkd() {
				t.Fatalf("old connection after the session moved: %v", err)
			}
			e.seen("old connection after a move stayed open (%v) with %d replies, none a success", err, len(got))
		}},
		{"watch_on_one_server_fires_for_a_write_on_another", func(t *testing.T, e *env) {
			needCluster(t, e)
			e.mk(e.p("n"), nil)
			w := e.dialAddr(e.tg.Addrs[1])
			must(t, "session", w.NewSession(10000))
			_, err := w.Do(jute.OpSync, &jute.SyncRequest{Path: e.p("n")}, &jute.SyncResponse{})
			must(t, "sync", err)
			rawWatchData(t, w, e.p("n"))
			_, err = e.zk.Set(e.p("n"), []byte("x"), -1)
			must(t, "set", err)
			wantRawEvent(t, w, jute.EventNodeDataChanged, e.p("n"))
		}},
		{"sequential_counter_is_shared_by_all_servers", func(t *testing.T, e *env) {
			needCluster(t, e)
			for i, a := range append(e.tg.Addrs, e.tg.Addrs...) {
				c, _ := e.connectTo([]string{a}, 10*time.Second)
				_, err := c.Sync(e.base)
				must(t, "sync", err)
				p, err := c.Create(e.p("s-"), nil, zk.FlagSequence, zk.WorldACL(zk.PermAll))
				must(t, "create sequential on "+a, err)
				if want := e.p("s-000000000" + itoa(i)); p != want {
					t.Fatalf("create %d on %s: %q; want %q", i, a, p, want)
				}
			}
		}},
		{"ephemerals_of_a_closed_session_vanish_everywhere", func(t *testing.T, e *env) {
			needCluster(t, e)
			c := e.conn()
			_, err := c.Create(e.p("eph"), nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
			must(t, "create", err)
			c.Close()
			for _, a := range e.tg.Addrs {
				o, _ := e.connectTo([]string{a}, 10*time.Second)
				_, err := o.Sync(e.p("eph"))
				must(t, "sync", err)
				if ok, _, err := o.Exists(e.p("eph")); err != nil || ok {
					t.Fatalf("ephemeral on %s after close: %v %v", a, ok, err)
				}
			}
		}},
		{"zxids_agree_across_servers", func(t *testing.T, e *env) {
			needCluster(t, e)
			e.mk(e.p("n"), nil)
			want := e.stat(e.p("n"))
			for _, a := range e.tg.Addrs[1:] {
				o, _ := e.connectTo([]string{a}, 10*time.Second)
				_, err := o.Sync(e.p("n"))
				must(t, "sync", err)
				_, st, err := o.Exists(e.p("n"))
				must(t, "exists", err)
				if *st != *want {
					t.Fatalf("stat on %s %+v; on the first server %+v", a, st, want)
				}
			}
		}},
	})
}
