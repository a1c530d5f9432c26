package znode

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zkd-io/zkd/jute"
)

var big = flag.Bool("znode.big", false, "run the 1M-node memory and snapshot measurements")

// The big tree: /p000000000 … /p000000999, each with 1000 children n000000000 … n000000999, every
// name 10 bytes and every node 128 bytes of data (1,001,000 nodes).
const (
	bigParents  = 1000
	bigChildren = 1000
	bigData     = 128
)

func bigName(prefix byte, i int) string { return fmt.Sprintf("%c%09d", prefix, i) }

func bigPath(p, c int) string { return "/" + bigName('p', p) + "/" + bigName('n', c) }

// buildBig applies the creates of the big tree to a fresh tree.
func buildBig(tb testing.TB) *Tree {
	tb.Helper()
	tr := New()
	data := bytes.Repeat([]byte{'x'}, bigData)
	zxid := int64(0)
	create := func(path string) {
		zxid++
		// Each node gets its own data, as it would from a decoded request.
		res := tr.Apply(zxid, &Txn{Time: zxid, Op: jute.OpCreate, Req: &jute.CreateRequest{Path: path, Data: bytes.Clone(data), ACL: worldAll}})
		if res.Err != nil {
			tb.Fatalf("create %s: %v", path, res.Err)
		}
	}
	for p := range bigParents {
		create("/" + bigName('p', p))
		for c := range bigChildren {
			create(bigPath(p, c))
		}
	}
	return tr
}

// bigTrees builds the big tree once per process; every user gets its own Tree over the same
// immutable state, so benchmarks can write without disturbing each other.
type bigTrees struct {
	once sync.Once
	base *View
}

var bigCache bigTrees

func bigTree(tb testing.TB) *Tree {
	tb.Helper()
	bigCache.once.Do(func() { bigCache.base = buildBig(tb).View() })
	tr := &Tree{}
	tr.cur.Store(bigCache.base)
	return tr
}

// cpuTime returns the CPU time (user and system, all threads) the process has used. The machine
// these figures come from is shared, so CPU time says more than wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU adds the CPU time per op since start to a benchmark's results.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func rssBytes() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// TestBigTree measures memory per node, and snapshot write and restore times, with 1M nodes. Run it
// with: go test -run TestBigTree -znode.big -v ./znode
func TestBigTree(t *testing.T) {
	if !*big {
		t.Skip("needs -znode.big")
	}
	before := liveHeap()
	rssBefore := rssBytes()
	start, cpu0 := time.Now(), cpuTime()
	tr := buildBig(t)
	build, buildCPU := time.Since(start), cpuTime()-cpu0
	after := liveHeap()
	rssAfter := rssBytes()
	v := tr.View()
	nodes := int(v.nodes) - 4
	payload := uint64(nodes) * (10 + bigData)
	perNode := float64(after-before-payload) / float64(nodes)
	t.Logf("built %d nodes in %v, CPU %v (%.0f creates per CPU second)", nodes, build, buildCPU, float64(nodes)/buildCPU.Seconds())
	t.Logf("live heap: %.1f MiB, %.1f bytes/node beyond name and data (%.1f total per node)",
		float64(after-before)/(1<<20), perNode, float64(after-before)/float64(nodes))
	t.Logf("RSS growth: %.1f MiB, %.1f bytes/node total", float64(rssAfter-rssBefore)/(1<<20), float64(rssAfter-rssBefore)/float64(nodes))
	if perNode > 250 {
		t.Errorf("%.1f bytes/node beyond name and data; budget 250", perNode)
	}

	var snap bytes.Buffer
	snap.Grow(256 << 20)
	start, cpu0 = time.Now(), cpuTime()
	if err := v.WriteSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	write, writeCPU := time.Since(start), cpuTime()-cpu0
	start, cpu0 = time.Now(), cpuTime()
	r, err := ReadSnapshot(bytes.NewReader(snap.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	restore, restoreCPU := time.Since(start), cpuTime()-cpu0
	t.Logf("snapshot: %.1f MiB, write %v (CPU %v), restore %v (CPU %v)", float64(snap.Len())/(1<<20), write, writeCPU, restore, restoreCPU)
	var again bytes.Buffer
	if err := r.View().WriteSnapshot(&again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Bytes(), snap.Bytes()) {
		t.Fatalf("restored 1M-node tree writes different bytes")
	}
	runtime.KeepAlive(tr)
}

func BenchmarkApplyCreate(b *testing.B) {
	tr := bigTree(b)
	data := bytes.Repeat([]byte{'y'}, bigData)
	zxid := tr.LastZxid()
	i := 0
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		zxid++
		i++
		path := "/" + bigName('p', i%bigParents) + "/" + bigName('m', i)
		if res := tr.Apply(zxid, &Txn{Time: zxid, Op: jute.OpCreate, Req: &jute.CreateRequest{Path: path, Data: data, ACL: worldAll}}); res.Err != nil {
			b.Fatal(res.Err)
		}
	}
	reportCPU(b, cpu0)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

func BenchmarkApplySetData(b *testing.B) {
	tr := bigTree(b)
	data := bytes.Repeat([]byte{'z'}, bigData)
	zxid := tr.LastZxid()
	i := 0
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		zxid++
		i++
		path := bigPath((i*7919)%bigParents, i%bigChildren)
		if res := tr.Apply(zxid, &Txn{Time: zxid, Op: jute.OpSetData, Req: &jute.SetDataRequest{Path: path, Data: data, Version: -1}}); res.Err != nil {
			b.Fatal(res.Err)
		}
	}
	reportCPU(b, cpu0)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

func BenchmarkApplyDelete(b *testing.B) {
	tr := bigTree(b)
	zxid := tr.LastZxid()
	i := 0
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		if i == bigParents*bigChildren { // every node deleted: start again from the full tree
			tr = bigTree(b)
			i = 0
		}
		zxid++
		path := bigPath(i%bigParents, i/bigParents)
		i++
		if res := tr.Apply(zxid, &Txn{Time: zxid, Op: jute.OpDelete, Req: &jute.DeleteRequest{Path: path, Version: -1}}); res.Err != nil {
			b.Fatal(res.Err)
		}
	}
	reportCPU(b, cpu0)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

func BenchmarkSnapshotWrite(b *testing.B) {
	v := bigTree(b).View()
	var n int64
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		cw := &countingWriter{}
		if err := v.WriteSnapshot(cw); err != nil {
			b.Fatal(err)
		}
		n = cw.n
	}
	reportCPU(b, cpu0)
	b.SetBytes(n)
}

func BenchmarkSnapshotRestore(b *testing.B) {
	var snap bytes.Buffer
	if err := bigTree(b).View().WriteSnapshot(&snap); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(snap.Len()))
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		if _, err := ReadSnapshot(bytes.NewReader(snap.Bytes())); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu0)
}

// BenchmarkApplyDuringSnapshot measures setData throughput while another goroutine keeps writing
// snapshots of the 1M-node tree.
func BenchmarkApplyDuringSnapshot(b *testing.B) {
	tr := bigTree(b)
	data := bytes.Repeat([]byte{'w'}, bigData)
	stop := make(chan struct{})
	done := make(chan int)
	go func() {
		snaps := 0
		for {
			select {
			case <-stop:
				done <- snaps
				return
			default:
			}
			if err := tr.View().WriteSnapshot(io.Discard); err != nil {
				panic(err)
			}
			snaps++
		}
	}()
	zxid := tr.LastZxid()
	i := 0
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		zxid++
		i++
		path := bigPath((i*7919)%bigParents, i%bigChildren)
		if res := tr.Apply(zxid, &Txn{Time: zxid, Op: jute.OpSetData, Req: &jute.SetDataRequest{Path: path, Data: data, Version: -1}}); res.Err != nil {
			b.Fatal(res.Err)
		}
	}
	reportCPU(b, cpu0)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	close(stop)
	b.ReportMetric(float64(<-done), "snapshots")
}

func BenchmarkRead(b *testing.B) {
	v := bigTree(b).View()
	i := 0
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		i++
		if _, err := v.Read(0, nil, jute.OpGetData, &jute.GetDataRequest{Path: bigPath((i*7919)%bigParents, i%bigChildren)}); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu0)
}

type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}

// BenchmarkApplyMulti applies multis of 10 creates on the 1M-node tree.
func BenchmarkApplyMulti(b *testing.B) {
	tr := bigTree(b)
	data := bytes.Repeat([]byte{'m'}, bigData)
	zxid := tr.LastZxid()
	i := 0
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		zxid++
		req := &jute.MultiRequest{Ops: make([]jute.MultiOp, 10)}
		for k := range req.Ops {
			i++
			path := "/" + bigName('p', i%bigParents) + "/" + bigName('u', i)
			req.Ops[k] = jute.MultiOp{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: path, Data: data, ACL: worldAll}}
		}
		res := tr.Apply(zxid, &Txn{Time: zxid, Op: jute.OpMulti, Req: req})
		if r := res.Resp.(*jute.MultiResponse).Results[0]; r.Err != 0 {
			b.Fatal(r.Err)
		}
	}
	reportCPU(b, cpu0)
}

// BenchmarkSessionLifecycle opens a session, creates 100 ephemerals under one parent and closes
// the session (one transaction deleting all 100), per op.
func BenchmarkSessionLifecycle(b *testing.B) {
	tr := New()
	tr.Apply(1, &Txn{Op: jute.OpCreate, Req: &jute.CreateRequest{Path: "/e", ACL: worldAll}})
	zxid := int64(1)
	id := int64(0)
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		id++
		zxid++
		tr.Apply(zxid, &Txn{Op: jute.OpCreateSession, Req: &CreateSession{ID: id, Timeout: 10000}})
		for range 100 {
			zxid++
			if res := tr.Apply(zxid, &Txn{Session: id, Op: jute.OpCreate, Req: &jute.CreateRequest{Path: "/e/n-", ACL: worldAll, Flags: jute.ModeEphemeralSequential}}); res.Err != nil {
				b.Fatal(res.Err)
			}
		}
		zxid++
		if res := tr.Apply(zxid, &Txn{Session: id, Op: jute.OpCloseSession}); len(res.Events) != 200 {
			b.Fatalf("close gave %d events", len(res.Events))
		}
	}
	reportCPU(b, cpu0)
}
