package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/zkd-io/zkd/jute"
)

// populateFanout is how many znodes populate puts under one parent, so no parent's child list
// grows beyond what a client can read in one reply.
const populateFanout = 1000

// populate creates n znodes of size bytes under root (root/d-XXXX/n-XXXXXX, populateFanout per
// parent) over conns connections in pipelined multis, and returns the path of the last one
// created. The nodes are kept.
func populate(ctx context.Context, addrs []string, root string, n, size, conns int) (string, error) {
	if n <= 0 {
		return "", errors.New("zkbench: populate: nothing to create")
	}
	conns = max(conns, 1)
	clients := make([]*client, 0, conns)
	defer func() {
		for _, c := range clients {
			_ = c.close()
		}
	}()
	for i := range conns {
		c, err := dialClient(addrs[i%len(addrs)], 30*time.Second, nil)
		if err != nil {
			return "", err
		}
		clients = append(clients, c)
	}
	if err := ensurePath(clients[0], root); err != nil {
		return "", err
	}
	dirs := (n + populateFanout - 1) / populateFanout
	parents := make([]string, dirs)
	for d := range parents {
		parents[d] = fmt.Sprintf("%s/d-%04d", root, d)
	}
	if err := createMany(clients[0], parents, nil); err != nil {
		return "", err
	}
	data := []byte(strings.Repeat("p", size))
	// Each connection takes whole parents in turn.
	var wg sync.WaitGroup
	errs := make([]error, conns)
	for ci, c := range clients {
		wg.Go(func() {
			for d := ci; d < dirs; d += conns {
				if ctx.Err() != nil {
					errs[ci] = ctx.Err()
					return
				}
				count := min(populateFanout, n-d*populateFanout)
				paths := make([]string, count)
				for j := range paths {
					paths[j] = fmt.Sprintf("%s/n-%06d", parents[d], j)
				}
				if err := createMany(c, paths, data); err != nil {
					errs[ci] = err
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	last := fmt.Sprintf("%s/n-%06d", parents[dirs-1], (n-1)%populateFanout)
	if r := clients[0].call(jute.OpExists, &jute.ExistsRequest{Path: last}); r.result() != nil {
		return "", fmt.Errorf("zkbench: populate: last node %s: %w", last, r.result())
	}
	return last, nil
}

func populateMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("zkbench populate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:2181", "comma-separated server addresses")
	n := fs.Int("n", 100000, "znodes to create")
	size := fs.Int("size", 128, "bytes of data per znode")
	root := fs.String("root", "/zkbench-data", "parent of the created znodes")
	conns := fs.Int("conns", 4, "connections to create them over")
	if err := fs.Parse(args); err != nil {
		return err
	}
	start := time.Now()
	last, err := populate(ctx, splitAddrs(*addr), *root, *n, *size, *conns)
	if err != nil {
		return err
	}
	el := time.Since(start)
	_, _ = fmt.Fprintf(stdout, "created %d znodes of %d B under %s in %.1fs (%.0f/s); last %s\n",
		*n, *size, *root, el.Seconds(), float64(*n)/el.Seconds(), last)
	return nil
}
