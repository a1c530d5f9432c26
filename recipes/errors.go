package recipes

import (
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/go-zookeeper/zk"
)

// Sentinel errors. Compare with errors.Is; returned errors wrap them with context, and the
// underlying go-zookeeper error (for example zk.ErrSessionExpired) when there is one.
var (
	// ErrLocked reports that TryLock found the lock held by another contender.
	ErrLocked = errors.New("recipes: lock is held by another contender")
	// ErrLockLost reports that a held lock was lost: its node was deleted or its session ended.
	ErrLockLost = errors.New("recipes: lock lost")
	// ErrSessionExpired reports that the ZooKeeper session that owned a node has ended.
	ErrSessionExpired = errors.New("recipes: session expired")
	// ErrSuspended reports that the connection was lost while the lease policy treats a
	// suspended connection as a lost lock (see WithLoseOnSuspend).
	ErrSuspended = errors.New("recipes: connection suspended")
	// ErrMaxHold reports that a lease ended because it was held for its WithMaxHold limit. The
	// errors that report it also wrap ErrLockLost.
	ErrMaxHold = errors.New("recipes: lease held past its limit")
	// ErrNotHeld reports a release or re-entry of a lease that is no longer held.
	ErrNotHeld = errors.New("recipes: lease not held")
	// ErrInconsistent reports that our own node vanished, or is owned by another session, while
	// the session that created it is still alive: someone else deleted it.
	ErrInconsistent = errors.New("recipes: own node vanished or is owned by another session")
	// ErrUpgrade reports an attempt to take a write lock while holding a read lock of the same
	// RWMutex; that would deadlock, so it is refused.
	ErrUpgrade = errors.New("recipes: cannot upgrade a read lock to a write lock")
	// ErrReleasePending reports that Unlock could not confirm the deletion of the lock node
	// before its context ended; the node is deleted in the background while the session lives.
	ErrReleasePending = errors.New("recipes: release not confirmed, deletion continues in the background")
	// ErrClosed reports that the Session was closed.
	ErrClosed = errors.New("recipes: session closed")
	// ErrBadArgument reports an invalid argument, such as a malformed path or a zero count.
	ErrBadArgument = errors.New("recipes: bad argument")
)

// isConnLoss reports whether err leaves a request's outcome unknown while the session may live.
// go-zookeeper reports a failed write of the request as the raw network error, not as
// zk.ErrConnectionClosed, so network errors count too.
func isConnLoss(err error) bool {
	if err == nil {
		return false
	}
	var ne net.Error
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
		errors.As(err, &ne) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// isSessionGone reports whether err means the session that issued the request has ended.
func isSessionGone(err error) bool {
	return errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, zk.ErrClosing)
}

// opError wraps err with the operation and path it concerns.
func opError(op, path string, err error) error {
	return fmt.Errorf("recipes: %s %s: %w", op, path, err)
}
