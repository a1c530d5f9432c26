package recipes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// Session wraps a *zk.Conn and tracks what go-zookeeper reports only as a stream of events:
// which ZooKeeper session is current, whether the connection is up, and when a session has
// ended. go-zookeeper silently opens a new session after an expiry and never reports expiry while
// it is disconnected, so the Session also declares a session lost once the connection has been
// down for the session timeout (Curator's "simulated expiration"), and it compares session ids on
// every reconnect.
//
// A Session also owns a background deleter that keeps trying to delete nodes whose removal could
// not be confirmed (a cancelled acquire, an Unlock cut short) for as long as the session that
// owns them lives, so no contender node is left behind.
//
// All methods are safe for concurrent use. Recipes built on one Session share its connection;
// two contenders that must exclude each other may share a Session, since every acquire creates
// its own node.
type Session struct {
	conn     *zk.Conn
	timeout  time.Duration
	ownsConn bool
	wake     chan struct{} // buffered(1): pokes the background deleter
	done     chan struct{} // closed by Close
	wg       sync.WaitGroup

	mu struct {
		sync.Mutex
		id        int64                   // the current session id, 0 before the first or after an expiry
		connected bool                    // a connection with a live session is up
		lost      map[int64]*sessionLoss  // per session id, closed when that session is known gone
		suspended chan struct{}           // closed while disconnected
		resumed   chan struct{}           // closed while connected
		timer     *time.Timer             // simulated expiry while disconnected
		closed    bool                    // Close was called
		pending   map[pendingKey]struct{} // nodes the background deleter must remove
	}
}

type sessionLoss struct {
	ch  chan struct{}
	err error
}

// pendingKey is one background deletion: either a node path, or a parent and a unique name
// prefix (a create whose reply was lost), owned by session sid.
type pendingKey struct {
	sid    int64
	path   string // full path of the node, or of the parent when prefix is set
	prefix string
}

// Connect dials ZooKeeper with go-zookeeper and returns a Session that owns the connection.
// timeout is the session timeout requested from the server; it also bounds how long the Session
// waits while disconnected before it declares the session lost. options are go-zookeeper
// connection options such as zk.WithDialer or zk.WithLogger, but not zk.WithEventCallback, which
// the Session uses itself. Close the Session, not the Conn.
func Connect(servers []string, timeout time.Duration, options ...func(*zk.Conn)) (*Session, error) {
	s := newSession(timeout)
	s.ownsConn = true
	_, _, err := zk.Connect(servers, timeout, func(c *zk.Conn) {
		// Runs inside zk.Connect before any event can be delivered, so handle never sees a nil conn.
		s.conn = c
		for _, o := range options {
			o(c)
		}
	}, zk.WithEventCallback(s.handle))
	if err != nil {
		return nil, fmt.Errorf("recipes: connect: %w", err)
	}
	s.wg.Go(s.deleter)
	return s, nil
}

// NewSession wraps a connection the caller created with zk.Connect. events must be the channel
// zk.Connect returned; the Session consumes it until it is closed (when the Conn is closed) or
// until Close, so the caller must not read it too. timeout must be the session timeout passed to
// zk.Connect. The caller keeps ownership of conn and closes it after closing the Session.
func NewSession(conn *zk.Conn, events <-chan zk.Event, timeout time.Duration) *Session {
	s := newSession(timeout)
	s.conn = conn
	s.mu.Lock()
	if conn.State() == zk.StateHasSession {
		s.mu.id = conn.SessionID()
		s.setConnectedLocked()
	}
	s.mu.Unlock()
	s.wg.Go(s.deleter)
	s.wg.Go(func() {
		for {
			select {
			case ev, ok := <-events:
				if !ok {
					s.shutdown(ErrClosed)
					return
				}
				s.handle(ev)
			case <-s.done:
				return
			}
		}
	})
	return s
}

func newSession(timeout time.Duration) *Session {
	s := &Session{timeout: timeout, wake: make(chan struct{}, 1), done: make(chan struct{})}
	s.mu.lost = make(map[int64]*sessionLoss)
	s.mu.suspended = make(chan struct{})
	close(s.mu.suspended)
	s.mu.resumed = make(chan struct{})
	s.mu.pending = make(map[pendingKey]struct{})
	return s
}

// Conn returns the underlying go-zookeeper connection.
func (s *Session) Conn() *zk.Conn { return s.conn }

// ID returns the current session id, or 0 while no session is established.
func (s *Session) ID() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.id
}

// Suspended returns a channel that is closed while the connection is down: it is already closed
// if the connection is down now, and otherwise closes at the next disconnection. Call it again
// after a reconnect to watch for the next one.
func (s *Session) Suspended() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.suspended
}

// status returns whether the connection is up, with the channels that close at the next
// disconnection and at the next reconnection.
func (s *Session) status() (bool, <-chan struct{}, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.connected, s.mu.suspended, s.mu.resumed
}

// Close stops the Session: every session it tracks is reported lost with ErrClosed, the
// background deleter stops, and the connection is closed if Connect created it. Close is
// idempotent.
func (s *Session) Close() {
	s.shutdown(ErrClosed)
	s.mu.Lock()
	already := s.mu.closed
	s.mu.closed = true
	s.mu.Unlock()
	if !already {
		close(s.done)
	}
	if s.ownsConn && !already {
		s.conn.Close()
	}
	s.wg.Wait()
}

// shutdown reports every known session as lost.
func (s *Session) shutdown(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.mu.lost {
		s.loseLocked(id, err)
	}
	if s.mu.id != 0 {
		s.loseLocked(s.mu.id, err)
	}
	s.mu.id = 0
	s.setDisconnectedLocked(false)
	if s.mu.timer != nil {
		s.mu.timer.Stop()
		s.mu.timer = nil
	}
}

// handle digests one go-zookeeper event. It runs on go-zookeeper's event path and never blocks.
func (s *Session) handle(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return
	}
	switch ev.State {
	case zk.StateHasSession:
		id := s.conn.SessionID()
		if s.mu.id != 0 && s.mu.id != id {
			s.loseLocked(s.mu.id, ErrSessionExpired)
		}
		if l, ok := s.mu.lost[id]; ok && isClosed(l.ch) && id == s.mu.id {
			// We declared this session lost after the session timeout, but the server kept it:
			// leases already ended stay ended (their nodes are queued for deletion); new work
			// may use the session again.
			delete(s.mu.lost, id)
		}
		s.mu.id = id
		if s.mu.timer != nil {
			s.mu.timer.Stop()
			s.mu.timer = nil
		}
		s.setConnectedLocked()
		select {
		case s.wake <- struct{}{}:
		default:
		}
	case zk.StateExpired:
		if s.mu.id != 0 {
			s.loseLocked(s.mu.id, ErrSessionExpired)
		}
		s.mu.id = 0
		s.setDisconnectedLocked(false)
	case zk.StateDisconnected, zk.StateConnecting, zk.StateAuthFailed:
		s.setDisconnectedLocked(true)
	}
}

// setConnectedLocked marks the connection up: resumed is closed and suspended is a fresh channel
// that the next disconnection closes.
func (s *Session) setConnectedLocked() {
	if !s.mu.connected {
		s.mu.connected = true
		close(s.mu.resumed)
		s.mu.suspended = make(chan struct{})
	}
}

// setDisconnectedLocked marks the connection down and, if armTimer, starts the simulated expiry.
func (s *Session) setDisconnectedLocked(armTimer bool) {
	if s.mu.connected {
		s.mu.connected = false
		close(s.mu.suspended)
		s.mu.resumed = make(chan struct{})
	}
	if armTimer && s.mu.timer == nil && s.mu.id != 0 && s.timeout > 0 {
		id := s.mu.id
		s.mu.timer = time.AfterFunc(s.timeout, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.mu.id == id && !s.mu.connected {
				s.loseLocked(id, fmt.Errorf("%w: disconnected for the session timeout", ErrSessionExpired))
				s.mu.timer = nil
			}
		})
	}
}

// loseLocked closes the loss channel of session id.
func (s *Session) loseLocked(id int64, err error) {
	l := s.lossLocked(id)
	select {
	case <-l.ch:
	default:
		l.err = err
		close(l.ch)
	}
}

func (s *Session) lossLocked(id int64) *sessionLoss {
	l, ok := s.mu.lost[id]
	if !ok {
		l = &sessionLoss{ch: make(chan struct{})}
		s.mu.lost[id] = l
	}
	return l
}

// lost returns a channel closed once session id is known to have ended, and a function that
// returns why. A session id that is neither current nor tracked is reported lost at once.
func (s *Session) lost(id int64) (<-chan struct{}, func() error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.lossLocked(id)
	if id == 0 || (id != s.mu.id && !isClosed(l.ch)) {
		l.err = ErrSessionExpired
		close(l.ch)
	}
	if s.mu.closed && !isClosed(l.ch) {
		l.err = ErrClosed
		close(l.ch)
	}
	return l.ch, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		return l.err
	}
}

// alive reports whether session id is current and not known lost.
func (s *Session) alive(id int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.mu.lost[id]; ok && isClosed(l.ch) {
		return false
	}
	return id != 0 && id == s.mu.id
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// waitConnected blocks until a connection with a live session is up and returns its id.
func (s *Session) waitConnected(ctx context.Context) (int64, error) {
	for {
		s.mu.Lock()
		if s.mu.closed {
			s.mu.Unlock()
			return 0, ErrClosed
		}
		if s.mu.connected && s.mu.id != 0 {
			id := s.mu.id
			s.mu.Unlock()
			return id, nil
		}
		resumed := s.mu.resumed
		s.mu.Unlock()
		select {
		case <-resumed:
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-s.done:
			return 0, ErrClosed
		}
	}
}

// deleteLater queues a node of session sid for deletion in the background.
func (s *Session) deleteLater(k pendingKey) {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return
	}
	s.mu.pending[k] = struct{}{}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// pendingDeletes returns how many background deletions are outstanding.
func (s *Session) pendingDeletes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.pending)
}

// deleter is the background deletion loop. It runs until Close and retries each queued node on
// every reconnect, dropping it once deleted or once the connection is back with another session
// (the old session's ephemerals are gone with it).
func (s *Session) deleter() {
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-s.wake:
		case <-retry.C:
		}
		s.mu.Lock()
		keys := make([]pendingKey, 0, len(s.mu.pending))
		for k := range s.mu.pending {
			keys = append(keys, k)
		}
		s.mu.Unlock()
		again := false
		for _, k := range keys {
			s.mu.Lock()
			connected, cur := s.mu.connected, s.mu.id
			s.mu.Unlock()
			if !connected {
				break // retried at the reconnect
			}
			if k.sid != cur {
				s.forget(k) // its session is gone, and its ephemerals with it
				continue
			}
			err := s.tryDelete(k)
			switch {
			case err == nil, errors.Is(err, zk.ErrNoNode):
				s.forget(k)
			case isConnLoss(err):
				again = true // retried on the next reconnect, or by the timer
			default:
				s.forget(k) // a permanent error (ACL, ...): nothing more can be done
			}
		}
		if again {
			retry.Reset(time.Second)
		}
	}
}

func (s *Session) forget(k pendingKey) {
	s.mu.Lock()
	delete(s.mu.pending, k)
	s.mu.Unlock()
}

// tryDelete removes one pending node; for a prefix entry it first finds the node by its prefix
// and deletes it only if session k.sid owns it.
func (s *Session) tryDelete(k pendingKey) error {
	if k.prefix == "" {
		return s.conn.Delete(k.path, -1)
	}
	children, _, err := s.conn.Children(k.path)
	if err != nil {
		return err
	}
	for _, c := range children {
		if !strings.HasPrefix(c, k.prefix) {
			continue
		}
		p := k.path + "/" + c
		_, st, err := s.conn.Exists(p)
		if err != nil {
			return err
		}
		if st != nil && st.EphemeralOwner == k.sid {
			if err := s.conn.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return err
			}
		}
	}
	return nil
}
