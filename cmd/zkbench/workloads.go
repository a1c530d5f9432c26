package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/zkd-io/zkd/jute"
)

// workloads maps a workload's name to its definition.
var workloads = map[string]workload{
	"create": {name: "create", unit: "create", open: true, setup: setupClientDirs, op: opCreate},
	"set":    {name: "set", unit: "setData", open: true, setup: setupKeys, op: opSet},
	"get":    {name: "get", unit: "getData", open: true, setup: setupKeys, op: opGet},
	"mixed":  {name: "mixed", unit: "get or set", open: true, setup: setupKeys, op: opMixed},
	"multi":  {name: "multi", unit: "multi", open: true, setup: setupKeys, op: opMulti},
	"churn":  {name: "churn", unit: "ephemeral-sequential create+delete", open: true, op: opChurn},
	"large":  {name: "large", unit: "setData of a large value", open: true, setup: setupKeys, op: opSet},
	"session": {name: "session", unit: "session open+close", open: true, op: opSession,
		conns: func(config) int { return 1 }},
	"lock": {name: "lock", unit: "lock acquire+release", op: opLock,
		conns: func(cfg config) int { return cfg.Clients }},
	"watch": {name: "watch", unit: "notification", drive: driveWatch,
		conns: func(config) int { return 1 }},
}

// workloadNames returns the workload names, sorted.
func workloadNames() []string {
	names := make([]string, 0, len(workloads))
	for n := range workloads {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// value returns the data written by value-writing workloads.
func (e *env) value() []byte {
	return []byte(strings.Repeat("v", e.cfg.Size))
}

// key returns the path of key k.
func (e *env) key(k int) string { return fmt.Sprintf("%s/k-%07d", e.base, k) }

// keyFor picks the key for op seq: a fixed permutation-like walk, so that successive ops of one
// client touch different keys.
func (e *env) keyFor(seq int64) string {
	return e.key(int((uint64(seq) * 2654435761) % uint64(e.cfg.Keys)))
}

func setupKeys(e *env) error {
	paths := make([]string, e.cfg.Keys)
	for k := range paths {
		paths[k] = e.key(k)
	}
	return createMany(e.clients[0], paths, e.value())
}

// data returns the value written by this run, built once and shared read-only.
func (e *env) data() []byte {
	if p := e.valueBuf.Load(); p != nil {
		return *p
	}
	b := e.value()
	e.valueBuf.CompareAndSwap(nil, &b)
	return *e.valueBuf.Load()
}

// setupClientDirs gives each client its own parent for the nodes it creates, so that no directory
// grows beyond what one getChildren reply can list when the run is cleaned up.
func setupClientDirs(e *env) error {
	dirs := make([]string, e.cfg.Clients)
	for i := range dirs {
		dirs[i] = fmt.Sprintf("%s/c-%d", e.base, i)
	}
	return createMany(e.clients[0], dirs, nil)
}

func opCreate(e *env, i int, seq int64) error {
	path := fmt.Sprintf("%s/c-%d/n-%d", e.base, i, seq)
	return e.conn(i).call(jute.OpCreate, &jute.CreateRequest{Path: path, Data: e.data(), ACL: openACL, Flags: jute.ModePersistent}).result()
}

func opSet(e *env, i int, seq int64) error {
	return e.conn(i).call(jute.OpSetData, &jute.SetDataRequest{Path: e.keyFor(seq), Data: e.data(), Version: -1}).result()
}

func opGet(e *env, i int, seq int64) error {
	return e.conn(i).call(jute.OpGetData, &jute.GetDataRequest{Path: e.keyFor(seq)}).result()
}

func opMixed(e *env, i int, seq int64) error {
	if rand.Float64() < e.cfg.ReadRatio {
		return opGet(e, i, seq)
	}
	return opSet(e, i, seq)
}

func opMulti(e *env, i int, seq int64) error {
	ops := make([]jute.MultiOp, e.cfg.MultiOps)
	for j := range ops {
		ops[j] = jute.MultiOp{Type: jute.OpSetData, Req: &jute.SetDataRequest{
			Path: e.keyFor(seq*int64(e.cfg.MultiOps) + int64(j)), Data: e.data(), Version: -1}}
	}
	return e.conn(i).call(jute.OpMulti, &jute.MultiRequest{Ops: ops}).multiResult()
}

func opChurn(e *env, i int, seq int64) error {
	c := e.conn(i)
	r := c.call(jute.OpCreate, &jute.CreateRequest{Path: e.base + "/e-", Data: e.data(), ACL: openACL, Flags: jute.ModeEphemeralSequential})
	if err := r.result(); err != nil {
		return err
	}
	resp, ok := r.body.(*jute.CreateResponse)
	if !ok {
		return errProtocol
	}
	return c.call(jute.OpDelete, &jute.DeleteRequest{Path: resp.Path, Version: -1}).result()
}

func opSession(e *env, i int, seq int64) error {
	addr := e.cfg.Addrs[int(seq)%len(e.cfg.Addrs)]
	c, err := e.cfg.dial(addr, nil)
	if err != nil {
		return err
	}
	return c.close()
}

// lockWait bounds how long a contender waits for one predecessor before reporting an error.
const lockWait = 30 * time.Second

// opLock takes and releases the lock at e.base with the herd-free recipe: create an
// ephemeral-sequential node, and until it is the lowest, watch only the next lower one.
func opLock(e *env, i int, seq int64) error {
	c := e.conn(i)
	r := c.call(jute.OpCreate, &jute.CreateRequest{Path: e.base + "/lock-", ACL: openACL, Flags: jute.ModeEphemeralSequential})
	if err := r.result(); err != nil {
		return err
	}
	resp, ok := r.body.(*jute.CreateResponse)
	if !ok {
		return errProtocol
	}
	mine := resp.Path[len(e.base)+1:]
	for {
		v := &lockView{mine: mine}
		if err := c.callInto(jute.OpGetChildren, &jute.GetChildrenRequest{Path: e.base}, v).result(); err != nil {
			return fmt.Errorf("zkbench: getChildren %s: %w", e.base, err)
		}
		if !v.found {
			return fmt.Errorf("zkbench: lock node %s vanished: %w", mine, errProtocol)
		}
		if v.pred == "" {
			break
		}
		pred := e.base + "/" + v.pred
		gone := c.waitFor(pred)
		r := c.call(jute.OpExists, &jute.ExistsRequest{Path: pred, Watch: true})
		if err := r.result(); err != nil {
			c.forget(pred)
			if errors.Is(err, jute.CodeNoNode) {
				continue
			}
			return err
		}
		e.lockWaits.Add(1)
		select {
		case <-gone:
		case <-time.After(lockWait):
			return fmt.Errorf("zkbench: waiting for %s: %w", pred, jute.CodeOperationTimeout)
		}
	}
	return c.call(jute.OpDelete, &jute.DeleteRequest{Path: resp.Path, Version: -1}).result()
}

// lockView is what a lock contender reads of the lock directory's getChildren reply: whether its
// own node is there, and the child just before it. The names share one prefix and zero-padded
// sequence numbers, so text order is sequence order, and the predecessor is the greatest name
// below mine. It scans the reply instead of decoding every name, so that with thousands of
// contenders reading a directory of thousands the load generator leaves the machine's cores to
// the server.
type lockView struct {
	mine  string
	found bool
	pred  string
}

// Encode is never called: a lockView is only decoded.
func (v *lockView) Encode(*jute.Encoder) {}

// Decode scans a getChildren response.
func (v *lockView) Decode(d *jute.Decoder) {
	var pred []byte
	for range max(d.VectorLen(4), 0) {
		name := d.Buffer() // aliases the frame: compared, never kept
		switch {
		case string(name) == v.mine:
			v.found = true
		case string(name) < v.mine && string(name) > string(pred):
			pred = name
		}
	}
	v.pred = string(pred)
}

// watchRoundWait bounds how long a fan-out round waits for its notifications.
const watchRoundWait = 10 * time.Second

// driveWatch measures watch fan-out: cfg.Watchers sessions each hold a data watch on one node;
// a writer sets the node, and the time from just before that write is sent to each session's
// notification is recorded. The next write waits until every watcher has set its watch again.
func driveWatch(ctx context.Context, e *env) error {
	path := e.base + "/w"
	writer := e.clients[0]
	if err := create(writer, path, e.data(), jute.ModePersistent); err != nil {
		return err
	}
	k := e.cfg.Watchers
	armed := make(chan error, 2*k)
	got := make(chan struct{}, 2*k)
	var roundStart atomic.Int64
	watchers := make([]*client, 0, k)
	defer func() {
		for _, w := range watchers {
			_ = w.close()
		}
	}()
	for i := range k {
		var self atomic.Pointer[client]
		arm := func(c *client) {
			c.send(jute.OpGetData, &jute.GetDataRequest{Path: path, Watch: true}, func(r reply) { armed <- r.result() })
		}
		c, err := e.cfg.dial(e.cfg.Addrs[(i+1)%len(e.cfg.Addrs)], func(ev jute.WatcherEvent) {
			if ev.Path != path || ev.Type != jute.EventNodeDataChanged {
				return
			}
			e.rec.done(time.Unix(0, roundStart.Load()), nil)
			got <- struct{}{}
			if c := self.Load(); c != nil {
				arm(c)
			}
		})
		if err != nil {
			return err
		}
		self.Store(c)
		watchers = append(watchers, c)
		arm(c)
	}
	for {
		for range k {
			select {
			case err := <-armed:
				if err != nil {
					return fmt.Errorf("zkbench: arming a watch: %w", err)
				}
			case <-ctx.Done():
				return nil
			}
		}
		roundStart.Store(time.Now().UnixNano())
		if err := writer.call(jute.OpSetData, &jute.SetDataRequest{Path: path, Data: e.data(), Version: -1}).result(); err != nil {
			e.rec.done(time.Now(), err)
			continue
		}
		timeout := time.NewTimer(watchRoundWait)
		for n := 0; n < k; n++ {
			select {
			case <-got:
			case <-timeout.C:
				for ; n < k; n++ {
					e.rec.done(time.Now(), fmt.Errorf("zkbench: notification: %w", jute.CodeOperationTimeout))
				}
				timeout.Stop()
				return fmt.Errorf("zkbench: watch round lost notifications")
			case <-ctx.Done():
				timeout.Stop()
				return nil
			}
		}
		timeout.Stop()
	}
}
