package runtimepolicy

import (
	"context"
	"os"
	"runtime/debug"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const mb = 1 << 20

// step is what happens between two samples: time passes and bytes are allocated.
type step struct {
	elapsed time.Duration
	alloc   uint64
}

// idle is a sample interval of the default policy with nothing allocated.
var idle = step{250 * time.Millisecond, 0}

// scriptedHeap is a heap whose every sample follows a script, so that the policy is tested
// without the clock or the machine's load in the loop. It holds live bytes that never change;
// what is allocated becomes garbage until a trim collects it and returns every free page.
type scriptedHeap struct {
	script  []step
	now     time.Time
	allocs  uint64
	live    uint64
	garbage uint64
	free    uint64
	hold    bool // the next read takes no step
	trims   int
}

// newScriptedHeap returns a heap of 64 MB live that will follow script.
func newScriptedHeap(script []step) *scriptedHeap {
	return &scriptedHeap{script: script, now: time.Unix(1000, 0), live: 64 * mb, hold: true}
}

// read takes the next step of the script, except for the first read (the trimmer's starting
// point), right after a trim (the trimmer reads the heap again at once) and when the script is
// over (nothing happens any more).
func (h *scriptedHeap) read() sample {
	if !h.hold && len(h.script) > 0 {
		s := h.script[0]
		h.script = h.script[1:]
		h.now = h.now.Add(s.elapsed)
		h.allocs += s.alloc
		h.garbage += s.alloc
	}
	h.hold = false
	return sample{at: h.now, allocs: h.allocs, objects: h.live + h.garbage, free: h.free}
}

func (h *scriptedHeap) trim() {
	h.free, h.garbage = 0, 0
	h.hold = true
	h.trims++
}

// repeat returns n copies of s.
func repeat(n int, s step) []step { return slices.Repeat([]step{s}, n) }

func concat(parts ...[]step) []step {
	var out []step
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// TestPolicy runs the default policy over scripted heaps and checks after which samples it
// trims.
func TestPolicy(t *testing.T) {
	burst := step{250 * time.Millisecond, 320 * mb} // a bulk load: far above the idle rate
	for _, tc := range []struct {
		name   string
		before uint64 // allocated before the trimmer starts
		script []step
		want   []int // the samples (1-based) after which a trim happens
	}{
		{"a burst, then idle: one trim after three idle samples", 0, concat([]step{burst}, repeat(30, idle)), []int{4}},
		// A restart restores and replays before the trimmer starts.
		{"allocated before the start, then idle: one trim after three idle samples", 400 * mb, repeat(30, idle), []int{3}},
		{"little allocated before the start: no trim", 32 * mb, repeat(30, idle), nil},
		{"busy throughout: no trim", 0, repeat(40, step{250 * time.Millisecond, 64 * mb}), nil},
		{"never idle enough: two idle samples between busy ones", 0, concat([]step{burst}, slices.Repeat(concat(repeat(2, idle), []step{burst}), 10)), nil},
		{"a busy sample restarts the idle count", 0,
			concat([]step{burst}, repeat(2, idle), []step{{250 * time.Millisecond, 10 * mb}}, repeat(5, idle)), []int{7}},
		{"little allocated since the start: no trim", 0, repeat(100, step{250 * time.Millisecond, 100 << 10}), nil},
		// Below the idle rate (200 KiB per 250 ms is 800 KiB/s) but adding up to Rearm.
		{"a slow trickle rearms too", 0, repeat(400, step{250 * time.Millisecond, 200 << 10}), []int{328}},
		{"no second trim without new allocation; one after a second burst", 0,
			concat([]step{burst}, repeat(10, idle), []step{{250 * time.Millisecond, 10 * mb}}, repeat(10, idle), []step{burst}, repeat(5, idle)),
			[]int{4, 26}},
		// On a loaded machine ticks arrive late: 1.5 MB allocated over 2 s is 750 KB/s, idle,
		// though it would be 6 MB/s over the nominal 250 ms.
		{"late samples: the rate is taken over the time that really passed", 0,
			concat([]step{burst}, repeat(5, step{2 * time.Second, 1500_000})), []int{4}},
		{"a late busy sample is still busy", 0, concat([]step{burst}, repeat(5, step{2 * time.Second, 4 * mb})), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newScriptedHeap(tc.script)
			h.allocs, h.garbage = tc.before, tc.before
			tr := newTrimmer(trimDefaults(), h)
			var got []int
			for i := range len(tc.script) {
				before := h.live + h.garbage + h.free
				trimmed, b, a := tr.sample()
				if !trimmed {
					continue
				}
				got = append(got, i+1)
				// The trim reports what was held at the sample that decided it and after it.
				if want := before + tc.script[i].alloc; b != want || a != h.live {
					t.Errorf("trim after sample %d reported %d -> %d; want %d -> %d", i+1, b, a, want, h.live)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("trims after samples %v; want %v", got, tc.want)
			}
			if h.trims != len(got) {
				t.Errorf("heap trimmed %d times, trimmer reported %d", h.trims, len(got))
			}
		})
	}
}

// TestRunTrimsOnTicks drives Run's loop with its own ticks over a scripted heap: the trim comes on
// the fourth tick and is reported to onTrim, and the loop ends with its context.
func TestRunTrimsOnTicks(t *testing.T) {
	h := newScriptedHeap(concat([]step{{250 * time.Millisecond, 320 * mb}}, repeat(20, idle)))
	ctx, cancel := context.WithCancel(context.Background())
	tick := make(chan time.Time) // unbuffered: a send returns once the loop took the tick
	type trim struct{ before, after uint64 }
	trims := make(chan trim, 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx, trimDefaults(), tick, h, func(b, a uint64) { trims <- trim{b, a} })
	}()
	for range 10 {
		tick <- time.Time{}
	}
	cancel()
	<-done // the loop has handled every tick it took, and returned
	if len(trims) != 1 {
		t.Fatalf("%d trims over 10 ticks; want 1", len(trims))
	}
	if got := <-trims; got.before != 384*mb || got.after != 64*mb {
		t.Errorf("onTrim(%d MB, %d MB); want (384 MB, 64 MB)", got.before/mb, got.after/mb)
	}
}

// TestRunStops checks that Run returns once its context ends, with the GC percent it found back
// in force (goleak checks the rest).
func TestRunStops(t *testing.T) {
	if _, set := os.LookupEnv("GOGC"); set {
		t.Skip("GOGC is set: Run leaves the collector alone")
	}
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); Run(ctx, nil) }()
	cancel()
	<-done
	if pc := debug.SetGCPercent(100); pc != 100 {
		t.Fatalf("GC percent %d after Run stopped; want 100 restored", pc)
	}
}

// sink keeps allocations reachable until the test drops them.
var sink [][]byte

// burst keeps 64 MB live and churns 256 MB of garbage through the heap, as a bulk load does: the
// runtime then holds about twice the live heap.
func burst(t *testing.T) {
	t.Helper()
	sink = nil
	for range 64 {
		sink = append(sink, make([]byte, mb))
	}
	t.Cleanup(func() { sink = nil })
	var g []byte
	for range 256 {
		g = make([]byte, mb)
		g[0] = 1
	}
	_ = g
}

// fakeClock is a clock that moves only when the test says so.
type fakeClock struct{ now time.Time }

func newFakeClock() *fakeClock               { return &fakeClock{now: time.Unix(1000, 0)} }
func (c *fakeClock) Now() time.Time          { return c.now }
func (c *fakeClock) advance(d time.Duration) { c.now = c.now.Add(d) }

// runtimeHeapAt is the runtime's real heap, its samples timed by c.
func runtimeHeapAt(c *fakeClock) *runtimeHeap {
	h := newRuntimeHeap()
	h.now = c.Now
	return h
}

// TestTrimsRealHeap runs the policy on the Go runtime's real heap with a fake clock: after a real
// burst and three idle samples it must run a real trim, which must give back the garbage and keep
// the live 64 MB. Samples are taken in the test's own goroutine with 250 ms of fake time between
// them, so neither the scheduler nor the machine's load can change what the policy sees: the
// only allocation between samples is the runtime's own (far below 1 MB per 250 ms).
func TestTrimsRealHeap(t *testing.T) {
	clock := newFakeClock()
	tr := newTrimmer(trimDefaults(), runtimeHeapAt(clock))
	burst(t)
	for i := 1; i <= 10; i++ {
		clock.advance(250 * time.Millisecond)
		trimmed, before, after := tr.sample()
		switch {
		case i == 1 && trimmed:
			t.Fatal("trimmed on the sample that saw the burst")
		case i < 4 && trimmed:
			t.Fatalf("trimmed after %d idle samples; want 3", i-1)
		case i == 4 && !trimmed:
			t.Fatal("no trim after three idle samples following a burst")
		case i > 4 && trimmed:
			t.Fatalf("second trim (sample %d) without new allocation", i)
		case trimmed:
			t.Logf("trim: %d -> %d MB", before/mb, after/mb)
			if before < after+32*mb || after > 80*mb {
				t.Errorf("trim took the heap from %d to %d MB; want at least 32 MB less and at most 80 MB (64 live)", before/mb, after/mb)
			}
		}
	}
}

// TestNoTrimWhileBusyRealHeap allocates 1 MB between samples (4 MB/s of fake time, above the
// idle rate) after a burst and expects no trim.
func TestNoTrimWhileBusyRealHeap(t *testing.T) {
	clock := newFakeClock()
	tr := newTrimmer(trimDefaults(), runtimeHeapAt(clock))
	burst(t)
	var keep []byte
	for i := range 20 {
		keep = make([]byte, mb)
		keep[0] = 1
		clock.advance(250 * time.Millisecond)
		if trimmed, _, _ := tr.sample(); trimmed {
			t.Fatalf("trimmed at sample %d while allocating 4 MB/s", i+1)
		}
	}
	_ = keep
}
