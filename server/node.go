package server

import (
	"fmt"
	"strconv"

	"github.com/zkd-io/zkd/consensus"
)

// openMemory starts the in-memory twin of the consensus node for s (hook.StartWithoutRaft).
func openMemory(s *Server) (backend, error) {
	return consensus.NewMemory(consensus.MemoryConfig{
		TickTime: s.cfg.TickTime, Logger: s.log,
		OnApply: s.onApply, OnRestore: s.onRestore,
	}), nil
}

// openConsensus starts the consensus node for s (a standalone server is a one-voter cluster),
// wired to the server's apply, restore and serving hooks.
func openConsensus(s *Server) (backend, error) {
	cfg := s.cfg
	cc := cfg.Consensus
	cc.ID = strconv.FormatInt(cfg.ServerID, 10)
	cc.Dir = cfg.Dir
	cc.Listener = cfg.PeerListener
	cc.Addr = cfg.PeerAddr
	if cc.Addr == "" {
		for _, p := range cfg.Peers {
			if p.ID == cfg.ServerID {
				cc.Addr = p.PeerAddr
			}
		}
	}
	cc.Peers = nil
	for _, p := range cfg.Peers {
		cc.Peers = append(cc.Peers, consensus.Peer{ID: strconv.FormatInt(p.ID, 10), Addr: p.PeerAddr})
	}
	cc.NoBootstrap = cfg.Join
	cc.TLS = cfg.PeerTLS
	cc.Logger = s.log
	cc.TickTime = cfg.TickTime
	cc.OnApply, cc.OnRestore, cc.OnServing = s.onApply, s.onRestore, s.servingChanged
	n, err := consensus.New(cc)
	if err != nil {
		return nil, fmt.Errorf("server: start consensus: %w", err)
	}
	return n, nil
}
