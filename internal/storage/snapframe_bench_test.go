package storage

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/znode"
)

// BenchmarkSnapshotWait writes a snapshot of a 200k-znode tree on one processor while another
// goroutine wakes every 100µs, and reports the longest and the 99th percentile wait of that
// goroutine for the processor: what a request arriving during a snapshot waits.
func BenchmarkSnapshotWait(b *testing.B) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	tree := znode.New()
	acl := []jute.ACL{{Perms: jute.PermAll, ID: jute.Id{Scheme: "world", ID: "anyone"}}}
	data := make([]byte, 128)
	for i := range 200_000 {
		r := tree.Apply(int64(i+1), &znode.Txn{Time: 1, Op: jute.OpCreate,
			Req: &jute.CreateRequest{Path: fmt.Sprintf("/n%07d", i), Data: data, ACL: acl}})
		if r.Err != nil {
			b.Fatal(r.Err)
		}
	}
	v := tree.View()
	for b.Loop() {
		stop := make(chan struct{})
		var waits []time.Duration
		var wg sync.WaitGroup
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				due := time.Now().Add(100 * time.Microsecond)
				// A real timer on purpose: how late the runtime wakes it while the snapshot
				// holds the processor is what the benchmark measures.
				time.Sleep(100 * time.Microsecond)
				waits = append(waits, time.Since(due))
			}
		})
		runtime.Gosched()
		if err := writeSnapshot(io.Discard, v); err != nil {
			b.Fatal(err)
		}
		close(stop)
		wg.Wait()
		slices.Sort(waits)
		b.ReportMetric(float64(waits[len(waits)-1].Microseconds()), "max-wait-µs")
		b.ReportMetric(float64(waits[len(waits)*99/100].Microseconds()), "p99-wait-µs")
	}
}
