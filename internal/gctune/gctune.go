// Package gctune keeps the Go heap goal of a long-running server from falling below a floor.
//
// With the default GOGC of 100 the collector runs whenever the heap doubles. zkd's live heap is
// small when it holds few znodes (a few MB), so a write-heavy load that allocates 10 KB per
// request made the collector run about 70 times a second and take a quarter of the CPU. Raising
// GOGC while the live heap is small keeps the heap goal at the floor; once the live heap is
// large enough GOGC is back at its base, so a big tree still gets the usual headroom of one live
// heap and no more.
package gctune

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// maxPercent bounds GOGC: with a live heap under floor/50 the goal may sit below the floor.
const maxPercent = 5000

// Percent returns the GOGC that puts the heap goal, live·(1+GOGC/100), at floor or above, and
// never below base.
func Percent(live, floor uint64, base int) int {
	if live == 0 {
		live = 1
	}
	need := 0
	if floor > live {
		need = int(min((floor-live)*100/live, maxPercent))
	}
	return max(base, need)
}

// Configured reports whether the operator set GOGC or GOMEMLIMIT, which Run then leaves alone.
func Configured() bool {
	return os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != ""
}

// Run adjusts GOGC every interval from the live heap until ctx ends, then restores base. It
// changes GOGC only when the wanted value moves by more than a tenth.
func Run(ctx context.Context, floor uint64, base int, interval time.Duration) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	t := time.NewTicker(interval)
	defer t.Stop()
	current := base
	defer func() { debug.SetGCPercent(base) }()
	for {
		metrics.Read(sample)
		if sample[0].Value.Kind() == metrics.KindUint64 {
			want := Percent(sample[0].Value.Uint64(), floor, base)
			if diff := want - current; diff*10 > current || -diff*10 > current {
				debug.SetGCPercent(want)
				current = want
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
