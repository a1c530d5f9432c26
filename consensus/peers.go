package consensus

import (
	"context"
	"net"
	"time"

	"github.com/zkd-io/zkd/internal/peernet"
)

// memberAddrs returns the peer addresses of the members in the latest Raft configuration and of
// Config.Peers (a member-to-be has no configuration until the leader reaches it).
func (n *Node) memberAddrs() []string {
	var addrs []string
	for _, p := range n.cfg.Peers {
		addrs = append(addrs, p.Addr)
	}
	if r := n.raft; r != nil {
		if f := r.GetConfiguration(); f.Error() == nil {
			for _, s := range f.Configuration().Servers {
				addrs = append(addrs, string(s.Address))
			}
		}
	}
	return addrs
}

// dialPeer dials a peer's port, with TLS unless configured otherwise, and sends the connection
// type. An error means nothing of the connection's protocol was sent.
func (n *Node) dialPeer(ctx context.Context, addr string, kind byte) (net.Conn, error) {
	c, err := n.cfg.Network.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	peernet.Tune(c)
	if n.tls != nil && !n.tls.DialPlaintext() {
		tc, err := n.tls.Dial(ctx, c, addr)
		if err != nil {
			c.Close()
			return nil, err
		}
		c = tc
	}
	_ = c.SetWriteDeadline(time.Now().Add(peernet.HandshakeTimeout))
	if _, err := c.Write([]byte{kind}); err != nil {
		c.Close()
		return nil, err
	}
	_ = c.SetWriteDeadline(time.Time{})
	return c, nil
}
