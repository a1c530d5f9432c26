package server_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/server/zkdtest"
)

func TestClusterReplicatesAndForwards(t *testing.T) {
	cl := zkdtest.StartCluster(t, 3)
	for i, addr := range cl.Addrs() {
		c, _ := connect(t, addr)
		p := fmt.Sprintf("/from-%d", i)
		if _, err := c.Create(p, []byte(p), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatalf("create via server %d: %v", i+1, err)
		}
	}
	// Every member sees every write after a sync.
	for i, addr := range cl.Addrs() {
		c, _ := connect(t, addr)
		if _, err := c.Sync("/"); err != nil {
			t.Fatal(err)
		}
		kids, _, err := c.Children("/")
		if err != nil || len(kids) != 4 {
			t.Errorf("server %d children of / = %v, %v; want zookeeper + 3", i+1, kids, err)
		}
	}
}

// A client that moves its session to another member keeps its ephemerals and, after
// setWatches, its watches.
func TestSessionMovesBetweenMembers(t *testing.T) {
	cl := zkdtest.StartCluster(t, 3)
	addrs := cl.Addrs()
	r := rawSession(t, addrs[0])
	mustCreate(t, r, "/eph", openACL, jute.ModeEphemeral)
	mustCreate(t, r, "/watched", openACL, 0)
	var st jute.ExistsResponse
	h, err := r.Do(jute.OpExists, &jute.ExistsRequest{Path: "/watched", Watch: true}, &st)
	if err != nil {
		t.Fatal(err)
	}
	lastZxid := h.Zxid

	// Reattach on server 2 (as a client does after losing server 1).
	r2 := dialRaw(t, addrs[1])
	resp, _, err := r2.Handshake(jute.ConnectRequest{LastZxidSeen: lastZxid, TimeOut: 10000, SessionID: r.Session.SessionID, Passwd: r.Session.Passwd})
	if err != nil || resp.SessionID != r.Session.SessionID {
		t.Fatalf("reattach on server 2: %+v, %v", resp, err)
	}
	_ = r.Close()
	if _, err := r2.Do(jute.OpSetWatches, &jute.SetWatches{RelativeZxid: lastZxid, DataWatches: []string{"/watched"}}, nil); err != nil {
		t.Fatal(err)
	}
	var eph jute.GetEphemeralsResponse
	if _, err := r2.Do(jute.OpGetEphemerals, &jute.GetEphemeralsRequest{PrefixPath: "/"}, &eph); err != nil {
		t.Fatal(err)
	}
	if len(eph.Ephemerals) != 1 || eph.Ephemerals[0] != "/eph" {
		t.Errorf("ephemerals on server 2 = %v; want [/eph]", eph.Ephemerals)
	}
	// A write through server 3 fires the watch re-registered on server 2.
	w := rawSession(t, addrs[2])
	if _, err := w.Do(jute.OpSetData, &jute.SetDataRequest{Path: "/watched", Data: []byte("x"), Version: -1}, &jute.SetDataResponse{}); err != nil {
		t.Fatal(err)
	}
	ev, _, err := r2.WaitEvent()
	if err != nil || ev.Type != jute.EventNodeDataChanged || ev.Path != "/watched" {
		t.Errorf("event on server 2: %+v, %v; want NodeDataChanged /watched", ev, err)
	}
	// The session stays alive on server 2 well past its timeout (touches reach the leader).
	if _, err := r2.Do(jute.OpExists, &jute.ExistsRequest{Path: "/eph"}, &jute.ExistsResponse{}); err != nil {
		t.Errorf("ephemeral after the move: %v", err)
	}
}

// A write sent on a connection whose session has since reattached through another member is
// refused by the leader; the stale connection closes without a reply, counted as session_moved
// (ZooKeeper closes it too), and nothing is applied. Both ways in: the stale connection on a
// follower (its write forwarded) and on the leader (refused as it is proposed).
func TestWriteOfAMovedSessionClosesTheStaleConnection(t *testing.T) {
	cl := zkdtest.StartCluster(t, 3)
	leader := cl.Leader()
	if leader == nil {
		t.Fatal("no leader")
	}
	var follower []string
	for _, s := range cl.Servers {
		if s != leader {
			follower = append(follower, s.Addr())
		}
	}
	for _, tc := range []struct{ name, stale, moved string }{
		{"forwarded", follower[0], follower[1]},
		{"on the leader", leader.Addr(), follower[0]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := mntr(t, tc.stale)["zk_connections_closed_session_moved"]
			old := rawSession(t, tc.stale)
			// A write through the stale member first makes it the session's owner.
			mustCreate(t, old, "/owned-"+tc.name, openACL, 0)
			moved := dialRaw(t, tc.moved)
			resp, _, err := moved.Handshake(jute.ConnectRequest{TimeOut: 10000, SessionID: old.Session.SessionID, Passwd: old.Session.Passwd})
			if err != nil || resp.SessionID != old.Session.SessionID {
				t.Fatalf("reattach: %+v, %v", resp, err)
			}
			// A write through the new member makes that member the owner.
			mustCreate(t, moved, "/moved-"+tc.name, openACL, 0)

			path := "/stale-" + tc.name
			h, err := old.Do(jute.OpCreate, &jute.CreateRequest{Path: path, ACL: openACL}, &jute.CreateResponse{})
			if code := jute.Code(0); err == nil || errors.As(err, &code) {
				t.Fatalf("the stale connection's create was answered: %+v, %v; want the connection closed", h, err)
			}
			waitClosed(t, tc.stale, "session_moved", before+1)
			var st jute.ExistsResponse
			if _, err := moved.Do(jute.OpSync, &jute.SyncRequest{Path: "/"}, &jute.SyncResponse{}); err != nil {
				t.Fatal(err)
			}
			if h, err := moved.Do(jute.OpExists, &jute.ExistsRequest{Path: path}, &st); err == nil || h.Err != jute.CodeNoNode {
				t.Errorf("exists %s after the refused create: %+v, %v; want NoNode", path, h, err)
			}
		})
	}
}

// Killing the leader loses no acknowledged write, and writes resume on the survivors.
func TestLeaderFailover(t *testing.T) {
	cl := zkdtest.StartCluster(t, 3)
	leader := cl.Leader()
	if leader == nil {
		t.Fatal("no leader")
	}
	var others []string
	for _, s := range cl.Servers {
		if s != leader {
			others = append(others, s.Addr())
		}
	}
	c, _ := connect(t, others...)
	for i := range 50 {
		if _, err := c.Create(fmt.Sprintf("/f-%d", i), nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	killed := time.Now()
	if err := leader.Close(); err != nil {
		t.Fatal(err)
	}
	// Writes resume once a new leader is elected.
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err := c.Create("/after", nil, 0, zk.WorldACL(zk.PermAll))
		if err == nil {
			break
		}
		if !errors.Is(err, zk.ErrConnectionClosed) && !errors.Is(err, zk.ErrNoServer) && !errors.Is(err, zk.ErrSessionMoved) {
			t.Fatalf("create after the leader died: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("writes did not resume")
		}
	}
	t.Logf("writes resumed %v after the leader was closed", time.Since(killed).Round(time.Millisecond))
	// Every acknowledged write survived. A read may still meet a connection loss while the
	// cluster settles (another election on a loaded machine); a ZooKeeper client retries it.
	for i := range 50 {
		p := fmt.Sprintf("/f-%d", i)
		for {
			ok, _, err := c.Exists(p)
			if err == nil && ok {
				break
			}
			if err == nil || !errors.Is(err, zk.ErrConnectionClosed) || time.Now().After(deadline) {
				t.Fatalf("acknowledged %s after failover: %v, %v", p, ok, err)
			}
			t.Logf("exists %s: %v; retrying", p, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range cl.Servers {
		if s != leader {
			if err := s.WaitServing(ctx); err != nil {
				t.Error(err)
			}
		}
	}
}
