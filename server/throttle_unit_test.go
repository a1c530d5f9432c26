package server

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newTestConnThrottle(cfg Config, clk *fakeClock, rnd func() float64) *connThrottle {
	cfg = cfg.withDefaults()
	return newConnThrottle(&cfg, clk.now, rnd)
}

// The bucket lets through as many sessions as it holds tokens, refuses the next, and refills
// fill_count tokens per whole fill_time that passed, as BlueThrottle does.
func TestConnThrottleBucket(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	thr := newTestConnThrottle(Config{ConnThrottleTokens: 3, ConnThrottleFillTime: time.Second, ConnThrottleFillCount: 2}, clk, nil)
	for i := range 3 {
		if !thr.allow(thr.weight(false)) {
			t.Fatalf("session %d refused with tokens left", i+1)
		}
		if got := thr.deficit(); got != i+1 {
			t.Fatalf("deficit after %d sessions = %d; want %d", i+1, got, i+1)
		}
	}
	if thr.allow(1) {
		t.Fatal("fourth session let through an empty bucket")
	}
	clk.advance(time.Second) // not more than fill_time: no refill yet (ZooKeeper wants diff > fillTime)
	if thr.allow(1) {
		t.Fatal("refilled after exactly fill_time; ZooKeeper refills only once more than it passed")
	}
	clk.advance(time.Millisecond) // 1001ms since the last fill: 1001*2/1000 = 2 tokens
	if got := thr.deficit(); got != 3 {
		t.Fatalf("deficit before the refill is looked at = %d; want 3", got)
	}
	for i := range 2 {
		if !thr.allow(1) {
			t.Fatalf("refilled session %d refused", i+1)
		}
	}
	if thr.allow(1) {
		t.Fatal("more sessions let through than the refill gave tokens for")
	}
	clk.advance(time.Hour) // the bucket caps at its size
	if got := thr.deficit(); got != 3 {
		t.Fatalf("deficit = %d; want 3 until a session looks", got)
	}
	thr.allow(1)
	if got := thr.deficit(); got != 1 {
		t.Fatalf("deficit after a long pause and one session = %d; want 1 (capped at 3 tokens)", got)
	}
	if thr.dropChance() != 0 {
		t.Fatalf("drop probability %v without a freeze time; want 0", thr.dropChance())
	}
}

// Zero tokens turns the throttle off: everything passes and the deficit stays 0.
func TestConnThrottleOff(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	thr := newTestConnThrottle(Config{}, clk, func() float64 { return 0 })
	for range 1000 {
		if !thr.allow(thr.weight(true)) {
			t.Fatal("refused with throttling off")
		}
	}
	if thr.deficit() != 0 {
		t.Fatalf("deficit %d with throttling off", thr.deficit())
	}
}

// With weights on, the configured tokens count new sessions: the bucket holds the global weight
// times as many, a new session draws the global weight and a reconnect the renew weight.
func TestConnThrottleWeights(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	thr := newTestConnThrottle(Config{ConnThrottleTokens: 2, ConnThrottleFillTime: time.Hour, ConnThrottleWeightEnabled: true}, clk, nil)
	if thr.maxTokens != 6 || thr.weight(false) != 3 || thr.weight(true) != 2 {
		t.Fatalf("bucket %d, new %d, renew %d; want 6, 3, 2", thr.maxTokens, thr.weight(false), thr.weight(true))
	}
	if !thr.allow(thr.weight(false)) || !thr.allow(thr.weight(true)) {
		t.Fatal("refused within the bucket")
	}
	if thr.allow(thr.weight(false)) {
		t.Fatal("a new session (3 tokens) let through with 1 left")
	}
	if !thr.allow(1) {
		t.Fatal("1 token refused with 1 left")
	}
	// ZooKeeper raises a global or renew weight below the local one to it.
	w := (&Config{ConnThrottleGlobalSessionWeight: 1, ConnThrottleLocalSessionWeight: 4, ConnThrottleRenewSessionWeight: 2}).connThrottleWeights()
	if w.global != 4 || w.renew != 4 || w.local != 4 {
		t.Fatalf("weights %+v; want all 4", w)
	}
}

// The random early drop: each freeze period that finds the bucket empty raises the drop
// probability by drop_increase, each that finds it within decrease_ratio of full lowers it by
// drop_decrease, and a session is refused when the random draw falls under it, tokens or not.
func TestConnThrottleRandomDrop(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	draw := 0.0
	thr := newTestConnThrottle(Config{
		ConnThrottleTokens: 2, ConnThrottleFillTime: 10 * time.Second, ConnThrottleFillCount: 2,
		ConnThrottleFreezeTime: 100 * time.Millisecond, ConnThrottleDropIncrease: 0.25, ConnThrottleDropDecrease: 0.1,
	}, clk, func() float64 { return draw })
	draw = 0.5
	for i := range 2 {
		if !thr.allow(1) {
			t.Fatalf("session %d refused with tokens and no drop probability", i+1)
		}
	}
	clk.advance(100 * time.Millisecond)
	thr.allow(1) // not past the freeze period: no adjustment
	if thr.dropChance() != 0 {
		t.Fatalf("drop %v before a freeze period passed; want 0", thr.dropChance())
	}
	for i := 1; i <= 5; i++ {
		clk.advance(101 * time.Millisecond)
		thr.allow(1)
		want := min(0.25*float64(i), 1)
		if got := thr.dropChance(); got != want {
			t.Fatalf("drop after %d empty periods = %v; want %v", i, got, want)
		}
	}
	clk.advance(10*time.Second + time.Millisecond) // the bucket refills
	// This period finds the bucket full: the probability falls to 0.9 before the draw.
	draw = 0.85
	if thr.allow(1) {
		t.Fatal("a draw of 0.85 passed a drop probability of 0.9")
	}
	if got := thr.dropChance(); got != 0.9 {
		t.Fatalf("drop after a period with a full bucket = %v; want 0.9", got)
	}
	draw = 0.95 // above the probability: the bucket decides
	if !thr.allow(1) {
		t.Fatal("refused with tokens and a draw above the drop probability")
	}
	if thr.deficit() != 1 {
		t.Fatalf("deficit %d; want 1", thr.deficit())
	}
}

// newTestGate returns a gate and its counters of waits and drops.
func newTestGate(cfg Config) (*requestGate, *atomic.Int64, *atomic.Int64) {
	cfg = cfg.withDefaults()
	var waits, drops atomic.Int64
	g := newRequestGate(&cfg, func() { waits.Add(1) }, func() { drops.Add(1) })
	return g, &waits, &drops
}

func never(bool) bool { return false }
func nothing()        {}

// The request throttler lets max requests into process and stalls the next, counting one wait
// per stall period, until a request finishes; the clock is synctest's.
func TestRequestGateStalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, waits, drops := newTestGate(Config{RequestThrottleMaxRequests: 2, RequestThrottleStallTime: 100 * time.Millisecond})
		stop := make(chan struct{})
		for range 2 {
			if !g.acquire(never, nothing, stop) {
				t.Fatal("refused under the limit")
			}
		}
		if waits.Load() != 0 {
			t.Fatalf("%d waits under the limit", waits.Load())
		}
		var waited atomic.Bool
		done := make(chan bool)
		go func() { done <- g.acquire(never, func() { waited.Store(true) }, stop) }()
		synctest.Wait()
		if !waited.Load() || waits.Load() != 1 || g.stalled.Load() != 1 {
			t.Fatalf("third request: waiting %v, waits %d, stalled %d; want a stall", waited.Load(), waits.Load(), g.stalled.Load())
		}
		time.Sleep(250 * time.Millisecond) // synctest's clock: looks again at 100ms and 200ms
		synctest.Wait()
		if waits.Load() != 3 {
			t.Fatalf("waits after 250ms = %d; want 3 (one per stall time)", waits.Load())
		}
		start := time.Now()
		g.release()
		if !<-done {
			t.Fatal("stalled request refused")
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("woken %v after a release; want at once", d)
		}
		if g.inProcess.Load() != 2 || g.stalled.Load() != 0 || drops.Load() != 0 {
			t.Fatalf("in process %d, stalled %d, dropped %d; want 2, 0, 0", g.inProcess.Load(), g.stalled.Load(), drops.Load())
		}
	})
}

// A request whose connection goes while it is stalled is dropped (and counted) when
// request_throttle_drop_stale is on, and admitted in its turn when it is off.
func TestRequestGateDropsStale(t *testing.T) {
	for _, keep := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			g, _, drops := newTestGate(Config{RequestThrottleMaxRequests: 1, RequestThrottleKeepStale: keep})
			stop := make(chan struct{})
			g.acquire(never, nothing, stop)
			var gone atomic.Bool
			probed := make(chan bool, 10)
			done := make(chan bool)
			go func() {
				done <- g.acquire(func(probe bool) bool { probed <- probe; return gone.Load() }, nothing, stop)
			}()
			synctest.Wait()
			gone.Store(true)
			time.Sleep(100 * time.Millisecond) // the default stall time
			synctest.Wait()
			if keep {
				select {
				case <-done:
					t.Fatal("with drop_stale off, a stale request left the throttler before a slot was free")
				default:
				}
				g.release()
				if !<-done {
					t.Fatal("with drop_stale off, the stale request was refused")
				}
				if drops.Load() != 0 || len(probed) != 0 {
					t.Fatalf("with drop_stale off: %d dropped, %d staleness checks; want none", drops.Load(), len(probed))
				}
				return
			}
			if <-done {
				t.Fatal("a stale request was admitted")
			}
			if drops.Load() != 1 || g.inProcess.Load() != 1 {
				t.Fatalf("dropped %d, in process %d; want 1, 1", drops.Load(), g.inProcess.Load())
			}
			if first := <-probed; first {
				t.Fatal("the first staleness check probed the socket; the fast path must not")
			}
		})
	}
}

// Over the global outstanding limit, a reader whose connection has a request unanswered waits
// until the server is back under it, or until its own requests are answered; one with nothing
// unanswered goes on.
func TestRequestGateGlobalLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, _, _ := newTestGate(Config{GlobalOutstandingLimit: 2})
		stop := make(chan struct{})
		for range 3 {
			g.acquire(never, nothing, stop)
		}
		if !g.over() {
			t.Fatal("3 in process is not over a limit of 2")
		}
		if !g.pause(func() bool { return false }, nil, stop) {
			t.Fatal("a connection with nothing unanswered was held")
		}
		var mine atomic.Bool
		mine.Store(true)
		answered := make(chan struct{}, 1)
		done := make(chan bool)
		go func() { done <- g.pause(mine.Load, answered, stop) }()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("not held over the limit")
		default:
		}
		g.release() // 2 in process: back under the limit
		if !<-done {
			t.Fatal("held reader refused")
		}
		g.acquire(never, nothing, stop) // over again
		go func() { done <- g.pause(mine.Load, answered, stop) }()
		synctest.Wait()
		mine.Store(false)
		answered <- struct{}{}
		if !<-done {
			t.Fatal("reader whose requests were answered refused")
		}
		go func() { done <- g.pause(func() bool { return true }, answered, stop) }()
		synctest.Wait()
		close(stop)
		if <-done {
			t.Fatal("pause did not report the stop")
		}
	})
}

// Large requests count against largeRequestMaxBytes while in process: a frame over the
// threshold that would go over is refused, and what is given back is taken again.
func TestRequestGateLargeRequests(t *testing.T) {
	g, _, _ := newTestGate(Config{LargeRequestThreshold: 100, LargeRequestMaxBytes: 300})
	if n, ok := g.takeLarge(100); !ok || n != 0 {
		t.Fatalf("a frame at the threshold: %d, %v; want not counted", n, ok)
	}
	if n, ok := g.takeLarge(105); !ok || n != 0 {
		t.Fatalf("a frame whose body is under the threshold: %d, %v; want let through, not counted", n, ok)
	}
	a, ok := g.takeLarge(158)
	if !ok || a != 150 {
		t.Fatalf("first large frame: %d, %v; want 150 bytes counted", a, ok)
	}
	if _, ok := g.takeLarge(151); ok {
		t.Fatal("150 + 151 bytes let through a maximum of 300")
	}
	b, ok := g.takeLarge(150)
	if !ok || b != 142 || g.largeBytes.Load() != 292 {
		t.Fatalf("second large frame: %d, %v, total %d; want 142 counted, 292 in all", b, ok, g.largeBytes.Load())
	}
	g.largeBytes.Add(-a)
	if _, ok := g.takeLarge(158); !ok {
		t.Fatal("refused after bytes were given back")
	}
	off, _, _ := newTestGate(Config{})
	if n, ok := off.takeLarge(1 << 20); !ok || n != 0 {
		t.Fatalf("threshold off: %d, %v; want let through, not counted", n, ok)
	}
}
