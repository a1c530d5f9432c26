package procpace

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/zkd-io/zkd/internal/metric"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// scriptedProcess uses CPU at a rate the test sets and records the pacer's settings.
type scriptedProcess struct {
	used     time.Duration
	procs    int // the number in force
	defaults int // what the default is
	changes  []int
}

func (s *scriptedProcess) cpu() time.Duration { return s.used }

func (s *scriptedProcess) setOne(one bool) int {
	s.procs = s.defaults
	if one {
		s.procs = 1
	}
	s.changes = append(s.changes, s.procs)
	return s.procs
}

// driver feeds a pacer with the default policy samples of a scriptedProcess, one per interval,
// counting them from 1.
type driver struct {
	t    *testing.T
	p    Policy
	proc *scriptedProcess
	pc   *pacer
	now  time.Time
	n    int
}

func newDriver(t *testing.T) *driver {
	p := Defaults()
	proc := &scriptedProcess{procs: 2, defaults: 2}
	now := time.Unix(1000, 0)
	return &driver{t: t, p: p, proc: proc, pc: newPacer(p, proc, now), now: now}
}

// load runs samples for d at rate cores and returns the sample numbers at which the pacer
// changed the number of processors.
func (d *driver) load(rate float64, dur time.Duration) []int {
	var at []int
	for end := d.now.Add(dur); d.now.Before(end); {
		d.now = d.now.Add(d.p.Interval)
		d.proc.used += time.Duration(rate * float64(d.p.Interval))
		d.n++
		procs, used, changed := d.pc.sample(d.now)
		if used < rate-0.01 || used > rate+0.01 {
			d.t.Fatalf("sample %d: measured %.3f cores, the script used %.3f", d.n, used, rate)
		}
		if changed {
			if procs != d.proc.procs {
				d.t.Fatalf("sample %d: pacer reports %d processors, %d in force", d.n, procs, d.proc.procs)
			}
			at = append(at, d.n)
		}
	}
	return at
}

func (d *driver) expect(procs int, changes ...int) {
	d.t.Helper()
	if d.proc.procs != procs {
		d.t.Fatalf("after sample %d: %d processors in force, want %d", d.n, d.proc.procs, procs)
	}
	if len(d.proc.changes) != len(changes) {
		d.t.Fatalf("after sample %d: changes %v, want %v", d.n, d.proc.changes, changes)
	}
	for i := range changes {
		if d.proc.changes[i] != changes[i] {
			d.t.Fatalf("after sample %d: changes %v, want %v", d.n, d.proc.changes, changes)
		}
	}
}

// TestGoesToOneWhenLight: a light load goes to one processor after DownAfter, not before.
func TestGoesToOneWhenLight(t *testing.T) {
	d := newDriver(t)
	at := d.load(0.1, d.p.DownAfter-d.p.Interval)
	d.expect(2)
	if len(at) != 0 {
		t.Fatalf("changed at samples %v before DownAfter passed", at)
	}
	at = d.load(0.1, d.p.Interval)
	d.expect(1, 1)
	if len(at) != 1 || at[0] != 20 {
		t.Fatalf("went to one processor at samples %v, want [20]", at)
	}
}

// TestBusySampleResetsDown: one sample above Down starts the wait for DownAfter again.
func TestBusySampleResetsDown(t *testing.T) {
	d := newDriver(t)
	d.load(0.9, 12*time.Second)
	d.expect(2)
	d.load(0.5, d.p.DownAfter-d.p.Interval)
	d.load(d.p.Down+0.01, d.p.Interval)
	d.load(0.5, d.p.DownAfter-d.p.Interval)
	d.expect(2)
	d.load(0.5, d.p.Interval)
	d.expect(1, 1)
}

// TestBackToDefaultAtOnce: on one processor, the first sample at Up or above goes back to the
// default, and Hold keeps it there even when the load falls at once.
func TestBackToDefaultAtOnce(t *testing.T) {
	d := newDriver(t)
	d.load(0.3, 12*time.Second)
	d.expect(1, 1)
	d.load(d.p.Up-0.02, 5*time.Second) // busy, but one processor keeps up
	d.expect(1, 1)
	at := d.load(d.p.Up, d.p.Interval)
	d.expect(2, 1, 2)
	if len(at) != 1 {
		t.Fatalf("changes at %v, want one", at)
	}
	d.load(0.2, d.p.Hold-d.p.Interval)
	d.expect(2, 1, 2)
	d.load(0.2, d.p.Interval)
	d.expect(1, 1, 2, 1)
}

// TestBetweenThresholdsStays: a load between Down and Up changes nothing, whichever state it
// finds.
func TestBetweenThresholdsStays(t *testing.T) {
	d := newDriver(t)
	mid := (d.p.Down + d.p.Up) / 2
	d.load(mid, time.Minute)
	d.expect(2)
	d.load(0.1, 12*time.Second)
	d.expect(1, 1)
	d.load(mid, time.Minute)
	d.expect(1, 1)
}

// TestClockStandsStill: a sample taken at the same instant as the last one changes nothing.
func TestClockStandsStill(t *testing.T) {
	d := newDriver(t)
	d.proc.used += time.Second
	if _, _, changed := d.pc.sample(d.now); changed {
		t.Fatal("a sample with no time elapsed changed the processors")
	}
}

// TestRunStopsAndRestores: Run's loop stops with its context and leaves the default in force.
func TestRunStopsAndRestores(t *testing.T) {
	proc := &scriptedProcess{procs: 2, defaults: 2}
	p := Defaults()
	now := time.Unix(1000, 0)
	pc := newPacer(p, proc, now)
	tick := make(chan time.Time)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx, pc, tick, nil)
	}()
	for range 30 { // 3 s idle: past DownAfter
		now = now.Add(p.Interval)
		tick <- now
	}
	cancel()
	<-done
	if len(proc.changes) != 1 || proc.changes[0] != 1 {
		t.Fatalf("the loop made changes %v, want [1]", proc.changes)
	}
	pc.restore()
	if proc.procs != 2 {
		t.Fatalf("%d processors after restore, want the default 2", proc.procs)
	}
}

// TestRealProcess reads this process's CPU time and sets the runtime's processors for real.
func TestRealProcess(t *testing.T) {
	proc, ok := selfProcess()
	if !ok {
		t.Skip("no CPU time on this platform")
	}
	before := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(before) })
	c0 := proc.cpu()
	spinUntil := time.Now().Add(50 * time.Millisecond)
	for time.Now().Before(spinUntil) {
	}
	if c1 := proc.cpu(); c1-c0 < 10*time.Millisecond {
		t.Fatalf("50 ms of spinning read as %v of CPU", c1-c0)
	}
	if n := proc.setOne(true); n != 1 || runtime.GOMAXPROCS(0) != 1 {
		t.Fatalf("setOne(true) reported %d, runtime has %d", n, runtime.GOMAXPROCS(0))
	}
	runtime.SetDefaultGOMAXPROCS()
	want := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(1)
	if n := proc.setOne(false); n != want || runtime.GOMAXPROCS(0) != want {
		t.Fatalf("setOne(false) reported %d, runtime has %d, default %d", n, runtime.GOMAXPROCS(0), want)
	}
}

// workDriver is a driver whose process also counts work: perProc[n] is the work per second it
// does on n processors (index 1 for one, 2 for the default), at the CPU rate the test sets.
type workDriver struct {
	*driver
	done    uint64
	perProc [3]float64
	// With latencies: every sample observes 100 latencies, all of latOn[n] µs on n processors.
	lat   *metric.Summary
	latOn [3]uint64
}

func newWorkDriver(t *testing.T, onOne, onDefault float64) *workDriver {
	d := &workDriver{driver: newDriver(t), perProc: [3]float64{0, onOne, onDefault}}
	d.pc.work = func() uint64 { return d.done }
	return d
}

// withLatency makes the process report latencies of onOne and onDefault µs.
func (d *workDriver) withLatency(onOne, onDefault uint64) *workDriver {
	d.lat = metric.NewSummary(metric.Millis)
	d.latOn = [3]uint64{0, onOne, onDefault}
	d.pc.latency = d.lat.Total
	return d
}

// run samples for dur at rate cores and returns the processors in force at each sample.
func (d *workDriver) run(rate float64, dur time.Duration) []int {
	var procs []int
	for end := d.now.Add(dur); d.now.Before(end); {
		d.now = d.now.Add(d.p.Interval)
		d.proc.used += time.Duration(rate * float64(d.p.Interval))
		d.done += uint64(d.perProc[d.proc.procs] * d.p.Interval.Seconds())
		if d.lat != nil {
			for range 100 {
				d.lat.Observe(d.latOn[d.proc.procs])
			}
		}
		d.n++
		d.pc.sample(d.now)
		procs = append(procs, d.proc.procs)
	}
	return procs
}

// share is the fraction of samples on n processors.
func share(procs []int, n int) float64 {
	c := 0
	for _, p := range procs {
		if p == n {
			c++
		}
	}
	return float64(c) / float64(len(procs))
}

// TestTrialKeepsOneWhenMoreDoNotPay: a busy process that does the same work on either setting
// ends up on one processor, and tries the default less and less often, never less often than
// MaxBackoff.
func TestTrialKeepsOneWhenMoreDoNotPay(t *testing.T) {
	d := newWorkDriver(t, 20000, 20000)
	first := d.run(1.0, d.p.Trial+2*d.p.Trial)
	if first[len(first)-1] != 1 {
		t.Fatalf("after a trial the process is on %d processors, want 1 (%v)", d.proc.procs, first)
	}
	procs := d.run(1.0, 10*time.Minute)
	if s := share(procs, 1); s < 0.97 {
		t.Fatalf("on one processor %.1f%% of the time, want at least 97%%", 100*s)
	}
	// Trials to the default go on, spaced by at most MaxBackoff, each back to one.
	var starts []int
	for i := 1; i < len(procs); i++ {
		if procs[i] == 2 && procs[i-1] == 1 {
			starts = append(starts, i)
		}
	}
	if len(starts) < 5 {
		t.Fatalf("%d trials in 10 minutes, want at least 5", len(starts))
	}
	for i := 1; i < len(starts); i++ {
		gap := time.Duration(starts[i]-starts[i-1]) * d.p.Interval
		if gap > d.p.MaxBackoff+2*d.p.Trial {
			t.Fatalf("trials %v apart, more than MaxBackoff", gap)
		}
		if i >= 2 && gap < time.Duration(starts[i-1]-starts[i-2])*d.p.Interval && gap < d.p.MaxBackoff {
			t.Fatalf("trials came closer together: %v", starts)
		}
	}
}

// TestTrialKeepsMoreWhenTheyPay: a busy process that does twice the work on the default keeps
// it; a trial of one processor ends early when the work collapses.
func TestTrialKeepsMoreWhenTheyPay(t *testing.T) {
	d := newWorkDriver(t, 10000, 20000)
	d.run(0.1, 3*time.Second) // light: one processor
	d.expect(1, 1)
	procs := d.run(1.0, 5*time.Minute)
	if s := share(procs, 2); s < 0.97 {
		t.Fatalf("on the default %.1f%% of the time, want at least 97%%", 100*s)
	}
	// Each trial of one processor ran half a Trial: the work fell under Abort. (The samples
	// before the first change are the light load's one processor, not a trial.)
	run, start := 0, 0
	for procs[start] == 1 {
		start++
	}
	for i, p := range procs[start:] {
		switch {
		case p == 1:
			run++
		case run > 0:
			if want := int(d.p.Trial / 2 / d.p.Interval); run != want {
				t.Fatalf("a trial of one processor ending at sample %d ran %d samples, want %d", i, run, want)
			}
			run = 0
		}
	}
}

// TestTrialFollowsTheLoad: when the work on the default stops paying, the process goes back
// to one processor within MaxBackoff and a trial.
func TestTrialFollowsTheLoad(t *testing.T) {
	d := newWorkDriver(t, 10000, 20000)
	if procs := d.run(1.0, time.Minute); procs[len(procs)-1] != 2 {
		t.Fatalf("on %d processors while the default pays", d.proc.procs)
	}
	d.perProc[2] = 10000 // now one processor does as much
	procs := d.run(1.0, d.p.MaxBackoff+3*d.p.Trial)
	if procs[len(procs)-1] != 1 {
		t.Fatalf("still on %d processors", d.proc.procs)
	}
}

// TestRunTakesWork: Run's loop uses the work count it is handed: a busy process that does the
// same work on one processor tries it and stays there.
func TestRunTakesWork(t *testing.T) {
	proc := &liveProcess{scriptedProcess: scriptedProcess{procs: 2, defaults: 2}}
	p := Defaults()
	now := time.Unix(1000, 0)
	pc := newPacer(p, proc, now)
	tick := make(chan time.Time)
	work := make(chan Load, 1)
	var done atomic.Uint64
	work <- Load{Work: done.Load}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		run(ctx, pc, tick, work)
	}()
	for range 100 { // 10 s busy, with the same work on either setting
		now = now.Add(p.Interval)
		proc.usedNS.Add(int64(p.Interval))
		done.Add(1000)
		tick <- now
		tick <- now // taken once the sample above is done; one at the same instant reads only the CPU time
	}
	cancel()
	<-stopped
	if proc.procs != 1 || len(proc.changes) == 0 {
		t.Fatalf("on %d processors after changes %v; want one after a trial", proc.procs, proc.changes)
	}
}

// liveProcess is a scriptedProcess whose CPU time the test advances while the pacer's loop runs.
type liveProcess struct {
	scriptedProcess
	usedNS atomic.Int64
}

func (l *liveProcess) cpu() time.Duration { return time.Duration(l.usedNS.Load()) }

// TestTrialWeighsTheTail: one processor that does the same work with a 99th percentile twice
// the default's is not kept; one whose tail is no longer is; and the default is kept over one
// processor when it shortens the tail that much, though it does no more work.
func TestTrialWeighsTheTail(t *testing.T) {
	d := newWorkDriver(t, 20000, 20000).withLatency(4000, 2000)
	if procs := d.run(1.0, 5*time.Minute); share(procs, 2) < 0.95 {
		t.Fatalf("on the default %.1f%% of the time with a tail twice as long on one, want 95%%", 100*share(procs, 2))
	}
	d = newWorkDriver(t, 20000, 20000).withLatency(2100, 2000)
	if procs := d.run(1.0, 5*time.Minute); share(procs, 1) < 0.95 {
		t.Fatalf("on one processor %.1f%% of the time with the same work and tail, want 95%%", 100*share(procs, 1))
	}
	d = newWorkDriver(t, 20000, 20000).withLatency(4000, 2000)
	d.run(0.1, 3*time.Second) // light: one processor
	d.expect(1, 1)
	if procs := d.run(1.0, 5*time.Minute); share(procs, 2) < 0.95 {
		t.Fatalf("on the default %.1f%% of the time after a light start, want 95%%", 100*share(procs, 2))
	}
}

// TestSnapshotSince: the latencies between two running totals.
func TestSnapshotSince(t *testing.T) {
	s := metric.NewSummary(metric.Millis)
	for range 50 {
		s.Observe(100)
	}
	before := s.Total()
	for range 99 {
		s.Observe(1000)
	}
	s.Observe(50000)
	w := s.Total().Since(before)
	if w.Count != 100 || w.Quantile(0.5) < 0.9 || w.Quantile(0.5) > 1.1 || w.Quantile(1) < 40 {
		t.Fatalf("window: count %d, p50 %v ms, max %v ms", w.Count, w.Quantile(0.5), w.Quantile(1))
	}
}

// TestGrowingHeapKeepsTheDefault: a busy process whose live heap grows is neither tried on one
// processor nor left there, though one would do the same work.
func TestGrowingHeapKeepsTheDefault(t *testing.T) {
	d := newWorkDriver(t, 20000, 20000)
	heap := float64(64 << 20)
	grow := 0.0 // per sample
	d.pc.heap = func() uint64 { heap *= 1 + grow; return uint64(heap) }
	grow = 0.01 // about 10% a second
	if procs := d.run(1.0, time.Minute); share(procs, 2) != 1 {
		t.Fatalf("on one processor %.1f%% of the time while the heap grows", 100*share(procs, 1))
	}
	grow = 0
	if procs := d.run(1.0, time.Minute); procs[len(procs)-1] != 1 {
		t.Fatalf("on %d processors once the heap is steady, want one", d.proc.procs)
	}
	grow = 0.01
	if procs := d.run(1.0, 2*d.p.Trial); procs[len(procs)-1] != 2 {
		t.Fatalf("still on one processor %v after the heap grew for 2 Trials", 2*d.p.Trial)
	}
}

// TestSmallHeapUpsAndDowns: a small heap's swings of a few MiB do not count as growth.
func TestSmallHeapUpsAndDowns(t *testing.T) {
	d := newWorkDriver(t, 20000, 20000)
	i := 0
	d.pc.heap = func() uint64 { i++; return uint64(2<<20 + (i%7)<<19) } // 2 to 5 MiB
	if procs := d.run(1.0, time.Minute); procs[len(procs)-1] != 1 {
		t.Fatalf("on %d processors: a small heap's swings counted as growth", d.proc.procs)
	}
}
