package server

import (
	"fmt"
	"runtime"
	"testing"
)

// chLeaf returns the path of leaf i of a ClickHouse-shaped tree, as cmd/zkbench's scale tree lays
// them out (scale_tree.go): tables of 10,000 leaves under /clickhouse/<database>/<table>, a
// replication log entry, two deduplication blocks and a replica's part in turn, about 100 bytes
// a path, sharing long prefixes.
func chLeaf(i int) string {
	const perTable, databases, replicas = 10000, 10, 3
	tb, j := i/perTable, i%perTable
	table := fmt.Sprintf("/clickhouse/db_analytics_%02d/events_local_shard_%04d_replicated", tb%databases, tb)
	mix := func(x uint64) uint64 { // splitmix64
		x += 0x9e3779b97f4a7c15
		x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
		x = (x ^ (x >> 27)) * 0x94d049bb133111eb
		return x ^ (x >> 31)
	}
	switch j % 4 {
	case 0:
		return fmt.Sprintf("%s/log-%010d", table, j)
	case 3:
		return fmt.Sprintf("%s/replicas/replica-%02d/all_%07d_%07d_%d", table, (j/4)%replicas, j, j+3, j%7)
	default:
		return fmt.Sprintf("%s/blocks/2023%02d_%016x_%016x", table, 1+j%12, mix(uint64(i)), mix(uint64(i)^0xabcdef))
	}
}

// liveHeap is the heap in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkWatchTableMemory reports the live heap the watch table holds per watch, for a million
// watches held by 10,000 connections, each on a ClickHouse-shaped leaf of its own, a third each
// data (exists), persistent and persistent recursive, as zkbench scale sets them. Each path is a
// fresh string, as a decoded request's is, and nothing but the table keeps it. Run it once:
//
//	go test -run '^$' -bench WatchTableMemory -benchtime 1x ./server/
func BenchmarkWatchTableMemory(b *testing.B) {
	const conns, watches = 10000, 1000000
	cs := make([]*conn, conns)
	for i := range cs {
		cs[i] = fakeConn(int64(i+1), 1<<20)
	}
	modes := [3]watchMode{watchData, watchPersistent, watchRecursive}
	for b.Loop() {
		before := liveHeap()
		w := newWatchManager(0)
		per := watches / conns
		for ci, c := range cs {
			for j := range per {
				w.add(c, chLeaf(ci*per+j), modes[j%3])
			}
		}
		after := liveHeap()
		if s := w.summary(); s.Paths != watches || s.Connections != conns {
			b.Fatalf("summary %+v; want %d paths of %d connections", s, watches, conns)
		}
		b.ReportMetric(float64(after-before)/watches, "B/watch")
		runtime.KeepAlive(w)
	}
}
