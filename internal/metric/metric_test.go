package metric

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestBucketsHoldTheirValues checks that every value lands in the bucket whose bounds hold it,
// and that the bounds grow.
func TestBucketsHoldTheirValues(t *testing.T) {
	for i := 1; i < numBuckets; i++ {
		if !(upperBound(i) > upperBound(i-1)) {
			t.Fatalf("upperBound(%d) = %v, not above upperBound(%d) = %v", i, upperBound(i), i-1, upperBound(i-1))
		}
	}
	vals := []uint64{0, 1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 1000, 1023, 1024, 1025, 1 << 35, 1<<36 - 1, 1 << 36, 1<<36 + 1, math.MaxUint64}
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		vals = append(vals, r.Uint64N(1<<38))
	}
	for _, v := range vals {
		i := bucketOf(v)
		lo := -1.0
		if i > 0 {
			lo = upperBound(i - 1)
		}
		if f := float64(v); !(f > lo && f <= upperBound(i)) {
			t.Fatalf("bucketOf(%d) = %d, which holds (%v, %v]", v, i, lo, upperBound(i))
		}
	}
}

func TestSummaryFigures(t *testing.T) {
	s := NewSummary(Millis)
	for ms := 1; ms <= 100; ms++ {
		s.ObserveDuration(time.Duration(ms) * time.Millisecond)
	}
	got := s.SinceReset()
	if got.Count != 100 || got.SumValue() != 5050 || got.Avg() != 50.5 || got.MinValue() != 1 || got.MaxValue() != 100 {
		t.Fatalf("count %d sum %v avg %v min %v max %v; want 100 5050 50.5 1 100",
			got.Count, got.SumValue(), got.Avg(), got.MinValue(), got.MaxValue())
	}
	// Buckets are a quarter of an octave wide: estimates are within about 12% of the truth.
	for _, c := range []struct{ q, want float64 }{{0.5, 50}, {0.95, 95}, {0.99, 99}, {0.999, 100}} {
		if v := got.Quantile(c.q); math.Abs(v-c.want)/c.want > 0.13 {
			t.Errorf("Quantile(%v) = %v; want about %v", c.q, v, c.want)
		}
	}
	if v := got.Quantile(1); v != 100 {
		t.Errorf("Quantile(1) = %v; want the maximum, 100", v)
	}
}

// TestSummaryResetKeepsTotals checks ZooKeeper's srst against Prometheus' rule: what mntr shows
// starts again from zero, what /metrics exports never goes down.
func TestSummaryResetKeepsTotals(t *testing.T) {
	s := NewSummary(Count)
	s.Observe(10)
	s.Observe(20)
	s.Reset()
	if got := s.SinceReset(); got.Count != 0 || got.Sum != 0 || got.HasMinMax || got.Quantile(0.5) != 0 {
		t.Fatalf("after Reset: %+v", got)
	}
	s.Observe(5)
	got := s.SinceReset()
	if got.Count != 1 || got.Sum != 5 || got.Min != 5 || got.Max != 5 || got.Quantile(0.99) != 5 {
		t.Fatalf("one value after Reset: %+v", got)
	}
	if tot := s.Total(); tot.Count != 3 || tot.Sum != 35 {
		t.Fatalf("Total after Reset = %d values, sum %d; want 3, 35", tot.Count, tot.Sum)
	}
	var c Counter
	c.Add(3)
	c.Reset()
	c.Inc()
	if c.SinceReset() != 1 || c.Total() != 4 {
		t.Fatalf("counter since reset %d, total %d; want 1, 4", c.SinceReset(), c.Total())
	}
}

func TestCumulativeAtOctaves(t *testing.T) {
	s := NewSummary(Millis)
	for _, us := range []int64{10, 16, 17, 1000, 1024, 1025, 5_000_000} {
		s.ObserveDuration(time.Duration(us) * time.Microsecond)
	}
	bounds := OctaveBounds(Millis, 4, 11) // 16µs .. 2048µs, in ms
	if bounds[0] != 0.016 || bounds[len(bounds)-1] != 2.048 {
		t.Fatalf("OctaveBounds = %v", bounds)
	}
	got := s.Total().Cumulative(bounds)
	want := []uint64{2, 3, 3, 3, 3, 3, 5, 6} // ≤16, ≤32, ..., ≤1024, ≤2048
	if !slices.Equal(got, want) {
		t.Fatalf("Cumulative = %v; want %v", got, want)
	}
}

// BenchmarkSummaryObserve is the cost a measured request pays.
func BenchmarkSummaryObserve(b *testing.B) {
	s := NewSummary(Millis)
	d := 1500 * time.Microsecond
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s.ObserveDuration(d)
		}
	})
}
