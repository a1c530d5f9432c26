package recipes

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// errRestart tells the acquire loop that the session changed under it, so its node is gone (or
// going) and it must start again with a new node. It never leaves the package.
var errRestart = errors.New("recipes: restart with a new node")

// Option configures a recipe.
type Option func(*options)

type options struct {
	proto         Protocol
	data          []byte
	acl           []zk.ACL
	loseOnSuspend bool
	containers    bool
	maxHold       time.Duration
}

func buildOptions(opts []Option) options {
	o := options{acl: zk.WorldACL(zk.PermAll)}
	for _, f := range opts {
		f(&o)
	}
	if o.data == nil {
		o.data = []byte{}
	}
	return o
}

// WithProtocol selects the naming and ordering protocol (Native by default); use Curator or
// Kazoo to contend on a path shared with those libraries.
func WithProtocol(p Protocol) Option { return func(o *options) { o.proto = p } }

// WithData sets the data stored in the recipe's nodes (for example a participant id, which an
// Election's observers read). kazoo decodes contender data as UTF-8.
func WithData(data []byte) Option { return func(o *options) { o.data = data } }

// WithACL sets the ACL of the contender nodes the recipe creates (world:anyone with all
// permissions by default); missing parents are always created world-accessible.
func WithACL(acl []zk.ACL) Option { return func(o *options) { o.acl = acl } }

// WithLoseOnSuspend makes a held lease end with ErrSuspended as soon as the connection is lost,
// instead of only when the session is known to have ended (Curator's standard error policy).
// Use it when the protected work cannot tolerate any doubt about ownership.
func WithLoseOnSuspend() Option { return func(o *options) { o.loseOnSuspend = true } }

// WithContainerParents creates the recipe's path and missing ancestors as container nodes, which
// the server removes once they are empty (Curator's choice), instead of persistent nodes. On a
// server without container support it falls back to persistent nodes. A removed path is created
// again on the next acquire; its sequence numbers restart, which the ordering tolerates.
func WithContainerParents() Option { return func(o *options) { o.containers = true } }

// WithMaxHold limits how long a lease may be held: d after the grant, the lease ends by itself.
// Done closes, Err and a later Unlock (on any handle) return an error wrapping both ErrMaxHold
// and ErrLockLost, Context is cancelled with it, and then the lock node is deleted so the next
// contender is granted the lock. It bounds the damage of a holder that hangs or forgets to
// Unlock while its session stays alive; ZooKeeper itself only ends a hold with the session, and
// Curator has no equivalent. The limit belongs to the grant: handles from Lease.Reenter share it,
// and a read lease from Lease.Downgrade keeps the write grant's deadline. A Semaphore applies it
// to its leases, not to its internal mutex. d <= 0 means no limit (the default).
//
// The holder must still stop its work in time (watch Done or Context): the limit releases the
// lock on the server, it does not stop the holder.
func WithMaxHold(d time.Duration) Option { return func(o *options) { o.maxHold = d } }

// queue is the machinery shared by every recipe that queues ephemeral-sequential contender
// nodes under one path: unique per-attempt names, ghost-node recovery, herd-free waiting on the
// single predecessor with getData, ownership checks, and cleanup that never leaves a node.
type queue struct {
	s    *Session
	path string
	opts options
}

func newQueue(s *Session, p string, opts []Option) (queue, error) {
	if s == nil || p == "" || p[0] != '/' || (len(p) > 1 && strings.HasSuffix(p, "/")) || path.Clean(p) != p {
		return queue{}, fmt.Errorf("recipes: path %q: %w", p, ErrBadArgument)
	}
	return queue{s: s, path: p, opts: buildOptions(opts)}, nil
}

// grant is a node that holds (or, for the semaphore, was created in) the queue.
type grant struct {
	node   string // full path
	prefix string // the unique name prefix of the attempt
	sid    int64
	stat   *zk.Stat
}

// acquire queues a node with role r and waits until it is granted. With try it gives up with
// ErrLocked when the node is not granted at once. On any error the node is deleted, or queued
// for background deletion while its session lives.
func (q *queue) acquire(ctx context.Context, r role, try bool) (*grant, error) {
	if err := q.ensure(ctx); err != nil {
		return nil, err
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		g, err := q.create(ctx, r, zk.FlagEphemeral|zk.FlagSequence, "")
		if errors.Is(err, errRestart) {
			continue
		}
		if err != nil {
			return nil, err
		}
		err = q.wait(ctx, g, r, try)
		if errors.Is(err, errRestart) {
			// Normally the node went with its session; if the server kept the session after
			// all, the background deleter removes it.
			q.s.deleteLater(pendingKey{sid: g.sid, path: g.node})
			continue
		}
		if err != nil {
			q.remove(g)
			return nil, err
		}
		return g, nil
	}
}

// create creates one contender node with a fresh unique prefix (or the exact name fixed when it
// is not empty) and recovers from a lost reply: it waits for the session, looks the node up by its
// prefix and adopts it only if the current session owns it.
func (q *queue) create(ctx context.Context, r role, flags int32, fixed string) (*grant, error) {
	sid, err := q.s.waitConnected(ctx)
	if err != nil {
		return nil, err
	}
	prefix := q.opts.proto.newPrefix(r)
	name := prefix
	if fixed != "" {
		name, prefix = fixed, fixed
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		created, err := q.s.conn.Create(q.path+"/"+name, q.opts.data, flags, q.opts.acl)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			// The lock path was removed (a reaped container, a cleanup): create it again.
			if err := q.ensure(ctx); err != nil {
				return nil, err
			}
		case err == nil:
			g := &grant{node: created, prefix: prefix, sid: sid}
			if !q.s.alive(sid) {
				// The create may have run under a newer session: the ownership check at the
				// end of wait rejects it, and its deletion is queued here.
				q.s.deleteLater(pendingKey{sid: q.s.ID(), path: created})
				return nil, errRestart
			}
			return g, nil
		case errors.Is(err, zk.ErrSessionExpired):
			return nil, errRestart
		case isConnLoss(err):
			g, err := q.recover(ctx, prefix, sid)
			if err != nil || g != nil {
				return g, err
			}
			// Not created. A late commit of the lost request is cleaned up in the background,
			// and the next attempt uses a new prefix.
			q.s.deleteLater(pendingKey{sid: sid, path: q.path, prefix: prefix})
			if fixed == "" {
				prefix = q.opts.proto.newPrefix(r)
				name = prefix
			}
		default:
			return nil, opError("create", q.path+"/"+name, err)
		}
	}
}

// recover finds the node of a create whose reply was lost. It returns (nil, nil) when no node
// was created, errRestart when the session changed (any node found is deleted).
func (q *queue) recover(ctx context.Context, prefix string, sid int64) (*grant, error) {
	for {
		cur, err := q.s.waitConnected(ctx)
		if err != nil {
			q.s.deleteLater(pendingKey{sid: sid, path: q.path, prefix: prefix})
			return nil, err
		}
		children, _, err := q.s.conn.Children(q.path)
		if isConnLoss(err) {
			continue
		}
		if err != nil && !errors.Is(err, zk.ErrSessionExpired) {
			q.s.deleteLater(pendingKey{sid: sid, path: q.path, prefix: prefix})
			return nil, opError("children", q.path, err)
		}
		var found string
		for _, c := range children {
			if strings.HasPrefix(c, prefix) {
				found = q.path + "/" + c
				break
			}
		}
		if cur != sid || !q.s.alive(sid) || err != nil {
			// The old session is gone; a node still listed belongs to a closing session.
			if found != "" {
				_ = q.s.conn.Delete(found, -1)
			}
			return nil, errRestart
		}
		if found == "" {
			return nil, nil
		}
		_, st, err := q.s.conn.Exists(found)
		if isConnLoss(err) {
			continue
		}
		if err != nil {
			return nil, opError("exists", found, err)
		}
		if st == nil {
			return nil, nil
		}
		if st.EphemeralOwner != sid || !q.s.alive(sid) {
			_ = q.s.conn.Delete(found, -1)
			return nil, errRestart
		}
		return &grant{node: found, prefix: prefix, sid: sid}, nil
	}
}

// wait blocks until g is granted, watching only the single child the protocol names, with
// getData (never exists, whose watch would leak on a vanished node).
func (q *queue) wait(ctx context.Context, g *grant, r role, try bool) error {
	lost, why := q.s.lost(g.sid)
	own := path.Base(g.node)
	for {
		children, _, err := q.s.conn.Children(q.path)
		if err != nil {
			if err := q.retryable(ctx, err, g.sid, lost, why); err != nil {
				return err
			}
			continue
		}
		d := q.opts.proto.decide(children, own, r)
		if !d.found {
			return q.vanished(g, why)
		}
		if d.held {
			_, st, err := q.s.conn.Exists(g.node)
			if err != nil {
				if err := q.retryable(ctx, err, g.sid, lost, why); err != nil {
					return err
				}
				continue
			}
			if st == nil {
				return q.vanished(g, why)
			}
			if st.EphemeralOwner != g.sid || !q.s.alive(g.sid) {
				if !q.s.alive(g.sid) {
					return q.sessionEnded(why)
				}
				return fmt.Errorf("recipes: %s: %w", g.node, ErrInconsistent)
			}
			g.stat = st
			return nil
		}
		if try {
			return fmt.Errorf("recipes: %s: %w", q.path, ErrLocked)
		}
		if d.watch == "" {
			// Our own name does not parse under the protocol: nothing sensible to wait for.
			return fmt.Errorf("recipes: %s: unparsable own node: %w", g.node, ErrInconsistent)
		}
		_, _, ch, err := q.s.conn.GetW(q.path + "/" + d.watch)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			if err := q.retryable(ctx, err, g.sid, lost, why); err != nil {
				return err
			}
			continue
		}
		select {
		case ev := <-ch:
			if ev.Type == zk.EventNotWatching && errors.Is(ev.Err, zk.ErrClosing) {
				return ErrClosed
			}
		case <-lost:
			return q.sessionEnded(why)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// retryable handles an error from a request made while waiting: after a connection loss it
// waits for the connection (or the end of the session or ctx) and returns nil to retry.
func (q *queue) retryable(ctx context.Context, err error, sid int64, lost <-chan struct{}, why func() error) error {
	switch {
	case errors.Is(err, zk.ErrSessionExpired):
		return errRestart
	case errors.Is(err, zk.ErrClosing):
		return ErrClosed
	case isConnLoss(err):
		if _, werr := q.s.waitConnected(ctx); werr != nil {
			return werr
		}
		if isClosed(lost) {
			return q.sessionEnded(why)
		}
		return nil
	default:
		return opError("wait", q.path, err)
	}
}

// sessionEnded maps the end of a session to a restart, or to ErrClosed if the Session closed.
func (q *queue) sessionEnded(why func() error) error {
	if errors.Is(why(), ErrClosed) {
		return ErrClosed
	}
	return errRestart
}

// vanished handles our node missing from the children: a session change means restart, anything
// else means someone deleted it.
func (q *queue) vanished(g *grant, why func() error) error {
	if !q.s.alive(g.sid) {
		return q.sessionEnded(why)
	}
	return fmt.Errorf("recipes: %s: %w", g.node, ErrInconsistent)
}

// remove deletes g's node on a detached path: at once if connected, else (or after a
// connection loss) in the background while its session lives.
func (q *queue) remove(g *grant) {
	removeNode(q.s, g.node, g.sid)
}

func removeNode(s *Session, node string, sid int64) {
	if !s.alive(sid) {
		return // the node went with its session
	}
	err := s.conn.Delete(node, -1)
	if err == nil || errors.Is(err, zk.ErrNoNode) || isSessionGone(err) {
		return
	}
	s.deleteLater(pendingKey{sid: sid, path: node})
}

// ensure creates the queue's path and missing ancestors, as containers with
// WithContainerParents.
func (q *queue) ensure(ctx context.Context) error {
	return ensurePathMode(ctx, q.s, q.path, q.opts.containers)
}

// ensurePath creates p and its missing ancestors as persistent nodes.
func ensurePath(ctx context.Context, s *Session, p string) error {
	return ensurePathMode(ctx, s, p, false)
}

// ensurePathMode creates p and its missing ancestors, as container nodes if containers is set
// (falling back to persistent nodes on a server that refuses containers).
func ensurePathMode(ctx context.Context, s *Session, p string, containers bool) error {
	for {
		if _, err := s.waitConnected(ctx); err != nil {
			return err
		}
		ok, _, err := s.conn.Exists(p)
		if err == nil && ok {
			return nil
		}
		if err == nil {
			break
		}
		if !isConnLoss(err) && !errors.Is(err, zk.ErrSessionExpired) {
			return opError("exists", p, err)
		}
	}
	parts := strings.Split(p[1:], "/")
	cur := ""
	for _, part := range parts {
		cur += "/" + part
		for {
			if _, err := s.waitConnected(ctx); err != nil {
				return err
			}
			var err error
			if containers {
				_, err = s.conn.CreateContainer(cur, []byte{}, zk.FlagContainer, zk.WorldACL(zk.PermAll))
				if err != nil && !errors.Is(err, zk.ErrNodeExists) && !isConnLoss(err) && !errors.Is(err, zk.ErrSessionExpired) {
					containers = false // no container support: fall back to persistent nodes
					continue
				}
			} else {
				_, err = s.conn.Create(cur, []byte{}, 0, zk.WorldACL(zk.PermAll))
			}
			if err == nil || errors.Is(err, zk.ErrNodeExists) {
				break
			}
			if !isConnLoss(err) && !errors.Is(err, zk.ErrSessionExpired) {
				return opError("create", cur, err)
			}
		}
	}
	return nil
}
