package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zkd-io/zkd/jute"
)

// chTree lays out n znodes the way ClickHouse's replicated tables use ZooKeeper, for the scale
// measurements: under /clickhouse/<database>/<table>, tables of chPerTable leaves each, spread
// over chDatabases databases. A table's leaves are, in turn, a replication log entry (depth 4),
// two deduplication blocks (depth 5) and a part of one of three replicas (depth 6). Paths
// average about 100 bytes and every leaf holds 50 bytes of its own data, as the issue's
// ClickHouse trees do.
type chTree struct{ n int }

const (
	chPerTable  = 10000
	chDatabases = 10
	chReplicas  = 3
	chDataBytes = 50
)

// tables is the number of tables the leaves fill.
func (t chTree) tables() int { return max(1, (t.n+chPerTable-1)/chPerTable) }

// table returns the path of table tb.
func (t chTree) table(tb int) string {
	return fmt.Sprintf("/clickhouse/db_analytics_%02d/events_local_shard_%04d_replicated", tb%chDatabases, tb)
}

// mix is splitmix64: the hashes in block names, and the checksums in the data.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// leaf returns the path of leaf i.
func (t chTree) leaf(i int) string {
	tb, j := i/chPerTable, i%chPerTable
	switch j % 4 {
	case 0:
		return fmt.Sprintf("%s/log-%010d", t.table(tb), j)
	case 3:
		return fmt.Sprintf("%s/replicas/replica-%02d/all_%07d_%07d_%d", t.table(tb), (j/4)%chReplicas, j, j+3, j%7)
	default:
		return fmt.Sprintf("%s/blocks/2023%02d_%016x_%016x", t.table(tb), 1+j%12, mix(uint64(i)), mix(uint64(i)^0xabcdef))
	}
}

// data returns leaf i's data, chDataBytes long.
func (t chTree) data(i int) []byte {
	return fmt.Appendf(nil, "ctime=%010d sum=%016x rows=%07d", 1_700_000_000+i, mix(uint64(i)+1), i%10_000_000)
}

// dirs returns the tree's inner znodes, level by level (parents before children).
func (t chTree) dirs() [][]string {
	levels := make([][]string, 5)
	levels[0] = []string{"/clickhouse"}
	for d := range min(chDatabases, t.tables()) {
		levels[1] = append(levels[1], fmt.Sprintf("/clickhouse/db_analytics_%02d", d))
	}
	for tb := range t.tables() {
		p := t.table(tb)
		levels[2] = append(levels[2], p)
		levels[3] = append(levels[3], p+"/blocks", p+"/replicas")
		for r := range chReplicas {
			levels[4] = append(levels[4], fmt.Sprintf("%s/replicas/replica-%02d", p, r))
		}
	}
	return levels
}

// rawBytes is the average of path plus data over the leaves, from a sample of them. The stride
// is odd, so that the sample takes every kind of leaf (a leaf's kind is its index modulo 4).
func (t chTree) rawBytes() float64 {
	var sum, n int
	for i := 0; i < t.n; i += max(1, t.n/10000) | 1 {
		sum += len(t.leaf(i)) + len(t.data(i))
		n++
	}
	return float64(sum) / float64(max(n, 1))
}

// populate creates the tree on addr over conns connections: the inner znodes level by level, then
// the leaves table by table, each connection taking whole tables in pipelined multis.
func (t chTree) populate(ctx context.Context, addr string, conns int) error {
	conns = max(conns, 1)
	clients := make([]*client, 0, conns)
	defer func() {
		for _, c := range clients {
			_ = c.close()
		}
	}()
	for range conns {
		c, err := dialClient(addr, 30*time.Second, nil)
		if err != nil {
			return err
		}
		clients = append(clients, c)
	}
	for _, level := range t.dirs() {
		if err := createMany(clients[0], level, nil); err != nil {
			return fmt.Errorf("zkbench: inner znodes: %w", err)
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, conns)
	for ci, c := range clients {
		wg.Go(func() {
			for {
				tb := int(next.Add(1) - 1)
				if tb >= t.tables() {
					return
				}
				if err := ctx.Err(); err != nil {
					errs[ci] = err
					return
				}
				end := min((tb+1)*chPerTable, t.n)
				ops := make([]jute.MultiOp, 0, end-tb*chPerTable)
				for i := tb * chPerTable; i < end; i++ {
					ops = append(ops, jute.MultiOp{Type: jute.OpCreate, Req: &jute.CreateRequest{
						Path: t.leaf(i), Data: t.data(i), ACL: openACL, Flags: jute.ModePersistent}})
				}
				if err := multiBatches(c, ops); err != nil {
					errs[ci] = fmt.Errorf("zkbench: table %d: %w", tb, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	last := t.leaf(t.n - 1)
	if err := clients[0].call(jute.OpExists, &jute.ExistsRequest{Path: last}).result(); err != nil {
		return fmt.Errorf("zkbench: populate: last node %s: %w", last, err)
	}
	return nil
}
