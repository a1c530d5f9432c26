package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/zkd-io/zkd/internal/testkit"
	"github.com/zkd-io/zkd/internal/testkit/raftnet"
	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/server"
)

// startFabricCluster starts a 3-server cluster whose peer traffic runs over a fault-injecting
// fabric, so a test can cut a server off.
func startFabricCluster(t *testing.T, opts ...func(*server.Config)) (*raftnet.Fabric, []*server.Server, []string) {
	t.Helper()
	fabric := raftnet.New()
	names := []string{"1", "2", "3"}
	var peers []server.Peer
	var lns []*raftnet.Endpoint
	cfgs := make([]server.Config, 3)
	for i, name := range names {
		ep := fabric.Node(name)
		ln, err := ep.Listen("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ep)
		peers = append(peers, server.Peer{ID: int64(i + 1), PeerAddr: ln.Addr().String()})
		cfgs[i].PeerListener = ln
	}
	var servers []*server.Server
	for i := range names {
		cfg := cfgs[i]
		cfg.ServerID = int64(i + 1)
		cfg.Peers = peers
		cfg.TickTime = 200 * time.Millisecond
		cfg.Consensus.Network = lns[i]
		cfg.Consensus.HeartbeatTimeout = 150 * time.Millisecond
		for _, o := range opts {
			o(&cfg)
		}
		s, err := server.Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		servers = append(servers, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, s := range servers {
		if err := s.WaitServing(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return fabric, servers, names
}

// A server cut off from the leader drops its clients; they reconnect elsewhere without losing
// their sessions.
func TestCutOffServerDropsClients(t *testing.T) {
	fabric, servers, names := startFabricCluster(t)
	victim := -1
	for i, s := range servers {
		if !s.Stats().Serving {
			continue
		}
		if s.Stats().Mode == "follower" {
			victim = i
			break
		}
	}
	if victim < 0 {
		t.Fatal("no follower")
	}
	r := rawSession(t, servers[victim].Addr())
	mustCreate(t, r, "/survivor", openACL, jute.ModeEphemeral)
	h, err := r.Do(jute.OpExists, &jute.ExistsRequest{Path: "/survivor"}, &jute.ExistsResponse{})
	if err != nil {
		t.Fatal(err)
	}

	fabric.Isolate(names[victim], names)
	// Closed once staying could cost the session: here half its 4 s timeout less the leader's
	// silence, 1.4 s after the server stops serving.
	if _, err := r.ReadUntilClosed(10 * time.Second); err != nil {
		t.Fatalf("client of the cut-off server: %v", err)
	}
	// The client reconnects to a healthy member with its session.
	other := servers[(victim+1)%3]
	r2 := dialRaw(t, other.Addr())
	resp, _, err := r2.Handshake(jute.ConnectRequest{LastZxidSeen: h.Zxid, TimeOut: 10000, SessionID: r.Session.SessionID, Passwd: r.Session.Passwd})
	if err != nil || resp.SessionID != r.Session.SessionID {
		t.Fatalf("reattach elsewhere: %+v, %v", resp, err)
	}
	var eph jute.GetEphemeralsResponse
	if _, err := r2.Do(jute.OpGetEphemerals, &jute.GetEphemeralsRequest{}, &eph); err != nil {
		t.Fatal(err)
	}
	if len(eph.Ephemerals) != 1 {
		t.Errorf("ephemerals after moving = %v; want [/survivor]", eph.Ephemerals)
	}
	// The cut-off server refuses new clients until it rejoins.
	if servers[victim].Serving() {
		t.Error("cut-off server still reports serving")
	}
	fabric.Heal()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := servers[victim].WaitServing(ctx); err != nil {
		t.Fatal(err)
	}
	r3 := rawSession(t, servers[victim].Addr())
	if _, err := r3.Do(jute.OpExists, &jute.ExistsRequest{Path: "/survivor"}, &jute.ExistsResponse{}); err != nil {
		t.Errorf("exists on the healed server: %v", err)
	}
}

// A server that stops serving keeps a client whose session is long enough to outlast the
// outage: sessions cannot expire while no leader is established (a new one gives each a full
// timeout), so sending every client to reconnect elsewhere at once only makes a storm. Here the
// follower is cut off for many ticks, but far less than half the session's timeout, and the
// client is still connected, with its session, when it rejoins.
func TestLongSessionOutlastsAShortOutage(t *testing.T) {
	fabric, servers, names := startFabricCluster(t, func(c *server.Config) { c.MaxSessionTimeout = time.Minute })
	victim := -1
	for i, s := range servers {
		if s.Stats().Mode == "follower" {
			victim = i
			break
		}
	}
	if victim < 0 {
		t.Fatal("no follower")
	}
	r := dialRaw(t, servers[victim].Addr())
	if err := r.NewSession(40000); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, r, "/kept", openACL, jute.ModeEphemeral)

	fabric.Isolate(names[victim], names)
	if !testkit.Until(10*time.Second, func() bool { return !servers[victim].Serving() }) {
		t.Fatal("the cut-off server still serves")
	}
	// Five ticks not serving: a connection with a minimal session would have been closed.
	time.Sleep(5 * 200 * time.Millisecond)
	fabric.Heal()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := servers[victim].WaitServing(ctx); err != nil {
		t.Fatal(err)
	}
	var eph jute.GetEphemeralsResponse
	if _, err := r.Do(jute.OpGetEphemerals, &jute.GetEphemeralsRequest{}, &eph); err != nil {
		t.Fatalf("the client of the server that rejoined: %v", err)
	}
	if len(eph.Ephemerals) != 1 {
		t.Errorf("ephemerals = %v; want [/kept]", eph.Ephemerals)
	}
}
