package recipes

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/go-zookeeper/zk"
)

// ledger is the work the exclusion tests do inside a critical section, in place of an idle
// wait: a check-and-set of a shared node on the server under test, through the holder's own
// session. Each holder reads the node, then writes it conditionally on the version it read, so
// its critical section spans two server round trips that interleave with the lock's own traffic.
// Two holders inside at once show twice: in the test's own holder count, held across the round
// trips, and on the server, where the later conditional write fails (a conflict) and the node's
// version ends short of the number of holders.
type ledger struct {
	path      string
	conflicts atomic.Int32
}

// newLedger creates the ledger node p (a sibling of the lock path, so a check that the lock
// left no children is not disturbed) and deletes it at the end of the test.
func newLedger(t *testing.T, s *Session, p string) *ledger {
	t.Helper()
	if err := ensurePath(testCtx(t, testTimeout*5), s, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Conn().Delete(p, -1) })
	return &ledger{path: p}
}

// advance records one holder, tag (its lock node's path: unique to the hold), with a
// check-and-set on the ledger node through s. A connection loss leaves the write's outcome
// unknown, as the chaos test's broken connections do; advance then waits for the connection,
// reads the node again and finds its tag if the write went through.
func (lg *ledger) advance(ctx context.Context, s *Session, tag string) error {
	c := s.Conn()
	for first := true; ; first = false {
		if !first {
			if _, err := s.waitConnected(ctx); err != nil {
				return err
			}
		}
		data, st, err := c.Get(lg.path)
		if isConnLoss(err) {
			continue
		}
		if err != nil {
			return opError("ledger get", lg.path, err)
		}
		if string(data) == tag {
			return nil // a write whose reply was lost went through
		}
		_, err = c.Set(lg.path, []byte(tag), st.Version)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, zk.ErrBadVersion):
			// Someone wrote between our read and our write. It may be our own earlier write:
			// one sent before a connection loss can commit after we reconnect to another server
			// and read there (ZooKeeper allows it too: the outcome of a request in flight at a
			// connection loss is unknown). This server applied it before refusing ours, so a
			// read here tells which.
			data, _, gerr := c.Get(lg.path)
			if isConnLoss(gerr) {
				continue
			}
			if gerr != nil {
				return opError("ledger get", lg.path, gerr)
			}
			if string(data) != tag {
				lg.conflicts.Add(1) // another holder wrote between our read and our write
			}
			return nil
		case isConnLoss(err):
			continue
		default:
			return opError("ledger set", lg.path, err)
		}
	}
}

// verify fails t unless every one of want holders advanced the ledger, one at a time.
func (lg *ledger) verify(t *testing.T, s *Session, want int) {
	t.Helper()
	if n := lg.conflicts.Load(); n != 0 {
		t.Errorf("ledger: %d check-and-set conflicts between holders", n)
	}
	_, st, err := s.Conn().Get(lg.path)
	if err != nil {
		t.Fatal(err)
	}
	if int(st.Version) != want {
		t.Errorf("ledger version = %d; want %d (one write per holder)", st.Version, want)
	}
}
