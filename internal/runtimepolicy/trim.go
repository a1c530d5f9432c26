package runtimepolicy

// Returning free heap to the operating system.
//
// Go's background scavenger keeps free memory up to about the next GC's heap goal (twice the live
// heap by default) mapped, and returns the rest slowly. After a bulk load, a server holding 100k
// znodes in 60 MB of live heap therefore kept 120-150 MB resident for as long as it stayed idle.
// The trimmer notices when allocation has stopped after at least Rearm bytes were allocated, and
// then runs debug.FreeOSMemory once: a full collection that returns every free page. It does
// nothing while the process is busy (a forced collection would only cost CPU then), and after a
// trim it waits for a fresh Rearm bytes of allocation before trimming again. It does not compare
// the heap with the live size: the runtime only knows the live size as of the last collection,
// and an idle process runs none, so that figure goes stale exactly when trimming pays.

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// trimPolicy says when the trimmer acts. The zero value is not useful; see trimDefaults.
type trimPolicy struct {
	// Interval is how often the heap is sampled.
	Interval time.Duration
	// IdleRate is the allocation rate (bytes per second) below which the process counts as
	// idle; it must stay below it for IdleSamples consecutive samples. The rate is measured over
	// the time that really passed between two samples, which is longer than Interval when the
	// machine is loaded.
	IdleRate    uint64
	IdleSamples int
	// Rearm is how many bytes must be allocated (since start or the last trim) before a trim.
	Rearm uint64
}

// trimDefaults returns the policy the zkd binary runs with.
func trimDefaults() trimPolicy {
	return trimPolicy{
		Interval:    250 * time.Millisecond,
		IdleRate:    1 << 20,
		IdleSamples: 3,
		Rearm:       64 << 20,
	}
}

// sample is one reading of the heap.
type sample struct {
	at      time.Time // when it was read
	allocs  uint64    // cumulative bytes allocated
	objects uint64    // bytes in heap objects, live or not yet swept
	free    uint64    // free heap pages not yet returned to the OS
}

// held is the heap memory the process holds from the OS.
func (s sample) held() uint64 { return s.objects + s.free }

// heap is what the trimmer watches and acts on: runtimeHeap in the binary, a scripted heap in
// the tests, so that the policy is tested without depending on the clock or the machine's load.
type heap interface {
	read() sample
	trim() // return every free page to the OS
}

// runtimeHeap is the Go runtime's heap, read through runtime/metrics.
type runtimeHeap struct {
	buf []metrics.Sample
	now func() time.Time // time.Now; a test's clock in tests
}

func newRuntimeHeap() *runtimeHeap {
	names := []string{
		"/gc/heap/allocs:bytes",
		"/memory/classes/heap/objects:bytes",
		"/memory/classes/heap/free:bytes",
	}
	h := &runtimeHeap{buf: make([]metrics.Sample, len(names)), now: time.Now}
	for i, n := range names {
		h.buf[i].Name = n
	}
	return h
}

func (h *runtimeHeap) read() sample {
	metrics.Read(h.buf)
	v := func(i int) uint64 {
		if h.buf[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return h.buf[i].Value.Uint64()
	}
	return sample{at: h.now(), allocs: v(0), objects: v(1), free: v(2)}
}

func (*runtimeHeap) trim() { debug.FreeOSMemory() }

// trimLoop samples the heap every p.Interval and trims it when the policy says so, until ctx ends. It
// calls onTrim (if not nil) after each trim with the resident heap bytes before and after.
func trimLoop(ctx context.Context, p trimPolicy, onTrim func(before, after uint64)) {
	t := time.NewTicker(p.Interval)
	defer t.Stop()
	run(ctx, p, t.C, newRuntimeHeap(), onTrim)
}

// run is trimLoop's loop: it samples h on every tick until ctx ends.
func run(ctx context.Context, p trimPolicy, tick <-chan time.Time, h heap, onTrim func(before, after uint64)) {
	t := newTrimmer(p, h)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
		}
		if trimmed, before, after := t.sample(); trimmed && onTrim != nil {
			onTrim(before, after)
		}
	}
}

// trimmer applies the policy to one heap, one sample at a time.
type trimmer struct {
	p         trimPolicy
	h         heap
	prev      sample
	idle      int    // consecutive samples below IdleRate
	sinceTrim uint64 // bytes allocated since the start or the last trim
}

// newTrimmer starts counting from what the process has allocated so far: a server allocates most
// on its way up (a restart restores a snapshot and replays the log before the trimmer starts), and
// that counts towards the first trim as a burst after the start does.
func newTrimmer(p trimPolicy, h heap) *trimmer {
	t := &trimmer{p: p, h: h, prev: h.read()}
	t.sinceTrim = t.prev.allocs
	return t
}

// sample reads the heap and trims it if the policy says so. It reports whether it trimmed, and
// then the bytes held before and after.
func (t *trimmer) sample() (trimmed bool, before, after uint64) {
	cur := t.h.read()
	delta := cur.allocs - t.prev.allocs
	elapsed := cur.at.Sub(t.prev.at)
	if elapsed <= 0 {
		elapsed = t.p.Interval
	}
	t.prev = cur
	t.sinceTrim += delta
	if float64(delta)/elapsed.Seconds() >= float64(t.p.IdleRate) {
		t.idle = 0
		return false, 0, 0
	}
	t.idle++
	if t.sinceTrim < t.p.Rearm || t.idle < t.p.IdleSamples {
		return false, 0, 0
	}
	t.h.trim()
	t.prev = t.h.read()
	t.sinceTrim, t.idle = 0, 0
	return true, cur.held(), t.prev.held()
}
