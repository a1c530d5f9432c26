package server_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a server starts must be gone once it is shut down, but one (see below).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// go-zookeeper closes its connection asynchronously after Close returns.
		goleak.IgnoreTopFunction("github.com/go-zookeeper/zk.(*Conn).loop"),
		goleak.IgnoreTopFunction("github.com/go-zookeeper/zk.(*Conn).sendLoop"),
		goleak.IgnoreTopFunction("github.com/go-zookeeper/zk.(*Conn).recvLoop"),
		// A hashicorp/raft future still queued when raft shuts down is never answered; the
		// goroutine consensus parks on it (Node.waitFuture) outlives the node. The consensus
		// package's TestMain makes the same exception.
		goleak.IgnoreTopFunction("github.com/zkd-io/zkd/internal/third_party/raft.(*deferError).Error"),
	)
}
