// Package procpace runs a process on one processor (GOMAXPROCS=1) while it uses well under one
// core, and on the runtime's default number of processors as soon as it uses more.
//
// A zkd write passes through a chain of goroutines (the connection's reader, Raft's loop, the
// apply loop, the connection's executor), each handing it to the next. Whenever a goroutine is
// made runnable while a processor is idle, the Go scheduler wakes an OS thread to look for work
// on that processor; in a chain of hand-offs there is none to find, so the thread spins briefly
// and sleeps again. On a lightly loaded server that spinning is a large share of the CPU it uses:
// with the pacer, one client's setData on a standalone server went from 242-250 to 196-212 µs of
// server CPU per write, and through three members sharing two cores from 832-888 to 690-726 µs.
// A server that needs more than one core gets them back within one sample.
//
// The number of processors is a setting of the whole process: only a program's main package
// should run a pacer, once, and not when the operator set GOMAXPROCS.
package procpace

import (
	"context"
	"runtime"
	"time"
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
	}
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
func Run(ctx context.Context, p Policy) {
	proc, ok := selfProcess()
	if !ok || runtime.GOMAXPROCS(0) < 2 {
		return
	}
	t := time.NewTicker(p.Interval)
	defer t.Stop()
	pc := newPacer(p, proc, time.Now())
	defer pc.restore()
	run(ctx, pc, t.C)
}

// run is Run's loop: it samples on every tick until ctx ends.
func run(ctx context.Context, pc *pacer, tick <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
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
}

func newPacer(p Policy, proc process, now time.Time) *pacer {
	return &pacer{p: p, proc: proc, prevAt: now, prevCPU: proc.cpu()}
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
	if pc.one {
		if used < pc.p.Up {
			return 0, used, false
		}
		pc.one, pc.upAt, pc.under = false, now, 0
		return pc.proc.setOne(false), used, true
	}
	if used >= pc.p.Down {
		pc.under = 0
		return 0, used, false
	}
	pc.under += elapsed
	if pc.under < pc.p.DownAfter || (!pc.upAt.IsZero() && now.Sub(pc.upAt) < pc.p.Hold) {
		return 0, used, false
	}
	pc.one = true
	return pc.proc.setOne(true), used, true
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
