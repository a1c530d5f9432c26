package zkfile

import (
	"fmt"
	"slices"
	"strings"

	"github.com/zkd-io/zkd/znode"
)

// SessionPassword is the password ZooKeeper gives session id. ZooKeeper keeps no passwords: it
// derives each from the id, as the first 16 bytes of java.util.Random seeded with the id xor a
// fixed constant, and checks a reconnecting client's password against that. zkd keeps the same
// password for an imported session, so its clients reattach after the move.
func SessionPassword(id int64) []byte {
	const (
		secret     = 0xB3415C00
		multiplier = 0x5DEECE66D
		mask       = 1<<48 - 1
	)
	// java.util.Random: a 48-bit linear congruential generator, as its documentation specifies.
	seed := (uint64(id^secret) ^ multiplier) & mask
	next32 := func() uint32 {
		seed = (seed*multiplier + 0xB) & mask
		return uint32(seed >> 16)
	}
	p := make([]byte, 16)
	for i := 0; i < len(p); {
		r := next32()
		for n := min(len(p)-i, 4); n > 0; n-- {
			p[i] = byte(r)
			r >>= 8
			i++
		}
	}
	return p
}

// child is a node with its name, as its parent keeps it.
type child struct {
	name string
	n    *Node
}

// Tree builds a zkd tree of the state at its zxid: every node with its persisted stat, ACL and
// kind, and every session with its timeout and ZooKeeper's password for it. It walks the state
// from the root down its nodes' links to their children, each node's children in name order,
// straight into znode.ImportWalk.
func (s *State) Tree() (*znode.Tree, error) {
	sessions := make([]znode.Session, 0, len(s.Sessions))
	for id, to := range s.Sessions {
		sessions = append(sessions, znode.Session{ID: id, Timeout: to, Passwd: SessionPassword(id)})
	}
	return znode.ImportWalk(s.Zxid, sessions, int64(len(s.Nodes)), func(emit func(*znode.RawNode, int) error) error {
		var raw znode.RawNode
		var visit func(n *Node) error
		visit = func(n *Node) error {
			session, container, ttl := Owner(n.Stat.EphemeralOwner)
			path := n.path
			if path == "" {
				path = "/"
			}
			raw = znode.RawNode{
				Path: path, Data: n.Data, ACL: n.ACL,
				Czxid: n.Stat.Czxid, Mzxid: n.Stat.Mzxid, Pzxid: n.Stat.Pzxid,
				Ctime: n.Stat.Ctime, Mtime: n.Stat.Mtime,
				Version: n.Stat.Version, Cversion: n.Stat.Cversion, Aversion: n.Stat.Aversion,
				Ephemeral: session, Container: container, TTL: ttl,
			}
			if err := emit(&raw, len(n.Children)); err != nil {
				return err
			}
			// The children in name order, sorted by the names their parent keeps.
			kids := make([]child, 0, len(n.Children))
			for name, c := range n.Children {
				kids = append(kids, child{name, c})
			}
			slices.SortFunc(kids, func(a, b child) int { return strings.Compare(a.name, b.name) })
			for _, c := range kids {
				if err := visit(c.n); err != nil {
					return err
				}
			}
			return nil
		}
		root := s.Nodes["/"]
		if root == nil {
			return fmt.Errorf("zkfile: the state has no root")
		}
		return visit(root)
	})
}
