package recipes

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkd-io/zkd/internal/testkit"
)

func TestRWMutexReadersShareWritersExclude(t *testing.T) {
	p := testPath(t)
	ctx := testCtx(t, 30*time.Second)
	s1, s2 := newTestSession(t, nil), newTestSession(t, nil)
	m1, m2 := NewRWMutex(s1, p), NewRWMutex(s2, p)
	r1, err := m1.RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := m2.TryRLock(ctx)
	if err != nil {
		t.Fatalf("second reader: %v", err)
	}
	if _, err := m2.TryLock(ctx); !errors.Is(err, ErrLocked) {
		t.Fatalf("writer while readers hold = %v; want ErrLocked", err)
	}
	for _, l := range []*Lease{r1, r2} {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	w, err := m1.TryLock(ctx)
	if err != nil {
		t.Fatalf("writer on a free lock: %v", err)
	}
	if _, err := m2.TryRLock(ctx); !errors.Is(err, ErrLocked) {
		t.Fatalf("reader while a writer holds = %v; want ErrLocked", err)
	}
	if _, err := m2.TryLock(ctx); !errors.Is(err, ErrLocked) {
		t.Fatalf("writer while a writer holds = %v; want ErrLocked", err)
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if c := children(t, s1, p); len(c) != 0 {
		t.Fatalf("nodes left: %v", c)
	}
}

// TestRWMutexWriterNotStarved: a reader arriving after a queued writer waits behind it.
func TestRWMutexWriterNotStarved(t *testing.T) {
	p := testPath(t)
	ctx := testCtx(t, 30*time.Second)
	s1, s2, s3 := newTestSession(t, nil), newTestSession(t, nil), newTestSession(t, nil)
	r1, err := NewRWMutex(s1, p).RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wgot := make(chan *Lease, 1)
	go func() {
		w, err := NewRWMutex(s2, p).Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		wgot <- w
	}()
	testkit.Eventually(t, 10*time.Second, "writer queued", func() bool { return len(children(t, s1, p)) == 2 })
	if _, err := NewRWMutex(s3, p).TryRLock(ctx); !errors.Is(err, ErrLocked) {
		t.Fatalf("reader behind a queued writer = %v; want ErrLocked", err)
	}
	if err := r1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	w := <-wgot
	if w == nil {
		t.FailNow()
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestRWMutexDowngradeKeepsQueuedWriterOut(t *testing.T) {
	p := testPath(t)
	ctx := testCtx(t, 30*time.Second)
	s1, s2, s3 := newTestSession(t, nil), newTestSession(t, nil), newTestSession(t, nil)
	m := NewRWMutex(s1, p)
	w1, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var acquired atomic.Bool
	wgot := make(chan *Lease, 1)
	go func() {
		w, err := NewRWMutex(s2, p).Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		acquired.Store(true)
		wgot <- w
	}()
	testkit.Eventually(t, 10*time.Second, "writer queued", func() bool { return len(children(t, s1, p)) == 2 })
	r1, err := w1.Downgrade(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if w1.Err() != nil || !isClosed(w1.Done()) {
		t.Fatalf("write lease after downgrade: done %v err %v", isClosed(w1.Done()), w1.Err())
	}
	if r1.Token().Czxid != w1.Token().Czxid {
		t.Fatalf("downgraded token %d; want the write grant's %d", r1.Token().Czxid, w1.Token().Czxid)
	}
	if r1.Token().Seq != w1.Token().Seq {
		t.Fatalf("read node seq %d; want the writer's %d", r1.Token().Seq, w1.Token().Seq)
	}
	// Readers that were allowed before are still allowed only if no writer waits: the queued
	// writer is ahead of any new reader, so a new reader must wait, and the writer must wait for
	// the downgraded reader.
	if _, err := NewRWMutex(s3, p).TryRLock(ctx); !errors.Is(err, ErrLocked) {
		t.Fatalf("new reader behind the queued writer = %v; want ErrLocked", err)
	}
	if err := r1.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if acquired.Load() {
		t.Fatal("queued writer acquired while the downgraded reader holds")
	}
	if err := r1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	w2 := <-wgot
	if w2 == nil {
		t.FailNow()
	}
	if w2.Token().Czxid <= r1.Token().Czxid {
		t.Fatalf("writer token %d not after the read node's %d", w2.Token().Czxid, r1.Token().Czxid)
	}
	_ = w2.Unlock(ctx)
}

func TestRWMutexUpgradeRejected(t *testing.T) {
	p := testPath(t)
	ctx := testCtx(t, 30*time.Second)
	s := newTestSession(t, nil)
	m := NewRWMutex(s, p)
	r, err := m.RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Lock(r.Context()); !errors.Is(err, ErrUpgrade) {
		t.Fatalf("upgrade = %v; want ErrUpgrade", err)
	}
	if _, err := r.Downgrade(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("downgrade of a read lease = %v; want ErrNotHeld", err)
	}
	// A read under a held write lease re-enters it.
	if err := r.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	w, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := m.RLock(w.Context())
	if err != nil || inner.Token() != w.Token() {
		t.Fatalf("read under write = %v, %v; want re-entry", inner, err)
	}
	_ = inner.Unlock(ctx)
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestRWMutexContention(t *testing.T) {
	const sessions, workers, rounds = 3, 3, 4
	p := testPath(t)
	ctx := testCtx(t, 90*time.Second)
	var writers, readers, bad atomic.Int32
	// Holders sign in on the server too, a writer as one node and readers under another, and
	// look for a conflicting holder there, so a violation shows on the server as well.
	if err := ensurePath(ctx, newTestSession(t, nil), p+"-readers"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range sessions {
		s := newTestSession(t, nil)
		m := NewRWMutex(s, p)
		for j := range workers {
			write := (i+j)%2 == 0
			wg.Go(func() {
				for range rounds {
					var l *Lease
					var err error
					if write {
						l, err = m.Lock(ctx)
					} else {
						l, err = m.RLock(ctx)
					}
					if err != nil {
						t.Error(err)
						return
					}
					if write {
						if writers.Add(1) != 1 || readers.Load() != 0 {
							bad.Add(1)
						}
					} else {
						readers.Add(1)
						if writers.Load() != 0 {
							bad.Add(1)
						}
					}
					// The lock's work, across three server round trips: sign in, look for a
					// conflicting holder, sign out.
					if err := signIn(s.Conn(), p, write, &bad); err != nil {
						t.Error(err)
					}
					if write {
						writers.Add(-1)
					} else {
						readers.Add(-1)
					}
					if err := l.Unlock(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if n := bad.Load(); n != 0 {
		t.Fatalf("%d reader/writer rule violations", n)
	}
}

// signIn is a reader's or writer's work inside an RWMutex at p: it creates its node (a writer
// p+"-writer", which fails if another writer is inside; a reader one under p+"-readers"), counts
// a violation in bad if a conflicting holder's node is there, and deletes its node.
func signIn(c *zk.Conn, p string, write bool, bad *atomic.Int32) error {
	if write {
		if _, err := c.Create(p+"-writer", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); errors.Is(err, zk.ErrNodeExists) {
			bad.Add(1) // another writer is inside
			return nil
		} else if err != nil {
			return err
		}
		if kids, _, err := c.Children(p + "-readers"); err != nil {
			return err
		} else if len(kids) != 0 {
			bad.Add(1)
		}
		return c.Delete(p+"-writer", -1)
	}
	node, err := c.Create(p+"-readers/r", nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if err != nil {
		return err
	}
	if ok, _, err := c.Exists(p + "-writer"); err != nil {
		return err
	} else if ok {
		bad.Add(1)
	}
	return c.Delete(node, -1)
}
