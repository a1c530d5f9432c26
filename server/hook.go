package server

import (
	"errors"

	"github.com/zkd-io/zkd/internal/serverhook"
)

// What server/zkdtest reaches through internal/serverhook.
func init() {
	serverhook.StartWithoutRaft = func(cfg any) (any, error) {
		s, err := startWithoutRaft(cfg.(Config))
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	serverhook.DropClients = func(srv any) { srv.(*Server).dropClients(closeDropped, "requested") }
}

// startWithoutRaft starts a server on consensus.Memory (serverhook.StartWithoutRaft).
func startWithoutRaft(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Dir != "" || len(cfg.Peers) > 0 || cfg.Join || cfg.PeerTLS != nil {
		return nil, errors.New("server: a server without Raft takes no Dir, Peers, Join or PeerTLS")
	}
	return start(cfg.withDefaults(), openMemory)
}
