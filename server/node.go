package server

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/zkd-io/zkd/consensus"
	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/znode"
)

// nodeBackend binds the server to a consensus.Node: a standalone server is a one-voter cluster.
type nodeBackend struct {
	n *consensus.Node
}

var _ backend = nodeBackend{}

func (b nodeBackend) View() *znode.View { return b.n.View() }

func (b nodeBackend) Start(ctx context.Context, w write) (pendingWrite, error) {
	var body []byte
	if w.req != nil {
		body = jute.Marshal(nil, w.req)
	}
	p, err := b.n.Start(ctx, consensus.Proposal{Session: w.session, Attach: w.attach, Seq: w.seq, Auth: w.auth, Op: w.op, Body: body})
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (b nodeBackend) CreateSession(ctx context.Context, timeout int32) (znode.Session, uint64, error) {
	return b.n.CreateSession(ctx, timeout)
}

func (b nodeBackend) ValidateSession(ctx context.Context, id int64, _ int32) (uint64, error) {
	ok, attach, err := b.n.ValidateSession(ctx, id)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, errSessionGone
	}
	return attach, nil
}

func (b nodeBackend) Touch(id int64) {
	if id != 0 {
		b.n.Touch(id)
	}
}

func (b nodeBackend) Sync(ctx context.Context) error { return b.n.Sync(ctx) }
func (b nodeBackend) Serving() bool                  { return b.n.Serving() }
func (b nodeBackend) Leader() bool                   { return b.n.IsLeader() }

// openConsensus starts the consensus node for s, wired to the server's apply, restore and
// serving hooks.
func openConsensus(s *Server) (backend, func() error, error) {
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
	cc.Logger = s.log
	cc.TickTime = cfg.TickTime
	var node atomic.Pointer[consensus.Node]
	cc.OnApply = func(zxid int64, r *znode.Result) {
		var view func() *znode.View
		if n := node.Load(); n != nil {
			view = n.View
		}
		s.onApply(zxid, r, view)
	}
	cc.OnRestore = func(int64) {
		if n := node.Load(); n != nil {
			s.onRestore(n.View())
		}
	}
	cc.OnServing = func(serving bool) { s.servingChanged(serving) }
	n, err := consensus.New(cc)
	if err != nil {
		return nil, nil, fmt.Errorf("server: start consensus: %w", err)
	}
	node.Store(n)
	s.node = n
	return nodeBackend{n: n}, n.Shutdown, nil
}

// isBadRequest reports whether consensus refused a proposal as malformed (nothing was proposed).
func isBadRequest(err error) bool { return errors.Is(err, consensus.ErrBadRequest) }
