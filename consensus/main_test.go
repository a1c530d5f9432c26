package consensus

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine running. The one exception is a
// goroutine parked on a hashicorp/raft future that a shut-down raft never answers (see
// Node.waitFuture).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/zkd-io/zkd/internal/third_party/raft.(*deferError).Error"))
}
