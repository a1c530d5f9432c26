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
	lg := newLedger(t, newTestSession(t, nil), p+"-ledger")
	// Each entry into the critical section sets off the next fault, so the faults fall while
	// the contenders work, however fast or slow the machine.
	progress := make(chan struct{}, 1)
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
					select {
					case progress <- struct{}{}:
					default:
					}
					// The critical section's work: a check-and-set on the server, across two
					// round trips that the chaos may break, so an overlap would show.
					err = lg.advance(ctx, s, l.Token().Path)
					chk.leave()
					if err != nil {
						t.Error(err)
						_ = l.Unlock(ctx)
						return
					}
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
	injected := 0
	chaos.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-progress:
			}
			injected++
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
	t.Logf("%d faults injected", injected)
	chk.verify(t, sessions*goroutines*rounds)
	s := newTestSession(t, nil)
	lg.verify(t, s, sessions*goroutines*rounds)
	testkit.Eventually(t, 10*time.Second, "no nodes left", func() bool { return len(children(t, s, p)) == 0 })
}
