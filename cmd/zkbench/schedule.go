package main

import (
	"context"
	"time"
)

// schedule gives the intended send times of an open-loop run: op i is due at start + i/rate,
// whatever happened to earlier ops. Latency is measured from these times, not from when a request
// actually left, so a server stall is charged to every op it delayed (no coordinated omission).
type schedule struct {
	start time.Time
	rate  float64 // ops per second, > 0
}

// due returns the intended send time of op i (counting from zero).
func (s schedule) due(i int64) time.Time {
	return s.start.Add(time.Duration(float64(i) * 1e9 / s.rate))
}

// openLoop issues ops at the scheduled times until ctx ends or limit ops (if > 0) have been
// issued. launch starts op i, due at intended, and must call finish once it completes; at most
// maxInFlight ops are outstanding, and when that many are, openLoop waits but the waiting ops keep
// their intended times. It returns the number of ops launched after all have finished.
func openLoop(ctx context.Context, s schedule, limit int64, maxInFlight int, launch func(i int64, intended time.Time, finish func())) int64 {
	slots := make(chan struct{}, max(maxInFlight, 1))
	finish := func() { <-slots }
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var i int64
	defer func() {
		// Wait for every launched op: fill all slots.
		for range cap(slots) {
			slots <- struct{}{}
		}
	}()
	for limit <= 0 || i < limit {
		intended := s.due(i)
		if wait := time.Until(intended); wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				return i
			case <-timer.C:
			}
		}
		// A loop behind its schedule does not wait above, and a select with both cases ready
		// picks either: look at ctx first, so no op is launched once the run has ended, nor one
		// due at or after its deadline (whose timer may not have fired yet on a busy machine).
		if ctx.Err() != nil {
			return i
		}
		if d, ok := ctx.Deadline(); ok && !intended.Before(d) {
			return i
		}
		select {
		case <-ctx.Done():
			return i
		case slots <- struct{}{}:
		}
		launch(i, intended, finish)
		i++
	}
	return i
}
