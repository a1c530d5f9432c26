// Package sockwrite writes to a socket without waiting: a goroutine that must never block on a
// slow peer (a connection's executor, the consensus FSM) writes what the socket takes at once
// and leaves the rest to a writer goroutine that may wait.
//
// RawConn returns the socket under a net.Conn when it is a plain socket; a TLS connection or any
// other wrapper has none, and all its writes go through the waiting writer.
package sockwrite
