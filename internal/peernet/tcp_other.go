//go:build !linux

package peernet

import "net"

// Tune does nothing where the peer socket options are Linux's own.
func Tune(net.Conn) {}
