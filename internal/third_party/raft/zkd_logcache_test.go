package raft

import (
	"bytes"
	"testing"
)

// cacheSize recomputes what the cache holds, to check the running total against.
func cacheSize(c *LogCache) (size, entries int) {
	for _, l := range c.cache {
		if l != nil {
			size += logSize(l)
			entries++
		}
	}
	return size, entries
}

func entries(from, to uint64, size int) []*Log {
	var out []*Log
	for i := from; i <= to; i++ {
		out = append(out, &Log{Index: i, Term: 1, Data: bytes.Repeat([]byte{byte(i)}, size)})
	}
	return out
}

// The byte bound (zkd change): the cache keeps the newest entries within it, serves them, and
// keeps its running total exact through stores, stages, unstages and deletes.
func TestLogCacheMaxBytes(t *testing.T) {
	inner := NewInmemStore()
	cache, err := NewLogCache(64, inner)
	if err != nil {
		t.Fatal(err)
	}
	const entry = 1000
	limit := 10 * (entry + logOverhead)
	cache.SetMaxBytes(limit)
	check := func(when string) {
		t.Helper()
		size, _ := cacheSize(cache)
		if size != cache.size {
			t.Fatalf("%s: running total %d, entries hold %d", when, cache.size, size)
		}
	}
	for i := uint64(1); i <= 200; i += 5 {
		if err := cache.StoreLogs(entries(i, i+4, entry)); err != nil {
			t.Fatal(err)
		}
		check("store")
		if cache.size > limit {
			t.Fatalf("after storing up to %d the cache holds %d bytes; limit %d", i+4, cache.size, limit)
		}
	}
	// The newest ten are cached: they are served with the store emptied.
	if err := inner.DeleteRange(1, 200); err != nil {
		t.Fatal(err)
	}
	var l Log
	for i := uint64(191); i <= 200; i++ {
		if err := cache.GetLog(i, &l); err != nil || l.Data[0] != byte(i) {
			t.Fatalf("entry %d is not cached: %v", i, err)
		}
	}
	if err := cache.GetLog(190, &l); err == nil {
		t.Fatal("an entry past the byte bound is still cached")
	}

	// A staged batch is never trimmed, however large, until it is stored.
	staged := entries(201, 240, entry)
	if !cache.StageLogs(staged) {
		t.Fatal("a batch within the capacity was not staged")
	}
	check("stage")
	if err := cache.StoreLogs(entries(1000, 1000, 0)[:0]); err != nil { // an empty store trims nothing staged
		t.Fatal(err)
	}
	for _, s := range staged {
		if err := cache.GetLog(s.Index, &l); err != nil {
			t.Fatalf("staged entry %d is not served: %v", s.Index, err)
		}
	}
	if err := cache.StoreLogs(staged); err != nil {
		t.Fatal(err)
	}
	check("store staged")
	if cache.size > limit {
		t.Fatalf("after storing the staged batch the cache holds %d bytes; limit %d", cache.size, limit)
	}
	more := entries(241, 250, entry)
	cache.StageLogs(more)
	cache.UnstageLogs(more)
	check("unstage")
	if err := cache.DeleteRange(235, 240); err != nil {
		t.Fatal(err)
	}
	check("delete")
	// After a truncation the same indexes are written again and trimmed again.
	if err := cache.StoreLogs(entries(235, 260, entry)); err != nil {
		t.Fatal(err)
	}
	check("rewrite")
	if cache.size > limit {
		t.Fatalf("after rewriting truncated indexes the cache holds %d bytes; limit %d", cache.size, limit)
	}
	if err := cache.GetLog(260, &l); err != nil || l.Data[0] != byte(260%256) {
		t.Fatalf("the newest entry is not served: %v", err)
	}
}
