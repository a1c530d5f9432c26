package gctune

import (
	"context"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const mb = 1 << 20
	for _, c := range []struct {
		live, floor uint64
		base, want  int
	}{
		{live: 4 * mb, floor: 64 * mb, base: 100, want: 1500}, // goal 4·16 = 64 MB
		{live: 32 * mb, floor: 64 * mb, base: 100, want: 100}, // goal 64 MB at the base already
		{live: 300 * mb, floor: 64 * mb, base: 100, want: 100},
		{live: 0, floor: 64 * mb, base: 100, want: maxPercent},
		{live: 10 * mb, floor: 64 * mb, base: 800, want: 800}, // never below base
	} {
		got := Percent(c.live, c.floor, c.base)
		if got != c.want {
			t.Errorf("Percent(%d MB, %d MB, %d) = %d; want %d", c.live/mb, c.floor/mb, c.base, got, c.want)
		}
		if goal := c.live + c.live*uint64(got)/100; c.live > 0 && got < maxPercent && goal < c.floor {
			t.Errorf("Percent(%d MB, ...) = %d leaves the goal at %d MB, under the floor", c.live/mb, got, goal/mb)
		}
	}
}

// TestRunRaisesAndRestores runs the tuner on this test process, whose live heap is far below a
// 1 GiB floor: GOGC goes up, and comes back to the base when the context ends.
func TestRunRaisesAndRestores(t *testing.T) {
	base := debug.SetGCPercent(100)
	defer debug.SetGCPercent(base)
	runtime.GC() // a live-heap reading exists
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { Run(ctx, 1<<30, 100, 10*time.Millisecond) })
	deadline := time.Now().Add(5 * time.Second)
	for {
		p := debug.SetGCPercent(-1)
		debug.SetGCPercent(p)
		if p > 100 {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			wg.Wait()
			t.Fatalf("GOGC stayed at %d under a 1 GiB floor", p)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	if p := debug.SetGCPercent(100); p != 100 {
		t.Fatalf("GOGC after Run = %d; want the base 100", p)
	}
}
