package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"
)

// idleMain is "zkbench idle": it opens sessions that then do nothing but ping, holds them, and
// reports what they cost the server in resident memory: its VmRSS before the first and once they
// have been held, divided by their number. Run against zkd and against ZooKeeper it gives the
// memory per idle session of each.
func idleMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("zkbench idle", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:2181", "server address")
	n := fs.Int("sessions", 5000, "idle sessions to open, one connection each (raise ulimit -n above it)")
	hold := fs.Duration("hold", 20*time.Second, "how long to hold them before measuring")
	timeout := fs.Duration("session-timeout", 30*time.Second, "session timeout asked for")
	pid := fs.Int("pid", 0, "the server's process id, to read its resident size (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *pid == 0 {
		return errors.New("zkbench idle: -pid is required")
	}
	before := rssKiB(*pid)
	clients := make([]*client, 0, *n)
	defer func() {
		for _, c := range clients {
			_ = c.close()
		}
	}()
	for range *n {
		if err := ctx.Err(); err != nil {
			return err
		}
		c, err := dialClient(*addr, *timeout, nil)
		if err != nil {
			return fmt.Errorf("zkbench idle: after %d sessions: %w", len(clients), err)
		}
		clients = append(clients, c)
	}
	select {
	case <-time.After(*hold):
	case <-ctx.Done():
		return ctx.Err()
	}
	for i, c := range clients {
		if err := c.err(); err != nil {
			return fmt.Errorf("zkbench idle: session %d failed while idle: %w", i, err)
		}
	}
	after := rssKiB(*pid)
	fmt.Fprintf(stdout, "idle on %s: %d sessions held %v; server VmRSS before %d KiB, after %d KiB: %.1f KiB per session\n",
		*addr, len(clients), *hold, before, after, float64(after-before)/float64(len(clients)))
	return nil
}
