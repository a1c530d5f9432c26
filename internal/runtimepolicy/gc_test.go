package runtimepolicy

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, headroom uint64
		base, want     int
	}{
		{live: 2 * mib, headroom: 64 * mib, base: 100, want: 1600},  // capped: the runtime's minimum goal scales with it
		{live: 8 * mib, headroom: 64 * mib, base: 100, want: 800},   // goal 72 MiB
		{live: 10 * mib, headroom: 64 * mib, base: 100, want: 640},  // goal 74 MiB
		{live: 3 * mib, headroom: 64 * mib, base: 100, want: 1600},  // 2134 would make the minimum goal 85 MiB
		{live: 64 * mib, headroom: 64 * mib, base: 100, want: 100},  // from here on GOGC=100 leaves more
		{live: 500 * mib, headroom: 64 * mib, base: 100, want: 100}, //
		{live: 500 * mib, headroom: 64 * mib, base: 300, want: 300}, // never below the operator's
		{live: 0, headroom: 64 * mib, base: 100, want: 1600},        // before the first collection
		{live: 7*mib + 1, headroom: 64 * mib, base: 100, want: 915}, // rounded up: the goal is never short
		{live: 1 * mib, headroom: 16 * mib, base: 100, want: 400},   // a smaller headroom
		{live: 40 * mib, headroom: 16 * mib, base: 100, want: 100},  //
		{live: 8 * mib, headroom: 2 * mib, base: 100, want: 100},    // a headroom under the runtime's minimum
	} {
		if got := gcPercent(c.live, c.headroom, c.base); got != c.want {
			t.Errorf("gcPercent(%d MiB, %d MiB, %d) = %d, want %d", c.live/mib, c.headroom/mib, c.base, got, c.want)
		}
		if got := gcPercent(c.live, c.headroom, c.base); got > c.base && c.live > 0 {
			if goal := c.live + c.live*uint64(got)/100; goal < c.live+c.headroom && got < int(c.headroom*100/heapMinimum) {
				t.Errorf("gcPercent(%d, %d, %d) = %d puts the goal %d short of the headroom", c.live, c.headroom, c.base, got, goal)
			}
		}
	}
}

func readGC() (percent int, live, goal uint64) {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/heap/live:bytes"}, {Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64()), s[1].Value.Uint64(), s[2].Value.Uint64()
}

// Through the real runtime: after a collection the heap goal leaves the headroom for new
// allocation, a live heap larger than the headroom is paced as GOGC=100 would, and Stop puts the
// percent back.
func TestPacerFollowsTheLiveHeap(t *testing.T) {
	const headroom = 32 << 20
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)

	p := startGCPacer(headroom)
	// The cleanup that re-paces runs on its own goroutine after the collection; collect until it
	// has caught up with what the collection measured.
	settled := func(want func(live uint64) int) (int, uint64, uint64) {
		t.Helper()
		for range 1000 {
			runtime.GC()
			runtime.Gosched()
			pc, live, goal := readGC()
			if pc == want(live) {
				return pc, live, goal
			}
		}
		pc, live, _ := readGC()
		t.Fatalf("GC percent %d for a live heap of %d bytes, want %d", pc, live, want(live))
		return 0, 0, 0
	}
	paced := func(live uint64) int { return gcPercent(live, headroom, 100) }
	// A live heap under the runtime's 4 MiB minimum gets a goal of the headroom itself.
	if pc, live, goal := settled(paced); pc <= 100 || goal < headroom || goal < live+headroom-heapMinimum {
		t.Fatalf("small heap: percent %d, live %d, goal %d; want a goal of %d or more", pc, live, goal, headroom)
	}

	big := make([][]byte, 0, 64)
	for range 64 {
		big = append(big, make([]byte, 1<<20)) // 64 MiB live, twice the headroom
	}
	if pc, _, _ := settled(paced); pc != 100 {
		t.Fatalf("a live heap above the headroom got GC percent %d, want 100", pc)
	}
	runtime.KeepAlive(big)

	p.stop()
	if pc, _, _ := readGC(); pc != 100 {
		t.Fatalf("after Stop the GC percent is %d, want 100", pc)
	}
	// Stopped: later collections leave the percent alone.
	debug.SetGCPercent(150)
	runtime.GC()
	runtime.GC()
	if pc, _, _ := readGC(); pc != 150 {
		t.Fatalf("a stopped pacer changed the GC percent to %d", pc)
	}
}

// With the collector off, Start leaves it off.
func TestPacerLeavesGCOff(t *testing.T) {
	before := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(before)
	p := startGCPacer(gcHeadroom)
	defer p.stop()
	runtime.GC()
	if pc, _, _ := readGC(); pc != -1 {
		t.Fatalf("GC percent %d after Start with GOGC=off", pc)
	}
}
