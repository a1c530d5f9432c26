package main

import (
	"math"
	"math/bits"
	"time"
)

// histSubBits sets the histogram's precision: each power-of-two range of values is split into
// 2^histSubBits equal buckets, so a recorded value is known to within 1/256 (0.4%) of itself.
const histSubBits = 8

const (
	histSubCount = 1 << histSubBits
	// histBuckets covers every non-negative int64: the linear range [0, 256) plus one group of
	// 256 buckets for each further power of two up to 2^63.
	histBuckets = (64 - histSubBits) * histSubCount
)

// histogram is a log-linear latency histogram in the manner of HdrHistogram: values (nanoseconds)
// below 256 are counted exactly and larger ones in buckets no wider than 1/256 of their value.
// Min, max, count and sum are kept exactly. A histogram is not safe for concurrent use.
type histogram struct {
	counts []uint64
	count  uint64
	sum    float64
	min    int64
	max    int64
}

func newHistogram() *histogram {
	return &histogram{counts: make([]uint64, histBuckets), min: math.MaxInt64}
}

// bucketOf returns the bucket index of v (negative values count as zero).
func bucketOf(v int64) int {
	if v < histSubCount {
		return int(max(v, 0))
	}
	shift := bits.Len64(uint64(v)) - 1 - histSubBits
	mantissa := int(uint64(v) >> uint(shift)) // in [256, 512)
	return (shift+1)*histSubCount + mantissa - histSubCount
}

// bucketRange returns the smallest and largest values that fall into bucket i.
func bucketRange(i int) (lo, hi int64) {
	if i < histSubCount {
		return int64(i), int64(i)
	}
	shift := uint(i/histSubCount - 1)
	mantissa := int64(i%histSubCount + histSubCount)
	lo = mantissa << shift
	hi = lo + (int64(1) << shift) - 1
	return lo, hi
}

// record adds one value.
func (h *histogram) record(v int64) {
	v = max(v, 0)
	h.counts[bucketOf(v)]++
	h.count++
	h.sum += float64(v)
	h.min = min(h.min, v)
	h.max = max(h.max, v)
}

// merge adds every recording of o.
func (h *histogram) merge(o *histogram) {
	if o.count == 0 {
		return
	}
	for i, n := range o.counts {
		h.counts[i] += n
	}
	h.count += o.count
	h.sum += o.sum
	h.min = min(h.min, o.min)
	h.max = max(h.max, o.max)
}

// recordDuration adds one duration.
func (h *histogram) recordDuration(d time.Duration) { h.record(int64(d)) }

// quantile returns the value at quantile q in [0, 1]: the value of the ceil(q·count)-th smallest
// recording, as the midpoint of its bucket clamped to the exact min and max. An empty histogram
// gives 0.
func (h *histogram) quantile(q float64) int64 {
	if h.count == 0 {
		return 0
	}
	q = min(max(q, 0), 1)
	rank := uint64(math.Ceil(q * float64(h.count)))
	rank = max(rank, 1)
	if rank >= h.count {
		return h.max
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, hi := bucketRange(i)
			v := lo + (hi-lo)/2
			return min(max(v, h.min), h.max)
		}
	}
	return h.max
}

// mean returns the arithmetic mean, or 0 when empty.
func (h *histogram) mean() float64 {
	if h.count == 0 {
		return 0
	}
	return h.sum / float64(h.count)
}

// latencySummary is a histogram's summary as reported, in microseconds.
type latencySummary struct {
	Count uint64  `json:"count"`
	Min   float64 `json:"min_us"`
	Mean  float64 `json:"mean_us"`
	P50   float64 `json:"p50_us"`
	P90   float64 `json:"p90_us"`
	P99   float64 `json:"p99_us"`
	P999  float64 `json:"p999_us"`
	Max   float64 `json:"max_us"`
}

// summary returns the percentiles of h in microseconds.
func (h *histogram) summary() latencySummary {
	us := func(ns int64) float64 { return math.Round(float64(ns)/10) / 100 }
	if h.count == 0 {
		return latencySummary{}
	}
	return latencySummary{
		Count: h.count,
		Min:   us(h.min),
		Mean:  math.Round(h.mean()/10) / 100,
		P50:   us(h.quantile(0.50)),
		P90:   us(h.quantile(0.90)),
		P99:   us(h.quantile(0.99)),
		P999:  us(h.quantile(0.999)),
		Max:   us(h.max),
	}
}
