package server

import (
	"testing"
	"time"

	"github.com/zkd-io/zkd/jute"
)

// BenchmarkRequestMetrics is what measuring costs every request: its latency as a read or an
// update and by op, and its reply's size.
func BenchmarkRequestMetrics(b *testing.B) {
	m := newServerMetrics()
	d := 300 * time.Microsecond
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.request(jute.OpGetData, false, d)
			m.response(120)
		}
	})
}
