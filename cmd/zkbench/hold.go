package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/zkd-io/zkd/jute"
)

// holdStats is what "zkbench hold" reports for the time since its last mark.
type holdStats struct {
	Sessions   int     `json:"sessions"`
	Reads      int64   `json:"reads"`
	ReadErrors int64   `json:"read_errors"`
	ReadP50    float64 `json:"read_p50_ms"`
	ReadP99    float64 `json:"read_p99_ms"`
	ReadMax    float64 `json:"read_max_ms"`
	Lost       int64   `json:"connections_lost"`
	Expired    int64   `json:"sessions_expired"`
	// Reattached holds, for each session that reattached after losing its connection, the
	// seconds from the mark to its reattachment.
	Reattached []float64 `json:"reattached_s"`
}

// holder keeps sessions open over a server's members the way ZooKeeper clients do: a session
// whose connection is lost waits a random part of a second, as the Java client does before each
// attempt, and reattaches through the next member; one that the servers no longer know counts as
// expired and opens a new session. Each session reads one node every so often, and a read cut
// by a lost connection is retried on the reattached one, its latency counted from the first try.
type holder struct {
	addrs   []string
	timeout time.Duration
	every   time.Duration
	path    string
	stop    chan struct{}
	wg      sync.WaitGroup

	mu struct {
		sync.Mutex
		mark  time.Time
		stats holdStats
		reads *histogram
	}
}

// holdMain is "zkbench hold": it opens -sessions sessions over the comma-separated -addr list
// (session i on member i mod n, from -first), prints "ready N" once they are all open, then
// answers commands read from stdin, one per line: "mark" starts a new measurement (and answers
// "marked" once it has, so that what the parent does next falls after it), "stats"
// prints a JSON holdStats line for the time since the mark, "quit" closes the sessions and
// exits (as does the end of stdin). zkbench scale runs it as child processes, so that more
// sessions can be held than one process may have files open.
func holdMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("zkbench hold", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:2181", "comma-separated server addresses")
	n := fs.Int("sessions", 1000, "sessions to hold, one connection each")
	first := fs.Int("first", 0, "member the first session goes to (index into -addr)")
	h := &holder{stop: make(chan struct{})}
	fs.DurationVar(&h.timeout, "session-timeout", 30*time.Second, "session timeout asked for")
	fs.DurationVar(&h.every, "read-every", 10*time.Second, "how often each session reads -path")
	fs.StringVar(&h.path, "path", "/", "node every session reads")
	if err := fs.Parse(args); err != nil {
		return err
	}
	h.addrs = splitAddrs(*addr)
	h.mu.reads = newHistogram()
	h.mu.mark = time.Now()
	defer func() {
		close(h.stop)
		h.wg.Wait()
	}()
	opened := make(chan error, *n)
	sem := make(chan struct{}, 32) // handshakes in flight
	for i := range *n {
		sem <- struct{}{}
		h.wg.Go(func() { h.session(h.addrs[(*first+i)%len(h.addrs)], sourceFor(h.addrs[0], *first, i), opened, sem) })
	}
	for range *n {
		select {
		case err := <-opened:
			if err != nil {
				return fmt.Errorf("zkbench hold: %w", err)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	h.mu.Lock()
	h.mu.stats.Sessions = *n
	h.mu.Unlock()
	_, _ = fmt.Fprintf(stdout, "ready %d\n", *n)
	lines := bufio.NewScanner(stdin)
	for lines.Scan() {
		switch lines.Text() {
		case "mark":
			h.mu.Lock()
			h.mu.mark, h.mu.stats, h.mu.reads = time.Now(), holdStats{Sessions: *n}, newHistogram()
			h.mu.Unlock()
			_, _ = fmt.Fprintln(stdout, "marked")
		case "stats":
			h.mu.Lock()
			st := h.mu.stats
			st.Reattached = append([]float64(nil), st.Reattached...)
			st.ReadP50 = float64(h.mu.reads.quantile(0.50)) / 1e6
			st.ReadP99 = float64(h.mu.reads.quantile(0.99)) / 1e6
			st.ReadMax = float64(h.mu.reads.quantile(1)) / 1e6
			h.mu.Unlock()
			b, _ := json.Marshal(st)
			_, _ = fmt.Fprintf(stdout, "%s\n", b)
		case "quit":
			return nil
		}
	}
	return lines.Err()
}

// session holds one session until h.stop, starting on addr and dialling from local (nil: any
// address); it sends the outcome of opening it
// on opened and then frees its handshake slot.
func (h *holder) session(addr string, local *net.TCPAddr, opened chan<- error, sem <-chan struct{}) {
	c, err := dialClientFrom(addr, local, h.timeout)
	<-sem
	opened <- err
	if err != nil {
		return
	}
	defer func() {
		if c != nil { // nil: stopped while reattaching, its connection abandoned
			_ = c.close()
		}
	}()
	next := time.Now().Add(rand.N(h.every))
	member := 0
	for i, a := range h.addrs {
		if a == addr {
			member = i
		}
	}
	for {
		wait := time.NewTimer(time.Until(next))
		select {
		case <-h.stop:
			wait.Stop()
			return
		case <-c.stop: // the connection is lost: reattach at once, as the Java client does
			wait.Stop()
			if c, member = h.reattach(c, local, member); c == nil {
				return
			}
			continue
		case <-wait.C:
		}
		next = next.Add(h.every)
		start := time.Now()
		for {
			r := c.call(jute.OpGetData, &jute.GetDataRequest{Path: h.path})
			if r.err == nil {
				h.mu.Lock()
				if start.After(h.mu.mark) {
					h.mu.reads.recordDuration(time.Since(start))
					h.mu.stats.Reads++
					if r.hdr.Err != jute.CodeOK {
						h.mu.stats.ReadErrors++
					}
				}
				h.mu.Unlock()
				break
			}
			if c, member = h.reattach(c, local, member); c == nil {
				return
			}
		}
	}
}

// reattach abandons c's lost connection and reattaches its session through the members after
// member in turn, waiting a random part of a second before each attempt. A session the servers
// no longer know is counted as expired and replaced by a new one. It returns nil once h.stop is
// closed.
func (h *holder) reattach(c *client, local *net.TCPAddr, member int) (*client, int) {
	c.abandon()
	h.mu.Lock()
	h.mu.stats.Lost++
	h.mu.Unlock()
	for {
		select {
		case <-h.stop:
			return nil, member
		case <-time.After(rand.N(time.Second)):
		}
		member = (member + 1) % len(h.addrs)
		nc, err := resumeClientFrom(h.addrs[member], local, c, nil)
		if errors.Is(err, jute.CodeSessionExpired) {
			h.mu.Lock()
			h.mu.stats.Expired++
			h.mu.Unlock()
			if nc, err = dialClientFrom(h.addrs[member], local, h.timeout); err != nil {
				continue
			}
		}
		if err != nil {
			continue
		}
		h.mu.Lock()
		h.mu.stats.Reattached = append(h.mu.stats.Reattached, time.Since(h.mu.mark).Seconds())
		h.mu.Unlock()
		return nc, member
	}
}
