package memtrim

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sink keeps allocations reachable until the test drops them.
var sink [][]byte

// fastPolicy is Defaults on a 20ms clock.
func fastPolicy() Policy {
	p := Defaults()
	p.Interval = 20 * time.Millisecond
	p.IdleRate = 8 << 20 // bytes per second: the test runtime itself allocates a little
	return p
}

type trims struct {
	mu   sync.Mutex
	list [][2]uint64
}

func (t *trims) add(before, after uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.list = append(t.list, [2]uint64{before, after})
}

func (t *trims) get() [][2]uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([][2]uint64(nil), t.list...)
}

func start(t *testing.T, p Policy, tr *trims) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); Run(ctx, p, tr.add) }()
	t.Cleanup(func() { cancel(); <-done })
}

// burst keeps 64 MB live and churns 256 MB of garbage through the heap, as a bulk load does: the
// runtime then holds about twice the live heap.
func burst(t *testing.T) {
	t.Helper()
	sink = nil
	for range 64 {
		sink = append(sink, make([]byte, 1<<20))
	}
	t.Cleanup(func() { sink = nil })
	var g []byte
	for range 256 {
		g = make([]byte, 1<<20)
		g[0] = 1
	}
	_ = g
}

// TestTrimsAfterBurst expects one trim after a burst that returns the heap to about its live
// size, and no second trim while nothing new is allocated.
func TestTrimsAfterBurst(t *testing.T) {
	var tr trims
	start(t, fastPolicy(), &tr)
	burst(t)
	deadline := time.Now().Add(5 * time.Second)
	for len(tr.get()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no trim within 5s of a burst")
		}
		time.Sleep(10 * time.Millisecond)
	}
	got := tr.get()[0]
	t.Logf("trim: %d -> %d MB", got[0]>>20, got[1]>>20)
	if got[0] < got[1]+32<<20 || got[1] > 80<<20 {
		t.Errorf("trim took the heap from %d to %d MB; want at least 32 MB less and at most 80 MB (64 live)", got[0]>>20, got[1]>>20)
	}
	time.Sleep(300 * time.Millisecond)
	if n := len(tr.get()); n != 1 {
		t.Errorf("%d trims without new allocation; want 1", n)
	}
}

// TestNoTrimWhileBusy keeps allocating above the idle rate and expects no trim.
func TestNoTrimWhileBusy(t *testing.T) {
	var tr trims
	start(t, fastPolicy(), &tr)
	burst(t)
	end := time.Now().Add(500 * time.Millisecond)
	var keep []byte
	for time.Now().Before(end) {
		keep = make([]byte, 1<<20) // about 1 GB/s, far above the idle rate
		keep[0] = 1
		time.Sleep(time.Millisecond)
	}
	_ = keep
	if n := len(tr.get()); n != 0 {
		t.Errorf("%d trims while allocating; want none", n)
	}
}
