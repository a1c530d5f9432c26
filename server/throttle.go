package server

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// This file holds the server-wide overload controls ZooKeeper 3.6+ has, under its names:
//
//   - the request throttler (zookeeper.request_throttle_*): at most Config.RequestThrottleMaxRequests
//     requests in process server-wide; a reader whose next request finds none free waits
//     (request_throttle_wait_count counts each wait of up to the stall time), and a request whose
//     connection has gone meanwhile is dropped instead of handled (stale_requests_dropped);
//   - the global outstanding limit (globalOutstandingLimit): once more requests than that are in
//     process or waiting, a connection with a request of its own still unanswered is not read
//     until it has none or the server is back under the limit;
//   - connection throttling (zookeeper.connection_throttle_*, ZooKeeper's BlueThrottle): a token
//     bucket, with an optional random early drop, that new sessions must pass.
//
// Neither answers a request with an error: requests wait, and refused connections close.

// requestGate counts the requests in process server-wide and applies the request throttler
// and the global outstanding limit to the readers that admit them. Readers call acquire before
// handing a request on and release once it is answered (or never will be).
type requestGate struct {
	max       int64         // request_throttle_max_requests; 0: no throttling
	stall     time.Duration // request_throttle_stall_time
	dropStale bool          // request_throttle_drop_stale
	limit     int64         // globalOutstandingLimit; 0: none

	inProcess atomic.Int64 // admitted and not yet answered
	stalled   atomic.Int64 // readers waiting in the throttler (ZooKeeper's throttler queue)
	// wake has a token when a slot was freed while readers stalled; the reader that takes it
	// hands it on if it leaves a slot free (ZooKeeper's throttler wakes one waiter too).
	wake chan struct{}

	// Readers paused for the global limit wait on under, closed (and replaced) when the server
	// drops back under the limit while paused > 0.
	paused  atomic.Int32
	underMu sync.Mutex
	under   chan struct{}

	waits, dropped func() // metric hooks: a stall, a stale request dropped

	// Large requests (largeRequestThreshold, largeRequestMaxBytes): the bytes of those in process.
	largeThreshold, largeMax int64
	largeBytes               atomic.Int64
}

func newRequestGate(cfg *Config, waits, dropped func()) *requestGate {
	g := &requestGate{
		max:       int64(cfg.RequestThrottleMaxRequests),
		stall:     cfg.RequestThrottleStallTime,
		dropStale: !cfg.RequestThrottleKeepStale,
		limit:     int64(max(cfg.GlobalOutstandingLimit, 0)),
		wake:      make(chan struct{}, 1),
		under:     make(chan struct{}),
		waits:     waits,
		dropped:   dropped,

		largeThreshold: int64(cfg.LargeRequestThreshold),
		largeMax:       int64(cfg.LargeRequestMaxBytes),
	}
	return g
}

// tryTake takes a slot if fewer than max requests are in process.
func (g *requestGate) tryTake() bool {
	for {
		n := g.inProcess.Load()
		if n >= g.max {
			return false
		}
		if g.inProcess.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// acquire admits one request into process, waiting while the throttler is full. gone reports
// whether the request's connection has gone, as ZooKeeper's throttler asks before it admits a
// request and after every wait; probe asks it to look harder (for the client's end of stream),
// which is worth it only before a wait. waiting is called before the first wait; stop ends the
// wait. acquire reports false when the request must not be handled: its connection has gone
// (counted as dropped, with dropStale) or stop was closed.
func (g *requestGate) acquire(gone func(probe bool) bool, waiting func(), stop <-chan struct{}) bool {
	if g.max <= 0 {
		g.inProcess.Add(1)
		return true
	}
	if g.dropStale && gone(false) {
		g.dropped()
		return false
	}
	if g.tryTake() {
		return true
	}
	waiting()
	g.stalled.Add(1)
	defer func() {
		g.stalled.Add(-1)
		g.notifyUnder()
	}()
	t := time.NewTimer(g.stall)
	defer t.Stop()
	for {
		if g.dropStale && gone(true) {
			g.passWake()
			g.dropped()
			return false
		}
		if g.tryTake() {
			g.passWake()
			return true
		}
		g.waits()
		select {
		case <-g.wake:
		case <-t.C:
		case <-stop:
			return false
		}
		t.Reset(g.stall)
	}
}

// takeLarge counts a request frame of n bytes (its header included) against the large-request
// limit, as ZooKeeper does: a frame over the threshold is refused when it would take the large
// requests in process over the maximum; what is counted is the frame after its 8-byte header,
// when that is itself over the threshold. It returns the bytes to give back once the request is
// answered (0: none), and false when the request is refused.
func (g *requestGate) takeLarge(n int) (int64, bool) {
	size := int64(n)
	if g.largeThreshold <= 0 || size <= g.largeThreshold {
		return 0, true
	}
	if g.largeBytes.Load()+size > g.largeMax {
		return 0, false
	}
	body := size - 8
	if body <= g.largeThreshold {
		return 0, true
	}
	if g.largeBytes.Add(body) > g.largeMax {
		g.largeBytes.Add(-body)
		return 0, false
	}
	return body, true
}

// passWake hands a wake-up on to another stalled reader when a slot is still free.
func (g *requestGate) passWake() {
	if g.stalled.Load() > 1 && g.inProcess.Load() < g.max {
		select {
		case g.wake <- struct{}{}:
		default:
		}
	}
}

// release ends one request's time in process.
func (g *requestGate) release() {
	g.inProcess.Add(-1)
	if g.max > 0 && g.stalled.Load() > 0 {
		select {
		case g.wake <- struct{}{}:
		default:
		}
	}
	g.notifyUnder()
}

// over reports whether more requests than the global outstanding limit are in process or
// waiting to be (ZooKeeper's shouldThrottle, before it looks at the connection).
func (g *requestGate) over() bool {
	return g.limit > 0 && (g.inProcess.Load() > g.limit || g.stalled.Load() > g.limit)
}

// notifyUnder wakes the paused readers once the server is back under the global limit.
func (g *requestGate) notifyUnder() {
	if g.paused.Load() == 0 || g.over() {
		return
	}
	g.underMu.Lock()
	close(g.under)
	g.under = make(chan struct{})
	g.underMu.Unlock()
}

// pause holds a reader while the server is over the global outstanding limit and its
// connection has requests of its own unanswered (outstanding), as ZooKeeper stops selecting such a
// connection for reads. answered is signalled when one of them is answered; stop ends the wait.
// It reports false when stop was closed.
func (g *requestGate) pause(outstanding func() bool, answered, stop <-chan struct{}) bool {
	for g.over() && outstanding() {
		g.paused.Add(1)
		g.underMu.Lock()
		under := g.under
		g.underMu.Unlock()
		if !g.over() || !outstanding() {
			g.paused.Add(-1)
			return true
		}
		select {
		case <-under:
		case <-answered:
		case <-stop:
			g.paused.Add(-1)
			return false
		}
		g.paused.Add(-1)
	}
	return true
}

// connThrottle is ZooKeeper's BlueThrottle: a token bucket new sessions draw from, refilled with
// fillCount tokens every fillTime up to maxTokens, and, when freeze is positive, a random early
// drop whose probability rises by dropIncrease each freeze period the bucket is found empty and
// falls by dropDecrease each period it is found with a deficit of at most decreaseRatio of it.
// Times are compared in whole milliseconds, as ZooKeeper compares them.
type connThrottle struct {
	mu        sync.Mutex
	maxTokens int
	fillTime  int64 // ms
	fillCount int
	tokens    int
	lastFill  time.Time

	freeze       int64 // ms; <0: no random drop
	lastFreeze   time.Time
	dropIncrease float64
	dropDecrease float64
	decreaseAt   float64 // decrease_ratio
	drop         float64

	// weights of a new session and of a reconnecting one, when weighing is on (else 1 each)
	newWeight, renewWeight int

	now  func() time.Time
	rand func() float64
}

func newConnThrottle(cfg *Config, now func() time.Time, rnd func() float64) *connThrottle {
	t := &connThrottle{
		maxTokens:    cfg.ConnThrottleTokens,
		fillTime:     max(cfg.ConnThrottleFillTime.Milliseconds(), 1),
		fillCount:    cfg.ConnThrottleFillCount,
		freeze:       -1,
		dropIncrease: cfg.ConnThrottleDropIncrease,
		dropDecrease: cfg.ConnThrottleDropDecrease,
		decreaseAt:   cfg.ConnThrottleDecreaseRatio,
		newWeight:    1,
		renewWeight:  1,
		now:          now,
		rand:         rnd,
	}
	if cfg.ConnThrottleFreezeTime > 0 {
		t.freeze = cfg.ConnThrottleFreezeTime.Milliseconds()
	}
	if cfg.ConnThrottleWeightEnabled {
		// The configured tokens are counted in new sessions, as in ZooKeeper: the bucket holds
		// (and refills) the new-session weight times as many.
		w := cfg.connThrottleWeights()
		t.newWeight, t.renewWeight = w.global, w.renew
		t.maxTokens *= w.global
		t.fillCount *= w.global
	}
	if t.now == nil {
		t.now = time.Now
	}
	if t.rand == nil {
		t.rand = rand.Float64
	}
	t.tokens = t.maxTokens
	t.lastFill = t.now()
	t.lastFreeze = t.lastFill
	return t
}

// weight is the tokens a handshake needs: a new session's or a reconnecting one's.
func (t *connThrottle) weight(renew bool) int {
	if renew {
		return t.renewWeight
	}
	return t.newWeight
}

// allow draws need tokens for a new connection's session; false means the connection is refused.
func (t *connThrottle) allow(need int) bool {
	if t.maxTokens == 0 {
		return true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if diff := now.Sub(t.lastFill).Milliseconds(); diff > t.fillTime {
		refill := diff * int64(t.fillCount) / t.fillTime
		t.tokens = int(min(int64(t.tokens)+refill, int64(t.maxTokens)))
		t.lastFill = now
	}
	if t.freeze >= 0 && !t.blueAllows(now) {
		return false
	}
	if t.tokens < need {
		return false
	}
	t.tokens -= need
	return true
}

// blueAllows adjusts the drop probability once per freeze period and draws against it.
func (t *connThrottle) blueAllows(now time.Time) bool {
	deficit := t.maxTokens - t.tokens
	if now.Sub(t.lastFreeze).Milliseconds() > t.freeze {
		threshold := int(float64(t.maxTokens)*t.decreaseAt + 0.5)
		switch {
		case deficit == t.maxTokens && t.drop < 1:
			t.drop = min(t.drop+t.dropIncrease, 1)
		case deficit <= threshold && t.drop > 0:
			t.drop = max(t.drop-t.dropDecrease, 0)
		}
		t.lastFreeze = now
	}
	return !(t.rand() < t.drop)
}

// deficit is how many tokens the bucket lacks.
func (t *connThrottle) deficit() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.maxTokens - t.tokens
}

// dropChance is the current probability of a random early drop.
func (t *connThrottle) dropChance() float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.drop
}
