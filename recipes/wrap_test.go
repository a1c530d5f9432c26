package recipes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkd-io/zkd/consensus"
	"github.com/zkd-io/zkd/internal/testkit/apachezk"
	"github.com/zkd-io/zkd/internal/testkit/zktest"
	"github.com/zkd-io/zkd/internal/zkfile"
	"github.com/zkd-io/zkd/server"
	"github.com/zkd-io/zkd/znode"
)

// wrapTree is a tree whose lock parents' child counters are about to pass 2^31-1: the next
// sequence number each hands out is its value here, and the one after the wrap is -2^31.
func wrapTree(t *testing.T, parents map[string]int32) *znode.View {
	t.Helper()
	nodes := []znode.RawNode{{Path: "/", Cversion: int32(len(parents)), Pzxid: 2}}
	for p, next := range parents {
		nodes = append(nodes, znode.RawNode{Path: p, Czxid: 2, Mzxid: 2, Pzxid: 2, Ctime: 1, Mtime: 1, Cversion: next})
	}
	tr, err := znode.ImportTree(2, nil, nodes)
	if err != nil {
		t.Fatal(err)
	}
	return tr.View()
}

// seededZkd starts a standalone zkd whose data directory was seeded with v (as zkd restore does)
// and returns its address.
func seededZkd(t *testing.T, v *znode.View) []string {
	t.Helper()
	var b bytes.Buffer
	if err := consensus.WriteBackup(&b, v); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := consensus.RestoreDir(dir, &b, "1", nil); err != nil {
		t.Fatal(err)
	}
	s, err := server.Start(server.Config{Dir: dir, TickTime: 2 * time.Second, MaxClientConns: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.WaitServing(ctx); err != nil {
		t.Fatal(err)
	}
	return []string{s.Addr()}
}

// seededZooKeeper starts Apache ZooKeeper on a snapshot of v (as zkd export writes it) and
// returns its address.
func seededZooKeeper(t *testing.T, v *znode.View) []string {
	t.Helper()
	dir := t.TempDir()
	if _, err := zkfile.ExportView(filepath.Join(dir, "data"), v); err != nil {
		t.Fatal(err)
	}
	p := zktest.Launch(t, 1, func(ports []int) apachezk.ServerConfig {
		return apachezk.ServerConfig{Dir: dir, ClientAddr: fmt.Sprintf("127.0.0.1:%d", ports[0]), HeapMB: 256}
	})
	return []string{p.ClientAddr()}
}

// TestSequenceCounterAtItsLimit creates sequential nodes under a parent whose counter is about to
// pass 2^31-1, on zkd and on Apache ZooKeeper seeded with the same tree. zkd goes on past it
// with negative numbers, formatted as ZooKeeper formats them (-2147483648 follows 2147483647),
// so every name stays unique, as ZooKeeper's documentation says its counter wraps. ZooKeeper 3.8,
// given one create at a time, hands out 2147483647 again instead: a plain sequential create then
// fails with NodeExists (docs/differences.md).
func TestSequenceCounterAtItsLimit(t *testing.T) {
	top := int32(math.MaxInt32)
	v := wrapTree(t, map[string]int32{"/p": top - 1})
	for name, start := range wrapTargets(t) {
		t.Run(name, func(t *testing.T) {
			c, _, err := zk.Connect(start(t, v), testTimeout, zk.WithLogger(quietLogger{}))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			want := []string{"/p/n-2147483646", "/p/n-2147483647", "/p/n--2147483648", "/p/n--2147483647"}
			if name == "zookeeper" {
				want = []string{"/p/n-2147483646", "/p/n-2147483647", "", ""}
			}
			for i, w := range want {
				got, err := c.Create("/p/n-", nil, zk.FlagSequence, zk.WorldACL(zk.PermAll))
				switch {
				case w == "" && !errors.Is(err, zk.ErrNodeExists):
					t.Errorf("create %d: %q, %v; want NodeExists (the counter stays at 2147483647)", i, got, err)
				case w != "" && (err != nil || got != w):
					t.Errorf("create %d: %q, %v; want %q", i, got, err, w)
				}
			}
		})
	}
}

// wrapTargets are the servers the wrap tests seed: zkd, and Apache ZooKeeper when it is installed.
func wrapTargets(t *testing.T) map[string]func(*testing.T, *znode.View) []string {
	targets := map[string]func(*testing.T, *znode.View) []string{"zkd": seededZkd}
	if err := zktest.Check(); err == nil {
		targets["zookeeper"] = seededZooKeeper
	} else {
		t.Logf("real ZooKeeper not checked: %v", err)
	}
	return targets
}

// TestLockOrderAcrossSequenceWrap runs contenders on lock parents whose sequence counter passes
// 2^31-1. On zkd the numbers go on negative (-2147483648 follows 2147483647). With the Native
// protocol the order stays right across the wrap: a contender past it never takes a lock held
// before it, and waiters are granted in arrival order. The Curator and kazoo protocols compare the
// numbers as text, as those libraries do, so a contender just past the wrap sorts first and takes
// a held lock: the same second holder Curator and kazoo themselves would let in (kazoo#730), which
// is why a path shared with them must not reach the wrap. On ZooKeeper, whose counter stops at
// 2147483647 (TestSequenceCounterAtItsLimit), every contender past it gets that number: Native
// then breaks the tie by name, the same for everyone, so the lock stays exclusive but waiters are
// no longer granted in arrival order.
func TestLockOrderAcrossSequenceWrap(t *testing.T) {
	top := int32(math.MaxInt32)
	v := wrapTree(t, map[string]int32{"/native-try": top - 1, "/native-queue": top - 1, "/curator": top, "/kazoo": top})
	for name, start := range wrapTargets(t) {
		t.Run(name, func(t *testing.T) {
			wraps := name == "zkd"
			addrs := start(t, v)
			ctx := testCtx(t, 60*time.Second)
			session := func() *Session {
				s, err := Connect(addrs, testTimeout, zk.WithLogger(quietLogger{}))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(s.Close)
				return s
			}

			// Native: a held lock is refused to every contender past the wrap.
			holder, err := NewMutex(session(), "/native-try").Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := holder.Token().Seq; got != top-1 {
				t.Fatalf("first contender's sequence %d; want %d (the seeded counter)", got, top-1)
			}
			for _, want := range []int32{top, math.MinInt32, math.MinInt32 + 1} {
				l, err := NewMutex(session(), "/native-try").TryLock(ctx)
				if !errors.Is(err, ErrLocked) {
					t.Fatalf("native TryLock with sequence %d while %d holds: %v, %v; want ErrLocked", want, top-1, l, err)
				}
			}
			if err := holder.Unlock(ctx); err != nil {
				t.Fatal(err)
			}

			// Native: waiters on both sides of the wrap are granted in arrival order.
			q := NewMutex(session(), "/native-queue")
			first, err := q.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			type grant struct {
				i int
				l *Lease
			}
			granted := make(chan grant, 3)
			for i := range 3 {
				s := session()
				go func() {
					l, err := NewMutex(s, "/native-queue").Lock(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					granted <- grant{i, l}
				}()
				// Queue them one at a time, so arrival order is the sequence order.
				for len(children(t, s, "/native-queue")) != i+2 {
					if ctx.Err() != nil {
						t.Fatalf("waiter %d never queued", i)
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			prev := first
			for i, want := range []int32{top, math.MinInt32, math.MinInt32 + 1} {
				if err := prev.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				var g grant
				select {
				case g = <-granted:
				case <-ctx.Done():
					t.Fatalf("waiter %d never granted", i)
				}
				if !wraps {
					// Granted only once the previous holder released: exclusive, in some order.
					prev = g.l
					continue
				}
				if g.i != i || g.l.Token().Seq != want {
					t.Fatalf("grant %d went to waiter %d with sequence %d; want waiter %d with %d", i, g.i, g.l.Token().Seq, i, want)
				}
				if g.l.Token().Czxid <= prev.Token().Czxid {
					t.Errorf("fencing token %d after %d: not increasing across the wrap", g.l.Token().Czxid, prev.Token().Czxid)
				}
				prev = g.l
			}
			if err := prev.Unlock(ctx); err != nil {
				t.Fatal(err)
			}

			if !wraps {
				return
			}
			// Curator and kazoo: the contender just past the wrap sorts first and takes the held
			// lock, exactly as those libraries would.
			for _, tc := range []struct {
				path  string
				proto Protocol
			}{{"/curator", Curator}, {"/kazoo", Kazoo}} {
				held, err := NewMutex(session(), tc.path, WithProtocol(tc.proto)).Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				second, err := NewMutex(session(), tc.path, WithProtocol(tc.proto)).TryLock(ctx)
				if err != nil {
					t.Fatalf("%v: TryLock just past the wrap: %v; want the documented misorder (a second holder)", tc.proto, err)
				}
				if held.Token().Seq != top || second.Token().Seq != math.MinInt32 {
					t.Fatalf("%v: sequences %d and %d; want %d and %d", tc.proto, held.Token().Seq, second.Token().Seq, top, int32(math.MinInt32))
				}
				_ = second.Unlock(ctx)
				_ = held.Unlock(ctx)
			}
		})
	}
}
