package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkd-io/zkd/jute"
)

// scaleSessions opens o.Sessions idle sessions and measures their memory and the server CPU their
// handshakes took; then times o.FanoutRounds writes of a node every session watches; then
// spreads o.Watches watches over the sessions and measures their memory.
func scaleSessions(ctx context.Context, o scaleOptions, s *server, tree chTree, rec *scaleRecord, logf func(string, ...any)) error {
	pid, err := s.pid(0)
	if err != nil {
		return err
	}
	// What the wide node's reads and the restart of earlier steps left running (snapshots, log
	// compaction) would otherwise be charged to the sessions.
	settle(ctx, map[string]*server{s.kind: s})
	heap0, err := s.liveHeapMB(ctx)
	if err != nil {
		return err
	}
	rss0, _ := rssMB(pid)
	cpu0, _ := s.cpuSeconds()
	const fanout = "/fanout"
	var mu sync.Mutex
	var round struct {
		at    time.Time
		h     *histogram
		seen  int
		total *histogram
	}
	round.total = newHistogram()
	onWatch := func(ev jute.WatcherEvent) {
		if ev.Path != fanout || ev.Type != jute.EventNodeDataChanged {
			return
		}
		mu.Lock()
		round.total.recordDuration(time.Since(round.at))
		round.seen++
		mu.Unlock()
	}
	logf("%s: opening %d sessions", s.kind, o.Sessions)
	clients := make([]*client, 0, o.Sessions)
	defer func() {
		for _, c := range clients {
			_ = c.close()
		}
	}()
	for range o.Sessions {
		if err := ctx.Err(); err != nil {
			return err
		}
		c, err := dialClient(s.addrs[0], 60*time.Second, onWatch)
		if err != nil {
			return fmt.Errorf("after %d sessions: %w", len(clients), err)
		}
		clients = append(clients, c)
	}
	cpu1, _ := s.cpuSeconds()
	heap1, err := s.liveHeapMB(ctx)
	if err != nil {
		return err
	}
	rss1, _ := rssMB(pid)
	rec.Sessions = len(clients)
	rec.SessionKiB = (heap1 - heap0) * 1024 / float64(rec.Sessions)
	rec.SessionRSSKiB = (rss1 - rss0) * 1024 / float64(rec.Sessions)
	rec.HandshakeCPUus = (cpu1 - cpu0) * 1e6 / float64(rec.Sessions)
	logf("%s: %d sessions: %.1f KiB heap, %.1f KiB RSS, %.0f µs of server CPU each", s.kind, rec.Sessions,
		rec.SessionKiB, rec.SessionRSSKiB, rec.HandshakeCPUus)

	// Fan-out: every session watches one node, which is then written.
	if err := create(clients[0], fanout, []byte("0"), jute.ModePersistent); err != nil {
		return err
	}
	arm := func() error {
		return forEachClient(clients, func(c *client) error {
			return c.call(jute.OpExists, &jute.ExistsRequest{Path: fanout, Watch: true}).result()
		})
	}
	for r := range o.FanoutRounds {
		if err := arm(); err != nil {
			return fmt.Errorf("fan-out round %d: arm: %w", r, err)
		}
		mu.Lock()
		round.at, round.seen = time.Now(), 0
		mu.Unlock()
		if err := clients[0].call(jute.OpSetData, &jute.SetDataRequest{Path: fanout, Data: []byte(strconv.Itoa(r)), Version: -1}).result(); err != nil {
			return err
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			mu.Lock()
			seen := round.seen
			mu.Unlock()
			if seen >= len(clients) || time.Now().After(deadline) {
				rec.FanoutMissed += int64(len(clients) - seen)
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	mu.Lock()
	rec.FanoutP50 = float64(round.total.quantile(0.50)) / 1e6
	rec.FanoutP99 = float64(round.total.quantile(0.99)) / 1e6
	mu.Unlock()
	logf("%s: fan-out to %d sessions: p50 %.1f ms, p99 %.1f ms, %d missed", s.kind, len(clients), rec.FanoutP50, rec.FanoutP99, rec.FanoutMissed)

	// Watches: session i watches its own slice of the tree's leaves, a third each data,
	// persistent and persistent recursive.
	if o.Watches > 0 {
		per := max(o.Watches/len(clients), 1)
		var next atomic.Int64
		err := forEachClient(clients, func(c *client) error {
			base := int(next.Add(1)-1) * per
			for j := range per {
				path := tree.leaf((base + j) % tree.n)
				var r reply
				switch j % 3 {
				case 0:
					r = c.call(jute.OpExists, &jute.ExistsRequest{Path: path, Watch: true})
				case 1:
					r = c.call(jute.OpAddWatch, &jute.AddWatchRequest{Path: path, Mode: jute.AddWatchPersistent})
				default:
					r = c.call(jute.OpAddWatch, &jute.AddWatchRequest{Path: path, Mode: jute.AddWatchPersistentRecursive})
				}
				if err := r.result(); err != nil {
					return fmt.Errorf("watch %s: %w", path, err)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		rec.Watches = per * len(clients)
		heap2, err := s.liveHeapMB(ctx)
		if err != nil {
			return err
		}
		rec.WatchBytes = (heap2 - heap1) * (1 << 20) / float64(rec.Watches)
		logf("%s: %d watches: %.0f B of heap each", s.kind, rec.Watches, rec.WatchBytes)
	}
	for _, c := range clients {
		if c.err() != nil {
			rec.SessionsLost++
		}
	}
	return nil
}

// forEachClient runs f once per client, 64 at a time, and returns the first error.
func forEachClient(clients []*client, f func(*client) error) error {
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for _, c := range clients {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := f(c); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return first
}
