package consensus

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/zkd-io/zkd/jute"
)

// A node shut down with work in flight leaves no goroutine behind. In a synctest bubble every
// goroutine the test started must have ended when the bubble does, so one parked on a future
// that raft never answers fails the test.
func TestShutdownInFlightLeavesNoGoroutine(t *testing.T) {
	for i := range 10 {
		t.Run(fmt.Sprintf("proposals-%d", i), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newBubbleCluster(t, 1, true, nil)
				n := c.leader()
				var wg sync.WaitGroup
				for j := range 64 {
					wg.Go(func() {
						_, _ = n.Propose(context.Background(), createReq(fmt.Sprintf("/p%d", j), nil, jute.ModePersistent))
					})
				}
				c.stop(n.ID())
				wg.Wait()
			})
		})
		t.Run(fmt.Sprintf("cluster-%d", i), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newBubbleCluster(t, 3, true, nil)
				l := c.leader()
				var wg sync.WaitGroup
				for _, n := range c.running() {
					for j := range 16 {
						wg.Go(func() {
							_, _ = n.Propose(context.Background(), createReq(fmt.Sprintf("/%s-%d", n.ID(), j), nil, jute.ModePersistent))
						})
						wg.Go(func() { _ = n.Sync(context.Background()) })
					}
				}
				c.net().Isolate(l.ID(), c.ids)
				c.stop(l.ID())
				c.shutdown()
				wg.Wait()
			})
		})
		t.Run(fmt.Sprintf("forwarded-%d", i), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newBubbleCluster(t, 3, true, nil)
				l := c.leader()
				var wg sync.WaitGroup
				for _, n := range c.followers() {
					for j := range 32 {
						wg.Go(func() {
							_, _ = n.Propose(context.Background(), createReq(fmt.Sprintf("/%s-%d", n.ID(), j), nil, jute.ModePersistent))
						})
					}
				}
				c.stop(l.ID())
				c.shutdown()
				wg.Wait()
			})
		})
	}
}
