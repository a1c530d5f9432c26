package recipes

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkMutexHandoff measures lock handoffs per second and the mean acquire latency (from the
// Lock call to the grant, queueing included) with 1, 8 and 64 contenders spread over up to 8
// sessions. Run it against real ZooKeeper (the default) or any server with RECIPES_ZK_ADDR:
//
//	go test -run '^$' -bench MutexHandoff -benchtime 200x ./recipes/
func BenchmarkMutexHandoff(b *testing.B) {
	for _, n := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("contenders=%d", n), func(b *testing.B) {
			sessions := make([]*Session, min(n, 8))
			for i := range sessions {
				sessions[i] = newTestSession(b, nil)
			}
			p := testPath(b)
			ctx := testCtx(b, 10*time.Minute)
			if err := ensurePath(ctx, sessions[0], p); err != nil {
				b.Fatal(err)
			}
			var next, latency atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for i := range n {
				m := NewMutex(sessions[i%len(sessions)], p)
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						t0 := time.Now()
						l, err := m.Lock(ctx)
						if err != nil {
							b.Error(err)
							return
						}
						latency.Add(int64(time.Since(t0)))
						if err := l.Unlock(context.WithoutCancel(ctx)); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "handoffs/s")
			b.ReportMetric(float64(latency.Load())/float64(b.N)/1e6, "ms/acquire")
		})
	}
}
