package procpace

import (
	"context"
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"
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
		run(ctx, pc, tick)
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
