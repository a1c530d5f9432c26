// Copyright (c) HashiCorp, Inc.
// SPDX-License-Identifier: MPL-2.0

package raft

import (
	"fmt"
	"sync"
)

// LogCache wraps any LogStore implementation to provide an
// in-memory ring buffer. This is used to cache access to
// the recently written entries. For implementations that do not
// cache themselves, this can provide a substantial boost by
// avoiding disk I/O on recent entries.
type LogCache struct {
	store LogStore
	cache []*Log
	l     sync.RWMutex

	// zkd change: a bound on the bytes the cache holds (see SetMaxBytes). size is what the
	// entries in cache take; low is the lowest index that may still be in it.
	maxBytes int
	size     int
	low      uint64
}

// logOverhead is what a cached entry costs beyond its Data and Extensions: the Log itself.
const logOverhead = 96

func logSize(l *Log) int { return logOverhead + len(l.Data) + len(l.Extensions) }

// SetMaxBytes bounds the bytes of entries the cache keeps to n (zkd change; 0, the default, is
// no bound beyond the capacity). Upstream bounds the cache only by its number of entries, so a
// cache of 512 entries holds 512 MiB when every entry carries 1 MiB of data. Past the bound,
// StoreLogs drops the oldest entries it has stored, never an entry that is only staged: a
// replicator must find those in the cache (see StageLogs).
func (c *LogCache) SetMaxBytes(n int) {
	c.l.Lock()
	c.maxBytes = n
	c.l.Unlock()
}

// put places l in its slot, keeping size. The caller holds c.l.
func (c *LogCache) put(l *Log) {
	slot := l.Index % uint64(len(c.cache))
	if old := c.cache[slot]; old != nil {
		c.size -= logSize(old)
	}
	c.cache[slot] = l
	c.size += logSize(l)
}

// drop empties slot i, keeping size. The caller holds c.l.
func (c *LogCache) drop(i uint64) {
	if old := c.cache[i]; old != nil {
		c.size -= logSize(old)
		c.cache[i] = nil
	}
}

// trim drops the oldest entries up to index stored (all of which the store holds) until the
// cache is within maxBytes. The caller holds c.l.
func (c *LogCache) trim(stored uint64) {
	if c.maxBytes <= 0 || c.size <= c.maxBytes {
		return
	}
	n := uint64(len(c.cache))
	if stored >= n && c.low < stored-n+1 {
		c.low = stored - n + 1 // every older index's slot has been reused since
	}
	for ; c.size > c.maxBytes && c.low <= stored; c.low++ {
		slot := c.low % n
		if l := c.cache[slot]; l != nil && l.Index == c.low {
			c.drop(slot)
		}
	}
}

// NewLogCache is used to create a new LogCache with the
// given capacity and backend store.
func NewLogCache(capacity int, store LogStore) (*LogCache, error) {
	if capacity <= 0 {
		return nil, fmt.Errorf("capacity must be positive")
	}
	c := &LogCache{
		store: store,
		cache: make([]*Log, capacity),
	}
	return c, nil
}

// IsMonotonic implements the MonotonicLogStore interface. This is a shim to
// expose the underlying store as monotonically indexed or not.
func (c *LogCache) IsMonotonic() bool {
	if store, ok := c.store.(MonotonicLogStore); ok {
		return store.IsMonotonic()
	}

	return false
}

func (c *LogCache) GetLog(idx uint64, log *Log) error {
	// Check the buffer for an entry
	c.l.RLock()
	cached := c.cache[idx%uint64(len(c.cache))]
	c.l.RUnlock()

	// Check if entry is valid
	if cached != nil && cached.Index == idx {
		*log = *cached
		return nil
	}

	// Forward request on cache miss
	return c.store.GetLog(idx, log)
}

func (c *LogCache) StoreLog(log *Log) error {
	return c.StoreLogs([]*Log{log})
}

func (c *LogCache) StoreLogs(logs []*Log) error {
	err := c.store.StoreLogs(logs)
	// Insert the logs into the ring buffer, but only on success
	if err != nil {
		return fmt.Errorf("unable to store logs within log store, err: %q", err)
	}
	c.l.Lock()
	var last uint64
	for _, l := range logs {
		c.put(l)
		last = max(last, l.Index)
	}
	c.trim(last)
	c.l.Unlock()
	return nil
}

// StagingLogStore is a LogStore that can serve entries before they are stored (zkd change: see
// dispatchLogs). LogCache is one; a wrapper around a LogCache passes the calls on.
type StagingLogStore interface {
	LogStore
	// StageLogs makes logs readable through GetLog before StoreLogs stores them. It reports
	// false, staging nothing, when it cannot hold them all.
	StageLogs(logs []*Log) bool
	// UnstageLogs forgets staged logs whose StoreLogs failed.
	UnstageLogs(logs []*Log)
}

// StageLogs makes logs readable through the cache before they are stored, so that a leader's
// replicators can send them while the leader's own write is still under way (zkd change). It
// reports false, staging nothing, when the batch does not fit in the cache: a replicator that
// missed the cache would ask the store for entries it does not hold yet.
func (c *LogCache) StageLogs(logs []*Log) bool {
	if len(logs) > len(c.cache) {
		return false
	}
	c.l.Lock()
	for _, l := range logs {
		c.put(l)
	}
	c.l.Unlock()
	return true
}

// UnstageLogs removes staged logs whose store failed, so the cache never serves an entry the
// store does not hold (zkd change).
func (c *LogCache) UnstageLogs(logs []*Log) {
	c.l.Lock()
	for _, l := range logs {
		slot := l.Index % uint64(len(c.cache))
		if c.cache[slot] == l {
			c.drop(slot)
		}
	}
	c.l.Unlock()
}

func (c *LogCache) FirstIndex() (uint64, error) {
	return c.store.FirstIndex()
}

func (c *LogCache) LastIndex() (uint64, error) {
	return c.store.LastIndex()
}

func (c *LogCache) DeleteRange(min, max uint64) error {
	// Invalidate the deleted entries (zkd change: only those. Wiping the whole cache would drop
	// entries a leader staged and has not stored yet, and a replicator would then find neither
	// in the cache nor in the store an entry it must send; compaction runs concurrently with
	// the leader's appends.)
	c.l.Lock()
	for i, l := range c.cache {
		if l != nil && l.Index >= min && l.Index <= max {
			c.drop(uint64(i))
		}
	}
	if min < c.low {
		c.low = min // the indexes from min on may be written again
	}
	c.l.Unlock()

	return c.store.DeleteRange(min, max)
}
