package recipes

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"

	"github.com/go-zookeeper/zk"
)

// Barrier blocks waiters while its node exists (the ZooKeeper barrier recipe): a coordinator
// calls Hold to raise it and Release to let every waiter go. Waiters watch the node with getData,
// so a waiter on a barrier that is not raised leaves no watch behind. Like any ZooKeeper read,
// Wait sees its own server's state: on a cluster a waiter told out of band that the barrier was
// just raised should Sync its connection on the path first, or it may pass. A Barrier is safe
// for concurrent use.
type Barrier struct {
	s    *Session
	path string
	err  error
}

// NewBarrier returns a Barrier on path using the session s.
func NewBarrier(s *Session, p string) *Barrier {
	q, err := newQueue(s, p, nil)
	return &Barrier{s: s, path: q.path, err: err}
}

// Hold raises the barrier (creating its node and missing parents); raising a raised barrier is
// not an error.
func (b *Barrier) Hold(ctx context.Context) error {
	if b.err != nil {
		return b.err
	}
	return ensurePath(ctx, b.s, b.path)
}

// Release lowers the barrier, releasing every waiter; lowering a lowered barrier is not an
// error.
func (b *Barrier) Release(ctx context.Context) error {
	if b.err != nil {
		return b.err
	}
	for {
		if _, err := b.s.waitConnected(ctx); err != nil {
			return err
		}
		err := b.s.conn.Delete(b.path, -1)
		if err == nil || errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if !isConnLoss(err) {
			return opError("delete", b.path, err)
		}
	}
}

// Wait blocks while the barrier is raised, until ctx ends.
func (b *Barrier) Wait(ctx context.Context) error {
	if b.err != nil {
		return b.err
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		_, _, ch, err := b.s.conn.GetW(b.path)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			if !isConnLoss(err) && !errors.Is(err, zk.ErrSessionExpired) {
				return opError("wait", b.path, err)
			}
			if _, err := b.s.waitConnected(ctx); err != nil {
				return err
			}
			continue
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// DoubleBarrier lets a fixed number of participants enter a computation together and leave it
// together (the ZooKeeper double-barrier recipe). Each participant has its own DoubleBarrier
// value; Enter blocks until Count participants have entered, Leave until all have left. The last
// to leave removes the "ready" node, so the path can be used for another round. Methods of one
// DoubleBarrier must not be called concurrently.
type DoubleBarrier struct {
	s     *Session
	path  string
	count int
	node  string
	err   error
}

const readyNode = "ready"

// NewDoubleBarrier returns a participant of a double barrier on path for count participants.
func NewDoubleBarrier(s *Session, p string, count int) *DoubleBarrier {
	q, err := newQueue(s, p, nil)
	if err == nil && count < 1 {
		err = fmt.Errorf("recipes: double barrier count %d: %w", count, ErrBadArgument)
	}
	return &DoubleBarrier{s: s, path: q.path, count: count, err: err}
}

// Enter joins the barrier and blocks until count participants have joined or ctx ends. On
// error its node is removed.
func (b *DoubleBarrier) Enter(ctx context.Context) error {
	if b.err != nil {
		return b.err
	}
	if err := ensurePath(ctx, b.s, b.path); err != nil {
		return err
	}
	sid, err := b.s.waitConnected(ctx)
	if err != nil {
		return err
	}
	b.node = b.path + "/" + newHex32()
	for {
		_, err := b.s.conn.Create(b.node, []byte{}, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
		if err == nil || errors.Is(err, zk.ErrNodeExists) {
			break // NodeExists: our own earlier attempt, whose reply was lost, created it
		}
		if !isConnLoss(err) {
			return opError("create", b.node, err)
		}
		if sid, err = b.s.waitConnected(ctx); err != nil {
			b.s.deleteLater(pendingKey{sid: sid, path: b.node})
			return err
		}
	}
	ready := b.path + "/" + readyNode
	for {
		ok, _, ch, err := b.s.conn.ExistsW(ready)
		if err == nil && ok {
			return nil
		}
		if err == nil {
			var kids []string
			kids, _, err = b.s.conn.Children(b.path)
			if err == nil && len(slices.DeleteFunc(kids, func(k string) bool { return k == readyNode })) >= b.count {
				_, err = b.s.conn.Create(ready, []byte{}, 0, zk.WorldACL(zk.PermAll))
				if err == nil || errors.Is(err, zk.ErrNodeExists) {
					return nil
				}
			}
		}
		if err != nil {
			if !isConnLoss(err) {
				removeNode(b.s, b.node, sid)
				return opError("enter", b.path, err)
			}
			if _, err := b.s.waitConnected(ctx); err != nil {
				removeNode(b.s, b.node, sid)
				return err
			}
			continue
		}
		select {
		case <-ch:
		case <-ctx.Done():
			removeNode(b.s, b.node, sid)
			return ctx.Err()
		}
	}
}

// Leave leaves the barrier and blocks until every participant has left or ctx ends.
func (b *DoubleBarrier) Leave(ctx context.Context) error {
	if b.err != nil {
		return b.err
	}
	if b.node == "" {
		return fmt.Errorf("recipes: leave %s: %w", b.path, ErrNotHeld)
	}
	own := path.Base(b.node)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		kids, _, err := b.s.conn.Children(b.path)
		if err != nil {
			if !isConnLoss(err) {
				return opError("leave", b.path, err)
			}
			if _, err := b.s.waitConnected(ctx); err != nil {
				return err
			}
			continue
		}
		kids = slices.DeleteFunc(kids, func(k string) bool { return k == readyNode })
		slices.Sort(kids)
		mine := slices.Contains(kids, own)
		if len(kids) == 0 || (len(kids) == 1 && mine) {
			// The last one out removes ready, then itself.
			_ = b.s.conn.Delete(b.path+"/"+readyNode, -1)
			if mine {
				if err := b.s.conn.Delete(b.node, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
					continue
				}
			}
			b.node = ""
			return nil
		}
		watch := kids[0] // others wait for the lowest
		if kids[0] == own {
			watch = kids[len(kids)-1] // the lowest waits for the highest
		} else if mine {
			if err := b.s.conn.Delete(b.node, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
				continue
			}
		}
		_, _, ch, err := b.s.conn.GetW(b.path + "/" + watch)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			if !isConnLoss(err) {
				return opError("leave", b.path, err)
			}
			if _, err := b.s.waitConnected(ctx); err != nil {
				return err
			}
			continue
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
