package recipes

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/zkd-io/zkd/internal/testkit"
)

// TestMutexExclusionUnderConnectionChaos contends while connections keep breaking and create and
// delete replies get lost. The breaks are shorter than the session timeout, so sessions survive
// and exclusion must hold strictly, with strictly increasing tokens and no node left behind.
func TestMutexExclusionUnderConnectionChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test skipped in -short mode")
	}
	const sessions, goroutines, rounds = 3, 2, 5
	p := testPath(t)
	ctx := testCtx(t, 90*time.Second)
	fs := make([]*faults, sessions)
	var chk exclusionChecker
	var wg sync.WaitGroup
	for i := range sessions {
		fs[i] = &faults{}
		s := newTestSession(t, fs[i])
		m := NewMutex(s, p)
		for range goroutines {
			wg.Go(func() {
				for range rounds {
					l, err := m.Lock(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					chk.enter(l.Token())
					time.Sleep(2 * time.Millisecond) // hold the critical section a while, so an overlap would show
					chk.leave()
					if err := l.Unlock(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
	}
	stop := make(chan struct{})
	var chaos sync.WaitGroup
	chaos.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			f := fs[rand.IntN(len(fs))]
			switch rand.IntN(3) {
			case 0:
				f.breakConnections()
			case 1:
				f.dropNextReply(opCreate)
			case 2:
				f.dropNextReply(opDelete)
			}
		}
	})
	wg.Wait()
	close(stop)
	chaos.Wait()
	chk.verify(t, sessions*goroutines*rounds)
	s := newTestSession(t, nil)
	testkit.Eventually(t, 10*time.Second, "no nodes left", func() bool { return len(children(t, s, p)) == 0 })
}
