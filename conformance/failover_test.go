package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkd-io/zkd/internal/testkit"
	"github.com/zkd-io/zkd/server"
)

// orderedHosts is a go-zookeeper HostProvider that tries the servers in the order given (the
// stock one shuffles), so a check can choose the server a session starts on.
type orderedHosts struct {
	servers []string
	next    int
	tried   int
}

// Init records the servers in the order given.
func (h *orderedHosts) Init(servers []string) error {
	h.servers = slices.Clone(servers)
	return nil
}

// Len returns the number of servers.
func (h *orderedHosts) Len() int { return len(h.servers) }

// Next returns the next server in order; retryStart is true once every server has been tried
// without a connection.
func (h *orderedHosts) Next() (string, bool) {
	s := h.servers[h.next]
	h.next = (h.next + 1) % len(h.servers)
	h.tried++
	retry := h.tried > len(h.servers)
	if retry {
		h.tried = 1
	}
	return s, retry
}

// Connected resets the count of servers tried.
func (h *orderedHosts) Connected() { h.tried = 0 }

// TestClusterFailover closes the leader of a 3-node zkd cluster in the middle of a session's work.
// It starts a cluster of its own (the shared zkd-cluster target must keep its leader), so it runs
// only as the zkd-cluster row; real ZooKeeper's ensemble cannot be stopped one server at a time here.
func TestClusterFailover(t *testing.T) {
	if theSuite.skip != "" {
		t.Skip(theSuite.skip)
	}
	for _, tg := range theSuite.targets {
		t.Run(tg.Name, func(t *testing.T) {
			t.Run("session_ephemeral_watch_and_acknowledged_writes_survive_leader_loss", func(t *testing.T) {
				if tg.Name != "zkd-cluster" {
					t.Skip("needs an in-process zkd cluster whose leader the check can close; only zkd-cluster has one")
				}
				t.Parallel()
				leaderFailover(t)
			})
		})
	}
}

func leaderFailover(t *testing.T) {
	cfg, _ := zkdConfig()
	cl, err := server.StartCluster(cfg, 3)
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = cl.Shutdown(ctx)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, m := range cl.Servers {
		if err := m.WaitServing(ctx); err != nil {
			t.Fatalf("cluster member: %v", err)
		}
	}
	var leader *server.Server
	elected, _ := ctx.Deadline()
	if !testkit.Until(time.Until(elected), func() bool { // the cluster offers no leadership event
		leader = cl.Leader()
		return leader != nil
	}) {
		t.Fatalf("no leader within 30 s")
	}
	var survivors []string
	for _, m := range cl.Servers {
		if m != leader {
			survivors = append(survivors, m.Addr())
		}
	}

	// The session starts on the leader, so losing it moves the session to another member.
	addrs := append([]string{leader.Addr()}, survivors...)
	// The cutter's dialer gates replies on the reconnect after the leader dies (see replyGate:
	// go-zookeeper's own data race on reconnect).
	c, events, err := zk.Connect(addrs, 10*time.Second, zk.WithHostProvider(&orderedHosts{}),
		zk.WithDialer(newCutter().dial), zk.WithLogger(discardLogger{}), zk.WithLogInfo(false))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(c.Close)
	waitState(t, events, zk.StateHasSession)
	sid := c.SessionID()

	acl := zk.WorldACL(zk.PermAll)
	must(t, "create /failover", ignoreExists(c.Create("/failover", nil, 0, acl)))
	_, err = c.Create("/failover/eph", nil, zk.FlagEphemeral, acl)
	must(t, "create ephemeral", err)
	_, err = c.Create("/failover/watched", nil, 0, acl)
	must(t, "create watched", err)
	_, _, wch, err := c.GetW("/failover/watched")
	must(t, "getW", err)

	// write creates /failover/w-i until the server acknowledges it; a create that failed with the
	// connection may still have been applied, so NodeExists on a retry counts as acknowledged.
	write := func(i int, deadline time.Time) {
		t.Helper()
		p := fmt.Sprintf("/failover/w-%03d", i)
		retried := false
		var err error
		if !testkit.Until(time.Until(deadline), func() bool { // retry until the session has a server again
			_, err = c.Create(p, []byte(p), 0, acl)
			ok := err == nil || (retried && errors.Is(err, zk.ErrNodeExists))
			retried = true
			return ok
		}) {
			t.Fatalf("write %s not acknowledged after the failover: %v", p, err)
		}
	}
	const before, after = 20, 20
	for i := range before {
		write(i, time.Now().Add(waitTimeout))
	}
	if err := leader.Close(); err != nil {
		t.Logf("close leader: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for i := before; i < before+after; i++ {
		write(i, deadline)
	}
	if c.SessionID() != sid {
		t.Fatalf("session changed from 0x%x to 0x%x across the failover", sid, c.SessionID())
	}
	if srv := c.Server(); srv == leader.Addr() {
		t.Fatalf("session still on the closed leader %s", srv)
	}

	// Another session on a surviving member changes the watched node: the watch set before the
	// failover fires on the session's new server.
	o, oev, err := zk.Connect(survivors, 10*time.Second, zk.WithLogger(discardLogger{}), zk.WithLogInfo(false))
	if err != nil {
		t.Fatalf("connect observer: %v", err)
	}
	t.Cleanup(o.Close)
	waitState(t, oev, zk.StateHasSession)
	_, err = o.Set("/failover/watched", []byte("x"), -1)
	must(t, "set watched", err)
	select {
	case ev := <-wch:
		if ev.Type != zk.EventNodeDataChanged || ev.Path != "/failover/watched" {
			t.Fatalf("watch got %+v; want NodeDataChanged on /failover/watched", ev)
		}
	case <-time.After(waitTimeout):
		t.Fatalf("watch set before the failover did not fire")
	}

	_, err = o.Sync("/failover")
	must(t, "sync", err)
	kids, _, err := o.Children("/failover")
	must(t, "children", err)
	for i := range before + after {
		if !slices.Contains(kids, fmt.Sprintf("w-%03d", i)) {
			t.Fatalf("acknowledged write w-%03d lost; children %v", i, kids)
		}
	}
	_, st, err := o.Get("/failover/eph")
	must(t, "get ephemeral", err)
	if st.EphemeralOwner != sid {
		t.Fatalf("ephemeral owner 0x%x; want the session 0x%x", st.EphemeralOwner, sid)
	}
}

// ignoreExists drops a NodeExists error from a Create.
func ignoreExists(_ string, err error) error {
	if errors.Is(err, zk.ErrNodeExists) {
		return nil
	}
	return err
}
