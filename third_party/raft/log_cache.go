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
	for _, l := range logs {
		c.cache[l.Index%uint64(len(c.cache))] = l
	}
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
		c.cache[l.Index%uint64(len(c.cache))] = l
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
			c.cache[slot] = nil
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
			c.cache[i] = nil
		}
	}
	c.l.Unlock()

	return c.store.DeleteRange(min, max)
}
