package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
)

// Cluster is an N-server zkd cluster running in this process, each server with its own client
// and peer listener on loopback. It is for tests and embedding; production clusters run one zkd
// process per machine.
type Cluster struct {
	// Servers are the members, in ServerID order (ids 1..N).
	Servers []*Server
}

// StartCluster starts n servers that form one cluster. cfg is the template for every member:
// its Addr, Listener, PeerAddr, PeerListener, ServerID, Peers and AdminListener are chosen per
// member (loopback, free ports; with a non-empty AdminAddr, every member gets an admin server on
// a free loopback port); a non-empty Dir gets one subdirectory per member ("1", "2", ...).
// It returns once every member is started; the cluster elects a leader on its own (Wait for
// Serving if a test needs it).
func StartCluster(cfg Config, n int) (*Cluster, error) {
	if n < 1 {
		return nil, errors.New("server: cluster needs at least one server")
	}
	peerLns := make([]net.Listener, n)
	clientLns := make([]net.Listener, n)
	closeAll := func() {
		for i := range n {
			if peerLns[i] != nil {
				_ = peerLns[i].Close()
			}
			if clientLns[i] != nil {
				_ = clientLns[i].Close()
			}
		}
	}
	peers := make([]Peer, n)
	for i := range n {
		var err error
		if peerLns[i], err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			closeAll()
			return nil, fmt.Errorf("server: cluster peer listener: %w", err)
		}
		if clientLns[i], err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			closeAll()
			return nil, fmt.Errorf("server: cluster client listener: %w", err)
		}
		peers[i] = Peer{ID: int64(i + 1), PeerAddr: peerLns[i].Addr().String(), ClientAddr: clientLns[i].Addr().String()}
	}
	if n == 1 {
		peers = nil
	}
	cl := &Cluster{}
	for i := range n {
		mc := cfg
		mc.ServerID = int64(i + 1)
		mc.Peers = peers
		mc.Listener = clientLns[i]
		mc.PeerListener = peerLns[i]
		mc.Addr, mc.PeerAddr, mc.AdminAddr, mc.AdminListener = "", "", "", nil
		if cfg.AdminAddr != "" {
			mc.AdminAddr = "127.0.0.1:0" // an admin server on each member
		}
		if cfg.Dir != "" {
			mc.Dir = filepath.Join(cfg.Dir, strconv.Itoa(i+1))
		}
		if mc.Logger != nil {
			mc.Logger = mc.Logger.With("server", i+1)
		}
		s, err := Start(mc)
		if err != nil {
			_ = cl.Close()
			for j := i; j < n; j++ {
				_ = peerLns[j].Close()
				_ = clientLns[j].Close()
			}
			return nil, err
		}
		cl.Servers = append(cl.Servers, s)
	}
	return cl, nil
}

// Addrs returns the members' client addresses.
func (cl *Cluster) Addrs() []string {
	out := make([]string, len(cl.Servers))
	for i, s := range cl.Servers {
		out[i] = s.Addr()
	}
	return out
}

// Leader returns the member that is the Raft leader, or nil if none is established.
func (cl *Cluster) Leader() *Server {
	for _, s := range cl.Servers {
		if s != nil && s.cons.IsLeader() {
			return s
		}
	}
	return nil
}

// Shutdown stops every member, as Server.Shutdown does.
func (cl *Cluster) Shutdown(ctx context.Context) error {
	var errs []error
	for _, s := range cl.Servers {
		if s != nil {
			errs = append(errs, s.Shutdown(ctx))
		}
	}
	return errors.Join(errs...)
}

// Close stops every member at once.
func (cl *Cluster) Close() error {
	var errs []error
	for _, s := range cl.Servers {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	return errors.Join(errs...)
}
