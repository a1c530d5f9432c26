// Package memtrim returns a process's free heap memory to the operating system once the process
// goes idle after a burst of allocation.
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
package memtrim

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Policy says when the trimmer acts. The zero value is not useful; see Defaults.
type Policy struct {
	// Interval is how often the heap is sampled.
	Interval time.Duration
	// IdleRate is the allocation rate (bytes per second) below which the process counts as
	// idle; it must stay below it for IdleSamples consecutive samples.
	IdleRate    uint64
	IdleSamples int
	// Rearm is how many bytes must be allocated (since start or the last trim) before a trim.
	Rearm uint64
}

// Defaults returns the policy the zkd binary runs with.
func Defaults() Policy {
	return Policy{
		Interval:    250 * time.Millisecond,
		IdleRate:    1 << 20,
		IdleSamples: 3,
		Rearm:       64 << 20,
	}
}

// sample is one reading of the runtime's heap metrics.
type sample struct {
	allocs  uint64 // cumulative bytes allocated
	objects uint64 // bytes in heap objects, live or not yet swept
	free    uint64 // free heap pages not yet returned to the OS
}

var sampleNames = []string{
	"/gc/heap/allocs:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/free:bytes",
}

func read(buf []metrics.Sample) sample {
	metrics.Read(buf)
	v := func(i int) uint64 {
		if buf[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return buf[i].Value.Uint64()
	}
	return sample{allocs: v(0), objects: v(1), free: v(2)}
}

// Run samples the heap every p.Interval and trims it when the policy says so, until ctx ends. It
// calls onTrim (if not nil) after each trim with the resident heap bytes before and after.
func Run(ctx context.Context, p Policy, onTrim func(before, after uint64)) {
	buf := make([]metrics.Sample, len(sampleNames))
	for i, n := range sampleNames {
		buf[i].Name = n
	}
	t := time.NewTicker(p.Interval)
	defer t.Stop()
	prev := read(buf)
	idle := 0
	var sinceTrim uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cur := read(buf)
		delta := cur.allocs - prev.allocs
		prev = cur
		sinceTrim += delta
		rate := uint64(float64(delta) / p.Interval.Seconds())
		if rate >= p.IdleRate {
			idle = 0
			continue
		}
		idle++
		if sinceTrim < p.Rearm || idle < p.IdleSamples {
			continue
		}
		held := cur.objects + cur.free
		debug.FreeOSMemory()
		after := read(buf)
		prev = after
		sinceTrim, idle = 0, 0
		if onTrim != nil {
			onTrim(held, after.objects+after.free)
		}
	}
}
