package runtimepolicy

// The collector's pacing.
//
// Go's default (GOGC=100) starts a collection when the heap has doubled, with a 4 MiB minimum.
// A zkd serving a small tree has a few megabytes of live heap and allocates a few hundred
// megabytes a second under write load (requests, log entries, replaced nodes), so it collected
// more than a hundred times a second, each collection waking every processor, scanning every
// goroutine's stack and turning on write barriers. After every collection the pacer sets the GC
// percent so that the next collection starts no sooner than the heap reaches its live size plus
// gcHeadroom; a large tree (live heap above the headroom) is collected as GOGC=100 would. The
// memory this keeps in use under load is at most the headroom, and the trimmer (trim.go) returns
// it once the process goes idle.

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// gcHeadroom is the heap the pacer lets a small live heap grow by before the next collection.
const gcHeadroom = 64 << 20

// heapMinimum is the Go runtime's minimum heap goal at GOGC=100. The runtime scales it with the
// GC percent, so a percent above 100*headroom/heapMinimum would push the goal of a small heap
// past the headroom.
const heapMinimum = 4 << 20

// gcPercent is the GC percent that puts the next heap goal at least headroom bytes above a live
// heap of live bytes, and never below base.
func gcPercent(live, headroom uint64, base int) int {
	limit := headroom * 100 / heapMinimum
	want := limit
	if live > 0 {
		want = min((headroom*100+live-1)/live, limit)
	}
	if want <= uint64(base) {
		return base
	}
	return int(want)
}

// gcPacer adjusts the GC percent after every collection until stop.
type gcPacer struct {
	headroom uint64
	base     int

	mu      sync.Mutex
	stopped bool
	percent int // the GC percent last set
	samples []metrics.Sample
}

// sentinel is garbage from birth; its cleanup runs after the collection that found it.
type sentinel struct{ _ *gcPacer }

// startGCPacer begins pacing with the given headroom, from the GC percent in force (GOGC=100 unless the
// program changed it). With the collector off or at zero (GOGC=off, GOGC=0) it does nothing.
func startGCPacer(headroom uint64) *gcPacer {
	p := &gcPacer{headroom: headroom, samples: []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/gogc:percent"}}}
	metrics.Read(p.samples)
	p.base = 100
	if v := p.samples[1].Value; v.Kind() == metrics.KindUint64 {
		p.base = int(v.Uint64()) // GOGC=off reads as -1
	}
	p.percent, p.samples = p.base, p.samples[:1]
	if p.base <= 0 {
		p.stopped = true
		return p
	}
	p.adjust()
	p.arm()
	return p
}

// stop ends pacing and restores the GC percent startGCPacer found.
func (p *gcPacer) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stopped {
		p.stopped = true
		debug.SetGCPercent(p.base)
	}
}

func (p *gcPacer) arm() {
	runtime.AddCleanup(new(sentinel), (*gcPacer).afterGC, p)
}

// afterGC runs on the runtime's cleanup goroutine after each collection.
func (p *gcPacer) afterGC() {
	if p.adjust() {
		p.arm()
	}
}

// adjust sets the GC percent for the live heap the last collection marked; it reports false once
// the pacer is stopped.
func (p *gcPacer) adjust() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return false
	}
	metrics.Read(p.samples)
	var live uint64
	if v := p.samples[0].Value; v.Kind() == metrics.KindUint64 {
		live = v.Uint64()
	}
	if pc := gcPercent(live, p.headroom, p.base); pc != p.percent {
		debug.SetGCPercent(pc)
		p.percent = pc
	}
	return true
}
