// Package procpace runs a process on one processor (GOMAXPROCS=1) while it uses well under one
// core, or while one processor does as much work as more would, and on the runtime's default
// number of processors otherwise.
//
// A zkd write passes through a chain of goroutines (the connection's reader, Raft's loop, the
// apply loop, the connection's executor), each handing it to the next. Whenever a goroutine is
// made runnable while a processor is idle, the Go scheduler wakes an OS thread to look for work
// on that processor; in a chain of hand-offs there is none to find, so the thread spins briefly
// and sleeps again. On a lightly loaded server that spinning is a large share of the CPU it uses:
// with the pacer, one client's setData on a standalone server went from 242-250 to 196-212 µs of
// server CPU per write, and through three members sharing two cores from 832-888 to 690-726 µs.
// A server that needs more than one core gets them back within one sample (for a trial, when it
// has a work count: below).
//
// Given a count of the work the process does (Run's load channel; zkd counts client packets),
// the pacer also tries the other setting under a steady load and keeps whichever does more work,
// or, with the latencies of that work, as much work with a tail that is not longer. On a busy
// machine more processors often do not do more: the spinning then takes CPU from the process's
// own clients or peers, and one processor does as much work or more for a quarter to a third
// less CPU (scripts/bench/ab.sh on the project's 2-core machine, zkbench's setData with
// GOMAXPROCS fixed: 21.9k and 23.2k per second at 44 and 41 µs of server CPU per write on two
// processors, 30.1k and 30.5k at 25 and 25 µs on one; p99 1.5 against 1.0 ms, p99.9 2.8 against
// 3.7-4.2 ms). Where more processors do pay (more work per second by Gain or more, or a 99th
// percentile shorter by TailSlack), the trial keeps them. A busy process whose live heap grows
// (zkbench's create, which adds nodes) stays on the default: its frequent collections would
// share the one processor with the requests (create's p99 went from 1.6-1.9 to 2.6-3.0 ms).
//
// The number of processors is a setting of the whole process: only a program's main package
// should run a pacer, once, and not when the operator set GOMAXPROCS.
package procpace

import (
	"context"
	"runtime"
	"runtime/metrics"
	"time"

	"github.com/zkd-io/zkd/internal/metric"
)

// Policy says when the pacer changes the number of processors.
type Policy struct {
	// Interval is how often the process's CPU time is read.
	Interval time.Duration
	// Down is the CPU use, in cores, under which the process must stay for DownAfter before it
	// is put on one processor.
	Down      float64
	DownAfter time.Duration
	// Up is the CPU use, in cores, at or above which one sample on one processor puts the
	// process back on the default.
	Up float64
	// Hold is how long the process stays on the default after going back to it, so that a load
	// near the thresholds does not switch back and forth.
	Hold time.Duration

	// The trials, made only with a work count. Trial is how long a trial runs, and how much
	// history on the current setting a trial needs to compare with. The default is kept after a
	// trial if it did at least Gain times the work per second one processor did before; one
	// processor is kept if it did at least Keep times the work the default did. A trial to one
	// processor that falls under Abort times the work before ends after Trial/2. After a trial
	// the next waits Backoff, doubled after every trial that changed nothing, up to MaxBackoff.
	// With latencies, one processor is kept only if its 99th percentile is at most TailSlack
	// times the default's, and the default is also kept if it did the work one processor did
	// with a 99th percentile TailSlack times shorter.
	// A busy process whose live heap grows over Trial by more than HeapGrowth of it and by more
	// than HeapFloor bytes is not put on one processor, and leaves it for the default: the
	// collector's marking, frequent then, would share the one processor with the work and
	// lengthen its tail. (The floor keeps a small heap's ups and downs from counting.)
	Trial      time.Duration
	Gain       float64
	Keep       float64
	TailSlack  float64
	HeapGrowth float64
	HeapFloor  uint64
	Abort      float64
	Backoff    time.Duration
	MaxBackoff time.Duration
}

// Defaults returns the policy the zkd binary runs with. Up is below what one processor can give
// (a process on one processor also uses CPU in system calls and the collector's threads), so a
// load that outgrows it is seen before it is starved; Down is lower than Up, so that the spinning
// one processor saves does not by itself make the load look small enough to switch back.
func Defaults() Policy {
	return Policy{
		Interval:  100 * time.Millisecond,
		Down:      0.75,
		DownAfter: 2 * time.Second,
		Up:        0.85,
		Hold:      10 * time.Second,

		Trial:      2 * time.Second,
		Gain:       1.1,
		Keep:       1.0,
		TailSlack:  1.25,
		HeapGrowth: 0.1,
		HeapFloor:  4 << 20,
		Abort:      0.75,
		Backoff:    15 * time.Second,
		MaxBackoff: 2 * time.Minute,
	}
}

// Load is what the pacer learns of the process's work: Work returns how much it has done so far,
// in any unit, and never decreases; Latency, if not nil, returns the running totals of the
// latencies of that work (a metric.Summary's Total).
type Load struct {
	Work    func() uint64
	Latency func() metric.Snapshot
}

// process is what the pacer reads and sets: the real process in the binary, a scripted one in
// the tests, so that the policy is tested without depending on the clock or the machine's load.
type process interface {
	cpu() time.Duration  // CPU time (user and system) used so far
	setOne(one bool) int // one processor, or the default; returns the number now in force
}

// Run paces the process by p until ctx ends, then puts it back on the default number of
// processors (system_properties' go.maxprocs shows the number in force). It does nothing when
// the process could not use more than one processor anyway or its CPU time cannot be read.
// What it learns of the process's work, once there is any, comes on load (nil: nothing; then
// there are no trials, see the package doc).
func Run(ctx context.Context, p Policy, load <-chan Load) {
	proc, ok := selfProcess()
	if !ok || runtime.GOMAXPROCS(0) < 2 {
		return
	}
	t := time.NewTicker(p.Interval)
	defer t.Stop()
	pc := newPacer(p, proc, time.Now())
	pc.heap = liveHeap()
	defer pc.restore()
	run(ctx, pc, t.C, load)
}

// run is Run's loop: it samples on every tick until ctx ends.
func run(ctx context.Context, pc *pacer, tick <-chan time.Time, load <-chan Load) {
	for {
		select {
		case <-ctx.Done():
			return
		case l := <-load:
			pc.work, pc.latency, load = l.Work, l.Latency, nil
		case now := <-tick:
			pc.sample(now)
		}
	}
}

// pacer applies the policy to one process, one sample at a time.
type pacer struct {
	p       Policy
	proc    process
	one     bool          // on one processor
	prevAt  time.Time     // when the last sample was taken
	prevCPU time.Duration // the CPU time it read
	under   time.Duration // how long the use has stayed under Down, sample after sample
	upAt    time.Time     // when the process last went back to the default (zero: never)

	work    func() uint64          // nil: no trials
	latency func() metric.Snapshot // nil: trials by work alone
	heap    func() uint64          // the live heap's size; nil: not watched
	hist    []mark                 // work since the last change, oldest first, about Trial's worth
	trial   *trial                 // the change on trial; nil when none
	nextTry time.Time              // no trial starts before
	backoff time.Duration
}

// mark is the work count, and the latency totals, at one sample.
type mark struct {
	at   time.Time
	work uint64
	lat  metric.Snapshot
	heap uint64
}

// trial is a change of setting being tried: from is the work per second before it, and tail
// the 99th percentile of its latency (0: unknown).
type trial struct {
	start mark
	from  float64
	tail  float64
}

func newPacer(p Policy, proc process, now time.Time) *pacer {
	return &pacer{p: p, proc: proc, prevAt: now, prevCPU: proc.cpu(), backoff: p.Backoff}
}

// sample reads the CPU time used since the last sample and changes the number of processors if
// the policy says so. It reports the number now in force, the use in cores since the last
// sample, and whether it changed anything.
func (pc *pacer) sample(now time.Time) (procs int, used float64, changed bool) {
	cpu := pc.proc.cpu()
	elapsed := now.Sub(pc.prevAt)
	if elapsed <= 0 {
		return 0, 0, false
	}
	used = (cpu - pc.prevCPU).Seconds() / elapsed.Seconds()
	pc.prevAt, pc.prevCPU = now, cpu
	if pc.work != nil {
		pc.note(now)
		if pc.trial != nil {
			return pc.judge(now, used)
		}
	}
	if pc.one {
		switch {
		case pc.work != nil && used >= pc.p.Down && pc.heapGrows():
			// Busy with a growing heap: the default, without a trial (see HeapGrowth).
		case used < pc.p.Up:
			return 0, used, false
		case pc.work != nil:
			// Busy on one processor: more may or may not do more work; a trial tells.
			if !pc.mayTry(now) {
				return 0, used, false
			}
			pc.startTrial(now)
		}
		pc.one, pc.upAt, pc.under = false, now, 0
		return pc.set(false), used, true
	}
	if used >= pc.p.Down {
		pc.under = 0
		if pc.work == nil || !pc.mayTry(now) || pc.heapGrows() || (!pc.upAt.IsZero() && now.Sub(pc.upAt) < pc.p.Hold) {
			return 0, used, false
		}
		// Busy on the default: one processor may do as much; a trial tells.
		pc.startTrial(now)
		pc.one = true
		return pc.set(true), used, true
	}
	pc.under += elapsed
	if pc.under < pc.p.DownAfter || (!pc.upAt.IsZero() && now.Sub(pc.upAt) < pc.p.Hold) {
		return 0, used, false
	}
	// Light: one processor, no trial needed; a load that comes back may try more at once.
	pc.one, pc.backoff, pc.nextTry = true, pc.p.Backoff, now
	return pc.set(true), used, true
}

// set changes the processors and starts the work history afresh.
func (pc *pacer) set(one bool) int {
	pc.hist = pc.hist[:0]
	if pc.work != nil {
		pc.hist = append(pc.hist, pc.read(pc.prevAt))
	}
	return pc.proc.setOne(one)
}

// read takes a mark: the work count, latency totals and live heap at now.
func (pc *pacer) read(now time.Time) mark {
	m := mark{at: now, work: pc.work()}
	if pc.latency != nil {
		m.lat = pc.latency()
	}
	if pc.heap != nil {
		m.heap = pc.heap()
	}
	return m
}

// growing reports whether the live heap grew by more than HeapGrowth and HeapFloor between two
// marks.
func (pc *pacer) growing(from, to mark) bool {
	return to.heap > from.heap+pc.p.HeapFloor && float64(to.heap) > float64(from.heap)*(1+pc.p.HeapGrowth)
}

// heapGrows reports whether the live heap grew by more than HeapGrowth over a whole Trial of
// history.
func (pc *pacer) heapGrows() bool {
	_, full := pc.rate()
	return full && pc.growing(pc.hist[0], pc.hist[len(pc.hist)-1])
}

// tail is the 99th percentile of the latencies between two marks (0: none).
func tail(from, to mark) float64 { return to.lat.Since(from.lat).Quantile(0.99) }

// note records the work count at now, keeping about Trial's worth.
func (pc *pacer) note(now time.Time) {
	pc.hist = append(pc.hist, pc.read(now))
	drop := 0
	for drop < len(pc.hist)-1 && now.Sub(pc.hist[drop+1].at) >= pc.p.Trial {
		drop++
	}
	pc.hist = append(pc.hist[:0], pc.hist[drop:]...)
}

// rate is the work per second over the history, and whether it spans a whole Trial.
func (pc *pacer) rate() (float64, bool) {
	if len(pc.hist) < 2 {
		return 0, false
	}
	first, last := pc.hist[0], pc.hist[len(pc.hist)-1]
	span := last.at.Sub(first.at)
	if span <= 0 {
		return 0, false
	}
	return float64(last.work-first.work) / span.Seconds(), span >= pc.p.Trial
}

// mayTry reports whether a trial may start: none too recently, and a whole Trial of history on
// the current setting to compare with.
func (pc *pacer) mayTry(now time.Time) bool {
	if now.Before(pc.nextTry) {
		return false
	}
	_, full := pc.rate()
	return full
}

// startTrial notes the work per second and the tail so far; the caller makes the change.
func (pc *pacer) startTrial(now time.Time) {
	from, _ := pc.rate()
	last := pc.hist[len(pc.hist)-1]
	pc.trial = &trial{start: last, from: from, tail: tail(pc.hist[0], last)}
}

// judge ends the trial under way once it has run for Trial (or, to one processor, once half of
// that shows the work collapsing): it keeps the new setting if its work, tail and heap pass the
// Policy's tests, else goes back.
func (pc *pacer) judge(now time.Time, used float64) (procs int, _ float64, changed bool) {
	t := pc.trial
	end := pc.hist[len(pc.hist)-1]
	ran := now.Sub(t.start.at)
	rate := float64(end.work-t.start.work) / ran.Seconds()
	done := ran >= pc.p.Trial || (pc.one && ran >= pc.p.Trial/2 && rate < t.from*pc.p.Abort)
	if !done {
		return 0, used, false
	}
	pc.trial = nil
	newTail := tail(t.start, end)
	known := t.tail > 0 && newTail > 0
	var keep bool
	if pc.one {
		keep = rate >= t.from*pc.p.Keep && (!known || newTail <= t.tail*pc.p.TailSlack) && !pc.growing(t.start, end)
	} else {
		keep = rate >= t.from*pc.p.Gain || (known && rate >= t.from*pc.p.Keep && newTail*pc.p.TailSlack <= t.tail)
	}
	if keep {
		pc.backoff = pc.p.Backoff
		pc.nextTry = now.Add(pc.backoff)
		pc.under = 0
		return 0, used, false
	}
	pc.nextTry = now.Add(pc.backoff)
	pc.backoff = min(2*pc.backoff, pc.p.MaxBackoff)
	pc.one, pc.under = !pc.one, 0
	if !pc.one {
		pc.upAt = now
	}
	return pc.set(pc.one), used, true
}

// restore puts the process back on the default if the pacer left it on one processor.
func (pc *pacer) restore() {
	if pc.one {
		pc.one = false
		pc.proc.setOne(false)
	}
}

// runtimeProcs sets the Go runtime's number of processors.
type runtimeProcs struct{ cpuTime func() time.Duration }

func (r runtimeProcs) cpu() time.Duration { return r.cpuTime() }

func (runtimeProcs) setOne(one bool) int {
	if one {
		runtime.GOMAXPROCS(1)
	} else {
		// Back to the runtime's own choice, which also turns its tracking of CPU limit
		// changes back on (setting a number turns it off).
		runtime.SetDefaultGOMAXPROCS()
	}
	return runtime.GOMAXPROCS(0)
}

// liveHeap returns a reader of the heap the last collection found live, or nil if the runtime
// does not report it.
func liveHeap() func() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return nil
	}
	return func() uint64 {
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
}
