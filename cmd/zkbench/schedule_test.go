package main

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestScheduleDueTimes(t *testing.T) {
	start := time.Unix(1000, 0)
	s := schedule{start: start, rate: 3} // 333.33 ms apart: not a whole number of nanoseconds
	for i := int64(0); i < 3000; i++ {
		want := start.Add(time.Duration(float64(i) * 1e9 / 3))
		if got := s.due(i); !got.Equal(want) {
			t.Fatalf("due(%d) = %v, want %v", i, got, want)
		}
	}
	// After a long run the schedule has not drifted: op 3·3600 is due exactly one hour in.
	if got := s.due(3 * 3600); !got.Equal(start.Add(time.Hour)) {
		t.Fatalf("due(10800) = %v, want start+1h", got)
	}
}

// TestOpenLoopKeepsScheduleWhenServerStalls checks the absence of coordinated omission: with one
// op allowed in flight and each op taking five times the send interval, the intended times stay
// on the fixed schedule, so the measured latency (completion minus intended time) grows with the
// backlog instead of staying at the service time. It runs in a synctest bubble: the loop's timers
// and the slow server run on the bubble's fake clock, so the latencies are exact.
func TestOpenLoopKeepsScheduleWhenServerStalls(t *testing.T) {
	synctest.Test(t, testOpenLoopKeepsScheduleWhenServerStalls)
}

func testOpenLoopKeepsScheduleWhenServerStalls(t *testing.T) {
	const (
		rate    = 1000 // one op per millisecond
		ops     = 100
		service = 5 * time.Millisecond
	)
	s := schedule{start: time.Now(), rate: rate}
	var mu sync.Mutex
	intended := make([]time.Time, 0, ops)
	var latencies []time.Duration
	var wg sync.WaitGroup
	n := openLoop(context.Background(), s, ops, 1, func(i int64, due time.Time, finish func()) {
		mu.Lock()
		intended = append(intended, due)
		mu.Unlock()
		wg.Go(func() {
			defer finish()
			time.Sleep(service) // the bubble's fake clock (synctest): a slow server, no real time passes
			mu.Lock()
			latencies = append(latencies, time.Since(due))
			mu.Unlock()
		})
	})
	wg.Wait()
	if n != ops || len(intended) != ops {
		t.Fatalf("launched %d (%d recorded), want %d", n, len(intended), ops)
	}
	for i, due := range intended {
		if want := s.due(int64(i)); !due.Equal(want) {
			t.Fatalf("op %d intended at %v, want %v", i, due.Sub(s.start), want.Sub(s.start))
		}
	}
	// Op i starts when op i-1 is done, at i·5 ms, and is done at (i+1)·5 ms: the last op, due at
	// 99 ms, has a latency of 500-99 ms, the backlog, although the server took only 5 ms for it.
	last := latencies[len(latencies)-1]
	if want := time.Duration(ops)*service - time.Duration(ops-1)*time.Millisecond; last != want {
		t.Fatalf("last latency %v, want %v (the backlog)", last, want)
	}
}

func TestOpenLoopStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	s := schedule{start: time.Now(), rate: 1000}
	var launched int64
	n := openLoop(ctx, s, 0, 100, func(i int64, _ time.Time, finish func()) { launched++; finish() })
	if n != launched || n == 0 {
		t.Fatalf("openLoop returned %d, launched %d", n, launched)
	}
	// Rate 1000/s for about 50 ms: far fewer than an unbounded loop would launch.
	if n > 200 {
		t.Fatalf("launched %d ops in 50 ms at 1000/s", n)
	}
}

// A loop far behind its schedule (every op already due) launches nothing once its run has ended,
// however many ops are due: the smoke run's open loop overshot its 500 ms when a stall ran past
// the deadline and the loop then picked the free slot over the ended context.
func TestOpenLoopBehindScheduleStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 20 {
		s := schedule{start: time.Now().Add(-time.Second), rate: 1000}
		var launched int64
		n := openLoop(ctx, s, 0, 100, func(i int64, _ time.Time, finish func()) { launched++; finish() })
		if n != 0 || launched != 0 {
			t.Fatalf("openLoop after its context ended returned %d, launched %d", n, launched)
		}
	}
}
