// Package metric holds the measurements a zkd server keeps about itself: counters and
// ZooKeeper-style summaries that the server and consensus update where the work happens, with a
// few atomic operations and no locks, and that the server's monitoring views read. Those views
// are the mntr four-letter word (ZooKeeper's key names and formats) and /metrics (Prometheus);
// both read the same Counter and Summary values, so they never disagree about what was measured.
//
// ZooKeeper's srst resets its figures. Prometheus counters must never go down, so a reset here
// only moves a baseline: SinceReset and Summary.SinceReset (what mntr shows) count from it, while
// Total and Summary.Total (what /metrics exports) keep counting from the start.
//
// Everything in this package is safe for concurrent use.
package metric

import (
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// Counter counts events.
type Counter struct {
	v, base atomic.Int64
}

// Add adds n (n >= 0).
func (c *Counter) Add(n int64) { c.v.Add(n) }

// Inc adds one.
func (c *Counter) Inc() { c.v.Add(1) }

// Total is the count since the counter was made.
func (c *Counter) Total() int64 { return c.v.Load() }

// SinceReset is the count since the last Reset.
func (c *Counter) SinceReset() int64 { return c.v.Load() - c.base.Load() }

// Reset starts SinceReset from zero again; Total is unchanged.
func (c *Counter) Reset() { c.base.Store(c.v.Load()) }

// Unit says what a Summary's values are.
type Unit uint8

const (
	// Millis is a duration. It is observed with ObserveDuration, kept in microseconds and shown
	// in milliseconds, ZooKeeper's unit for every time it reports.
	Millis Unit = iota
	// Count is a plain number (entries per fsync, watches per event, bytes).
	Count
)

// Buckets: a Summary counts its values in buckets whose upper bounds are 0, 1, 2, 3, 4, then four
// per power of two (5, 6, 7, 8, 10, 12, 14, 16, 20, ...), up to 2^36 (about 19 hours in
// microseconds), and a last bucket for anything larger. Finding a value's bucket is a few bit
// operations. Percentiles are estimated inside a bucket, so they are within a quarter of an
// octave of the true value (and are clamped to the observed minimum and maximum).
const (
	subBits    = 2
	subBuckets = 1 << subBits
	maxExp     = 35
	// bucket 0 holds 0; 1..4 hold 1..4; then subBuckets per exponent 2..maxExp; then overflow.
	numBuckets = 1 + subBuckets + (maxExp-1)*subBuckets + 1
	overflow   = numBuckets - 1
)

// bucketOf returns the index of the bucket that holds v.
func bucketOf(v uint64) int {
	if v == 0 {
		return 0
	}
	u := v - 1
	if u < subBuckets {
		return 1 + int(u)
	}
	e := bits.Len64(u) - 1
	if e > maxExp {
		return overflow
	}
	m := int(u>>(e-subBits)) & (subBuckets - 1)
	return 1 + subBuckets + (e-subBits)*subBuckets + m
}

// upperBound returns the largest value bucket i holds (+Inf for the overflow bucket).
func upperBound(i int) float64 {
	switch {
	case i == 0:
		return 0
	case i <= subBuckets:
		return float64(i)
	case i == overflow:
		return math.Inf(1)
	}
	j := i - 1 - subBuckets
	e := subBits + j/subBuckets
	m := j % subBuckets
	return float64(uint64(1)<<e + uint64(m+1)<<(e-subBits))
}

// Summary records a quantity the way ZooKeeper's summaries report it: count, sum, minimum,
// maximum and percentiles. Observing takes a handful of atomic operations.
type Summary struct {
	unit    Unit
	sum     atomic.Uint64 // in microseconds for Millis; the count is the buckets' total
	min     atomic.Uint64 // the smallest value since the last reset, plus one; 0: none
	max     atomic.Uint64 // the largest value since the last reset
	buckets [numBuckets]atomic.Uint64

	baseMu sync.Mutex
	base   Snapshot // the totals at the last reset
}

// NewSummary returns an empty Summary of values in unit.
func NewSummary(unit Unit) *Summary { return &Summary{unit: unit} }

// Unit returns the unit of the values.
func (s *Summary) Unit() Unit { return s.unit }

// Observe records v (for Millis, in microseconds).
func (s *Summary) Observe(v uint64) {
	s.sum.Add(v)
	s.buckets[bucketOf(v)].Add(1)
	for {
		cur := s.min.Load()
		if cur != 0 && cur <= v+1 || s.min.CompareAndSwap(cur, v+1) {
			break
		}
	}
	for {
		cur := s.max.Load()
		if cur >= v || s.max.CompareAndSwap(cur, v) {
			break
		}
	}
}

// ObserveDuration records d; a negative d counts as zero.
func (s *Summary) ObserveDuration(d time.Duration) {
	s.Observe(uint64(max(d.Microseconds(), 0)))
}

// Reset starts the figures SinceReset reports from zero; Total is unchanged.
func (s *Summary) Reset() {
	s.baseMu.Lock()
	defer s.baseMu.Unlock()
	s.base = s.total()
	s.min.Store(0)
	s.max.Store(0)
}

// Total returns every value observed since the Summary was made. It has no minimum or maximum.
func (s *Summary) Total() Snapshot { return s.total() }

func (s *Summary) total() Snapshot {
	t := Snapshot{unit: s.unit, Buckets: make([]uint64, numBuckets)}
	for i := range s.buckets {
		t.Buckets[i] = s.buckets[i].Load()
		t.Count += t.Buckets[i]
	}
	t.Sum = s.sum.Load()
	return t
}

// SinceReset returns the values observed since the last Reset, with their minimum and maximum.
func (s *Summary) SinceReset() Snapshot {
	t := s.total()
	s.baseMu.Lock()
	b := s.base
	s.baseMu.Unlock()
	if b.Buckets != nil {
		t.Count = 0
		for i := range t.Buckets {
			t.Buckets[i] -= min(b.Buckets[i], t.Buckets[i])
			t.Count += t.Buckets[i]
		}
		t.Sum -= min(b.Sum, t.Sum)
	}
	if m := s.min.Load(); m != 0 && t.Count > 0 {
		t.Min, t.Max, t.HasMinMax = m-1, s.max.Load(), true
	}
	return t
}

// Snapshot is a Summary's figures at one moment. Count, Sum, Min and Max are in the Summary's
// raw unit (microseconds for Millis); the methods convert to ZooKeeper's unit (milliseconds).
type Snapshot struct {
	unit      Unit
	Count     uint64
	Sum       uint64
	Min, Max  uint64
	HasMinMax bool
	// Buckets holds the count of each bucket (not cumulative).
	Buckets []uint64
}

// scale is the number of raw units in one shown unit.
func (t Snapshot) scale() float64 {
	if t.unit == Millis {
		return 1000
	}
	return 1
}

// SumValue returns the sum in the shown unit.
func (t Snapshot) SumValue() float64 { return float64(t.Sum) / t.scale() }

// Avg returns the mean in the shown unit, 0 with no values.
func (t Snapshot) Avg() float64 {
	if t.Count == 0 {
		return 0
	}
	return t.SumValue() / float64(t.Count)
}

// MinValue and MaxValue return the minimum and maximum in the shown unit, 0 without them.
func (t Snapshot) MinValue() float64 { return float64(t.Min) / t.scale() }

// MaxValue returns the maximum in the shown unit (see MinValue).
func (t Snapshot) MaxValue() float64 { return float64(t.Max) / t.scale() }

// Quantile estimates the q-quantile (0 < q <= 1) in the shown unit, 0 with no values. Inside the
// bucket that holds it the estimate is interpolated linearly; it is kept within the minimum and
// maximum when the snapshot has them.
func (t Snapshot) Quantile(q float64) float64 {
	if t.Count == 0 {
		return 0
	}
	rank := math.Max(1, math.Ceil(q*float64(t.Count)))
	var cum float64
	v := 0.0
	for i, n := range t.Buckets {
		if n == 0 {
			continue
		}
		if cum+float64(n) < rank {
			cum += float64(n)
			continue
		}
		hi := upperBound(i)
		lo := 0.0
		if i > 0 {
			lo = upperBound(i - 1)
		}
		if math.IsInf(hi, 1) {
			v = lo
			if t.HasMinMax {
				v = float64(t.Max)
			}
			break
		}
		v = lo + (hi-lo)*(rank-cum)/float64(n)
		break
	}
	if t.HasMinMax {
		v = math.Min(math.Max(v, float64(t.Min)), float64(t.Max))
	}
	return v / t.scale()
}

// Since returns the values observed between the running totals b and t (both from Total of one
// Summary, b the earlier). It has no minimum or maximum.
func (t Snapshot) Since(b Snapshot) Snapshot {
	out := Snapshot{unit: t.unit, Buckets: make([]uint64, len(t.Buckets))}
	for i, n := range t.Buckets {
		if i < len(b.Buckets) {
			n -= min(n, b.Buckets[i])
		}
		out.Buckets[i] = n
		out.Count += n
	}
	out.Sum = t.Sum - min(t.Sum, b.Sum)
	return out
}

// Merge returns the figures of a and b together (both of the same unit).
func Merge(a, b Snapshot) Snapshot {
	out := Snapshot{unit: a.unit, Count: a.Count + b.Count, Sum: a.Sum + b.Sum, Buckets: make([]uint64, numBuckets)}
	for i := range out.Buckets {
		if i < len(a.Buckets) {
			out.Buckets[i] += a.Buckets[i]
		}
		if i < len(b.Buckets) {
			out.Buckets[i] += b.Buckets[i]
		}
	}
	switch {
	case a.HasMinMax && b.HasMinMax:
		out.Min, out.Max, out.HasMinMax = min(a.Min, b.Min), max(a.Max, b.Max), true
	case a.HasMinMax:
		out.Min, out.Max, out.HasMinMax = a.Min, a.Max, true
	case b.HasMinMax:
		out.Min, out.Max, out.HasMinMax = b.Min, b.Max, true
	}
	return out
}

// Cumulative returns, for each bound (in the shown unit, ascending), the count of values at most
// that bound: a Prometheus histogram's buckets. Bounds should be bucket edges, as OctaveBounds
// returns; a bound inside a bucket counts only the buckets wholly below it.
func (t Snapshot) Cumulative(bounds []float64) []uint64 {
	out := make([]uint64, len(bounds))
	var cum uint64
	i := 0
	for k, b := range bounds {
		raw := b * t.scale()
		for i < len(t.Buckets) && upperBound(i) <= raw*(1+1e-12) {
			cum += t.Buckets[i]
			i++
		}
		out[k] = cum
	}
	return out
}

// OctaveBounds returns the bucket edges 2^from .. 2^to raw units (microseconds for Millis) in the
// shown unit, ascending: bounds for Cumulative.
func OctaveBounds(unit Unit, from, to int) []float64 {
	scale := 1.0
	if unit == Millis {
		scale = 1000
	}
	var out []float64
	for e := from; e <= to; e++ {
		out = append(out, float64(uint64(1)<<e)/scale)
	}
	return out
}

// Detail says which of ZooKeeper's figures a summary reports in mntr: Basic ones report avg, min,
// max, cnt and sum; Advanced ones also p50, p95, p99 and p999 (and quantiles in Prometheus).
type Detail uint8

const (
	// Basic is ZooKeeper's DetailLevel.BASIC.
	Basic Detail = iota
	// Advanced is ZooKeeper's DetailLevel.ADVANCED.
	Advanced
)

// Item is one named measurement of a Set: exactly one of Counter and Summary is set.
type Item struct {
	// Name is ZooKeeper's name for the figure: the mntr key without "zk_" (a summary's keys add
	// avg_, min_, ... before it) and, unless MntrOnly, the Prometheus name.
	Name string
	// Help says what is measured, for Prometheus.
	Help    string
	Counter *Counter
	Summary *Summary
	Detail  Detail
	// Histogram, when not empty, is the name of a Prometheus histogram (in seconds) that the
	// summary is exported as too, with zkd's own name.
	Histogram string
	// MntrOnly keeps the figure out of /metrics under Name (a name Prometheus' conventions
	// refuse, such as one ending in "_ms"); Histogram may still export it.
	MntrOnly bool
}

// Set is an ordered collection of named measurements, so that the views can list every one of
// them in a stable order. A part of the server makes its measurements through its Set.
type Set struct {
	mu    sync.Mutex
	items []Item
}

// Counter adds a counter named name and returns it.
func (s *Set) Counter(name, help string) *Counter {
	c := &Counter{}
	s.add(Item{Name: name, Help: help, Counter: c})
	return c
}

// Summary adds a summary named name and returns it.
func (s *Set) Summary(name, help string, unit Unit, d Detail) *Summary {
	return s.Add(Item{Name: name, Help: help, Summary: NewSummary(unit), Detail: d})
}

// Add adds the measurement it describes (it.Counter or it.Summary must be set) and returns its
// summary (nil for a counter).
func (s *Set) Add(it Item) *Summary {
	s.add(it)
	return it.Summary
}

func (s *Set) add(it Item) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.items = append(s.items, it)
}

// Items returns the measurements in the order they were added.
func (s *Set) Items() []Item {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Item(nil), s.items...)
}

// Reset resets every counter and summary of the set (ZooKeeper's srst).
func (s *Set) Reset() {
	for _, it := range s.Items() {
		if it.Counter != nil {
			it.Counter.Reset()
		}
		if it.Summary != nil {
			it.Summary.Reset()
		}
	}
}
