package recipes

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/go-zookeeper/zk"
)

// ErrNoLeader reports that an election has no candidate at the moment.
var ErrNoLeader = errors.New("recipes: no leader")

// Election is a leader election on a path: candidates queue like Mutex contenders and the
// first one leads. Campaign returns a Lease that is the leadership: Done, Err and Context report
// its loss (the node deleted, the session expired, or, with WithLoseOnSuspend, the connection
// lost), Token is its fencing token, Multi guards writes, and Unlock resigns. Give each candidate
// its id with WithData; observers read it from Leader and Observe.
//
// Before reporting leadership, Campaign checks that its node exists and is owned by the current
// session, so a node left by an old session is never taken for leadership (Curator's
// CURATOR-696). An Election is safe for concurrent use.
type Election struct {
	m *Mutex
}

// Participant is a candidate as observers see it.
type Participant struct {
	// Path is the candidate's node.
	Path string
	// Data is the candidate's data (its id, from WithData).
	Data []byte
	// Czxid is the zxid that created the node: the leadership's fencing token.
	Czxid int64
}

// NewElection returns an Election on path using the session s.
func NewElection(s *Session, path string, opts ...Option) *Election {
	return &Election{m: NewMutex(s, path, opts...)}
}

// Campaign queues as a candidate and blocks until this candidate leads or ctx ends; on error no
// candidate node is left behind. Resign by unlocking the returned Lease.
func (e *Election) Campaign(ctx context.Context) (*Lease, error) { return e.m.Lock(ctx) }

// Leader returns the current leader, or an error wrapping ErrNoLeader.
func (e *Election) Leader(ctx context.Context) (Participant, error) {
	if e.m.err != nil {
		return Participant{}, e.m.err
	}
	q := &e.m.q
	for {
		if err := ctx.Err(); err != nil {
			return Participant{}, err
		}
		kids, _, err := q.s.conn.Children(q.path)
		if errors.Is(err, zk.ErrNoNode) {
			return Participant{}, fmt.Errorf("recipes: election %s: %w", q.path, ErrNoLeader)
		}
		if err != nil {
			if isConnLoss(err) {
				if _, err := q.s.waitConnected(ctx); err != nil {
					return Participant{}, err
				}
				continue
			}
			return Participant{}, opError("children", q.path, err)
		}
		first := ""
		for _, k := range kids {
			if d := q.opts.proto.decide(kids, k, roleExclusive); d.held && isContender(q.opts.proto, k) {
				first = k
				break
			}
		}
		if first == "" {
			return Participant{}, fmt.Errorf("recipes: election %s: %w", q.path, ErrNoLeader)
		}
		p := q.path + "/" + first
		data, st, err := q.s.conn.Get(p)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			if isConnLoss(err) {
				continue
			}
			return Participant{}, opError("get", p, err)
		}
		return Participant{Path: p, Data: data, Czxid: st.Czxid}, nil
	}
}

// isContender reports whether a child name is a contender node of the protocol at all.
func isContender(p Protocol, name string) bool {
	switch p {
	case Native:
		_, _, ok := parseNative(name)
		return ok
	case Kazoo:
		return kazooLockOnly.MatchString(name)
	default:
		return true
	}
}

// Observe reports the leader each time it changes, starting with the current one; a zero
// Participant means there is no leader. The channel is closed when ctx ends (or on an
// unrecoverable error). The goroutine behind it stops with ctx.
func (e *Election) Observe(ctx context.Context) <-chan Participant {
	out := make(chan Participant, 1)
	go func() {
		defer close(out)
		q := &e.m.q
		var last Participant
		first := true
		for {
			cur, err := e.Leader(ctx)
			if err != nil && !errors.Is(err, ErrNoLeader) {
				return // ctx ended, or an error Leader cannot recover from
			}
			if first || cur.Path != last.Path {
				select {
				case out <- cur:
				case <-ctx.Done():
					return
				}
				last, first = cur, false
			}
			var ch <-chan zk.Event
			if cur.Path != "" {
				_, _, ch, err = q.s.conn.GetW(cur.Path)
			} else {
				var kids []string
				kids, _, ch, err = q.s.conn.ChildrenW(q.path)
				if err == nil && slices.ContainsFunc(kids, func(k string) bool { return isContender(q.opts.proto, k) }) {
					continue // a candidate arrived after Leader looked
				}
				if errors.Is(err, zk.ErrNoNode) {
					var exists bool
					exists, _, ch, err = q.s.conn.ExistsW(q.path)
					if err == nil && exists {
						continue // created meanwhile: watch its children instead
					}
				}
			}
			if err != nil {
				if errors.Is(err, zk.ErrNoNode) {
					continue
				}
				if isConnLoss(err) {
					if _, err := q.s.waitConnected(ctx); err != nil {
						return
					}
					continue
				}
				return
			}
			select {
			case <-ch:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}
