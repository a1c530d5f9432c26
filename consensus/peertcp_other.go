//go:build !linux

package consensus

import "net"

// tunePeerConn does nothing where the peer socket options are Linux's own.
func tunePeerConn(net.Conn) {}
