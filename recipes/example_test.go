package recipes

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
)

// exampleServers returns the addresses of the ZooKeeper the package tests run against; in your
// program this is your ensemble, e.g. []string{"zk1:2181", "zk2:2181", "zk3:2181"}.
func exampleServers() []string { return targetAddrs }

func ExampleMutex() {
	s, err := Connect(exampleServers(), 10*time.Second, zk.WithLogger(quietLogger{}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	m := NewMutex(s, "/examples/mutex")
	lease, err := m.Lock(ctx) // blocks until held or ctx ends; never leaves a node behind
	if err != nil {
		fmt.Println(err)
		return
	}
	// Pass lease.Context() to the protected work: it is cancelled if the lock is lost.
	work := lease.Context()
	fmt.Println("held:", work.Err() == nil)
	// Hand the fencing token to the protected resource; it rejects lower tokens.
	fmt.Println("token > 0:", lease.Token().Czxid > 0)

	if err := lease.Unlock(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("released; work cancelled:", work.Err() != nil)
	// Output:
	// held: true
	// token > 0: true
	// released; work cancelled: true
}

func ExampleMutex_TryLock() {
	s, err := Connect(exampleServers(), 10*time.Second, zk.WithLogger(quietLogger{}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	ctx := context.Background()

	first, err := NewMutex(s, "/examples/trylock").TryLock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer first.Unlock(ctx)
	_, err = NewMutex(s, "/examples/trylock").TryLock(ctx)
	fmt.Println("second attempt locked out:", errors.Is(err, ErrLocked))
	// Output:
	// second attempt locked out: true
}

func ExampleLease_Multi() {
	s, err := Connect(exampleServers(), 10*time.Second, zk.WithLogger(quietLogger{}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	ctx := context.Background()
	_, _ = s.Conn().Create("/examples/config", []byte("v0"), 0, zk.WorldACL(zk.PermAll))

	lease, err := NewMutex(s, "/examples/config-lock").Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	// The write applies only while the lock node exists: a holder that lost the lock (and may
	// not know it yet) cannot clobber the next holder's state.
	_, err = lease.Multi(ctx, &zk.SetDataRequest{Path: "/examples/config", Data: []byte("v1"), Version: -1})
	fmt.Println("guarded write:", err)
	_ = lease.Unlock(ctx)

	_, err = lease.Multi(ctx, &zk.SetDataRequest{Path: "/examples/config", Data: []byte("v2"), Version: -1})
	fmt.Println("after release:", errors.Is(err, ErrLockLost))
	// Output:
	// guarded write: <nil>
	// after release: true
}

func ExampleRWMutex() {
	s, err := Connect(exampleServers(), 10*time.Second, zk.WithLogger(quietLogger{}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	ctx := context.Background()
	rw := NewRWMutex(s, "/examples/rw")

	w, err := rw.Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	// Publish, then keep reading what was written without letting a writer in between.
	r, err := w.Downgrade(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = rw.Lock(r.Context()) // an upgrade would deadlock, so it is refused
	fmt.Println("upgrade refused:", errors.Is(err, ErrUpgrade))
	other, err := rw.TryRLock(ctx) // readers share
	fmt.Println("second reader:", err)
	_ = other.Unlock(ctx)
	_ = r.Unlock(ctx)
	// Output:
	// upgrade refused: true
	// second reader: <nil>
}

func ExampleElection() {
	s, err := Connect(exampleServers(), 10*time.Second, zk.WithLogger(quietLogger{}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	ctx := context.Background()

	e := NewElection(s, "/examples/election", WithData([]byte("node-a")))
	leadership, err := e.Campaign(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	leader, _ := e.Leader(ctx)
	fmt.Printf("leader: %s\n", leader.Data)
	// Lead until leadership.Done() closes (session lost, node deleted) or we resign.
	_ = leadership.Unlock(ctx) // resign
	_, err = e.Leader(ctx)
	fmt.Println("no leader:", errors.Is(err, ErrNoLeader))
	// Output:
	// leader: node-a
	// no leader: true
}

func ExampleSemaphore() {
	s, err := Connect(exampleServers(), 10*time.Second, zk.WithLogger(quietLogger{}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	ctx := context.Background()

	sem := NewSemaphore(s, "/examples/semaphore", 2)
	leases, err := sem.AcquireN(ctx, 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = sem.TryAcquire(ctx)
	fmt.Println("third lease refused:", errors.Is(err, ErrLocked))
	for _, l := range leases {
		_ = l.Unlock(ctx)
	}
	// Output:
	// third lease refused: true
}
