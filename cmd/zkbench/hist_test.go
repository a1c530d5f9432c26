package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// exactQuantile is the reference: the ceil(q·n)-th smallest value.
func exactQuantile(sorted []int64, q float64) int64 {
	rank := max(int(math.Ceil(q*float64(len(sorted)))), 1)
	return sorted[rank-1]
}

func TestHistogramQuantilesMatchExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	dists := map[string]func() int64{
		"uniform-small": func() int64 { return rng.Int64N(200) },
		"uniform-wide":  func() int64 { return rng.Int64N(1e9) },
		"lognormal":     func() int64 { return int64(math.Exp(rng.NormFloat64()*1.5 + 12)) },
		"bimodal": func() int64 {
			if rng.IntN(100) < 2 {
				return 50e6 + rng.Int64N(1e6)
			}
			return 200e3 + rng.Int64N(50e3)
		},
	}
	for name, gen := range dists {
		t.Run(name, func(t *testing.T) {
			h := newHistogram()
			vals := make([]int64, 100_000)
			for i := range vals {
				vals[i] = gen()
				h.record(vals[i])
			}
			slices.Sort(vals)
			for _, q := range []float64{0, 0.001, 0.5, 0.9, 0.99, 0.999, 0.9999, 1} {
				got, want := h.quantile(q), exactQuantile(vals, q)
				// A bucket is at most 1/256 of its values wide, and the midpoint is reported.
				tol := float64(want)/256 + 1
				if math.Abs(float64(got-want)) > tol {
					t.Errorf("q=%v: got %d, exact %d (tolerance %.1f)", q, got, want, tol)
				}
			}
			if h.max != vals[len(vals)-1] || h.min != vals[0] {
				t.Errorf("min/max = %d/%d, want %d/%d", h.min, h.max, vals[0], vals[len(vals)-1])
			}
			if h.quantile(1) != h.max {
				t.Errorf("quantile(1) = %d, want the exact max %d", h.quantile(1), h.max)
			}
		})
	}
}

func TestHistogramBucketsCoverEveryValue(t *testing.T) {
	prevHi := int64(-1)
	for i := range histBuckets {
		lo, hi := bucketRange(i)
		if lo != prevHi+1 {
			t.Fatalf("bucket %d starts at %d, previous ended at %d", i, lo, prevHi)
		}
		if bucketOf(lo) != i || bucketOf(hi) != i {
			t.Fatalf("bucket %d = [%d, %d] but bucketOf gives %d and %d", i, lo, hi, bucketOf(lo), bucketOf(hi))
		}
		if lo >= histSubCount && float64(hi-lo+1) > float64(lo)/histSubCount+1 {
			t.Fatalf("bucket %d = [%d, %d] is wider than 1/%d of its values", i, lo, hi, histSubCount)
		}
		if hi == math.MaxInt64 {
			if i != histBuckets-1 {
				t.Fatalf("max int64 reached at bucket %d of %d", i, histBuckets)
			}
			return
		}
		prevHi = hi
	}
	t.Fatalf("buckets end at %d, before max int64", prevHi)
}

func TestHistogramEmptyAndSummary(t *testing.T) {
	var empty = newHistogram()
	if empty.quantile(0.5) != 0 || empty.mean() != 0 || empty.summary() != (latencySummary{}) {
		t.Fatalf("empty histogram reports values")
	}
	all := newHistogram()
	for v := int64(1); v <= 1000; v++ {
		all.record(v * 1000)
	}
	s := all.summary()
	if s.P50 < 495 || s.P50 > 505 || s.Max != 1000 || s.Min != 1 {
		t.Errorf("summary in microseconds = %+v, want p50 about 500, min 1, max 1000", s)
	}
	all.record(-5) // a clock step backwards must not break anything
	if all.min != 0 {
		t.Errorf("negative value recorded as %d, want 0", all.min)
	}
}
