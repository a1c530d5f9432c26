package server_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a server starts must be gone once it is shut down.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// go-zookeeper closes its connection asynchronously after Close returns.
		goleak.IgnoreTopFunction("github.com/go-zookeeper/zk.(*Conn).loop"),
		goleak.IgnoreTopFunction("github.com/go-zookeeper/zk.(*Conn).sendLoop"),
		goleak.IgnoreTopFunction("github.com/go-zookeeper/zk.(*Conn).recvLoop"),
	)
}
