package recipes

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkd-io/zkd/internal/testkit/apachezk"
)

// TestCuratorInterop runs Curator 5.4 processes (Debian's libcurator-recipes-java) and Go
// recipes in Curator mode on one path: InterProcessMutex beside Mutex, and LeaderSelector
// (requeued after every term) beside Election. Every holder or leader proves exclusion through
// the server (an ephemeral holder node, created and read back as its own) and appends its fencing
// token, the czxid of its node, to a sequential ledger: read back in order, the tokens of both
// languages' holders strictly increase, and every hold is there.
func TestCuratorInterop(t *testing.T) {
	for _, kind := range []string{"mutex", "leader"} {
		t.Run(kind, func(t *testing.T) { curatorInterop(t, kind) })
	}
}

// curatorJava returns the java command and the Curator 5.4 class path (Debian's packages), or
// skips the test.
func curatorJava(t *testing.T) (java, classpath string) {
	t.Helper()
	java, err := exec.LookPath("java")
	if err != nil {
		t.Skip("no java for Curator")
	}
	cp, err := apachezk.CuratorClasspath()
	if err != nil {
		t.Skip(err)
	}
	return java, cp
}

func curatorInterop(t *testing.T, kind string) {
	java, cp := curatorJava(t)
	addrs := testServer(t)
	p := testPath(t)
	ctx := testCtx(t, 120*time.Second)
	const javaProcs, javaRounds, goWorkers, goRounds = 2, 10, 3, 10
	setup := newTestSession(t, nil)
	for _, q := range []string{p, p + "-fence"} {
		if err := ensurePath(ctx, setup, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = deleteTree(setup.Conn(), p+"-fence") })
	var wg sync.WaitGroup
	errs := make(chan error, 1024)
	// Every contender starts at once, the JVMs' start-up behind them, and the Go workers go on
	// until the Curator processes are done, so the languages contend.
	javaDone := startContenders(t, ctx, errs, javaProcs, func() (func(), func() error) {
		args := []string{"-Xmx96m", "-cp", cp, filepath.Join("testdata", "CuratorContend.java"), strings.Join(addrs, ","), p, strconv.Itoa(javaRounds)}
		if kind == "leader" {
			args = append(args, "20000", "leader")
		}
		return contenderProcess(t, ctx, java, args...)
	})
	var goHolds atomic.Int32
	for range goWorkers {
		s := newTestSession(t, nil)
		lock := NewMutex(s, p, WithProtocol(Curator)).Lock
		if kind == "leader" {
			lock = NewElection(s, p, WithProtocol(Curator)).Campaign
		}
		wg.Go(func() {
			for i := 0; i < goRounds || !isClosed(javaDone); i++ {
				l, err := lock(ctx)
				if err != nil {
					errs <- err
					return
				}
				c := s.Conn()
				if _, err := c.Create(p+"-holder", []byte("go"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
					errs <- errors.New("go contender found the lock taken: " + err.Error())
					_ = l.Unlock(context.WithoutCancel(ctx))
					return
				}
				if _, st, err := c.Get(p + "-holder"); err != nil || st.EphemeralOwner != c.SessionID() {
					errs <- fmt.Errorf("go contender lost its holder node inside the lock (%v)", err)
				}
				if _, err := c.Create(p+"-fence/f-", fmt.Appendf(nil, "go:%d", l.Token().Czxid), zk.FlagSequence, zk.WorldACL(zk.PermAll)); err != nil {
					errs <- err
				}
				_ = c.Delete(p+"-holder", -1)
				goHolds.Add(1)
				if err := l.Unlock(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	<-javaDone
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	checkFenceLedger(t, setup, p+"-fence", map[string]int{"go": int(goHolds.Load()), "curator": javaProcs * javaRounds})
	if c := children(t, setup, p); len(c) != 0 {
		t.Errorf("nodes left: %v", c)
	}
}

// checkFenceLedger reads the fencing ledger at p (sequential children, each "<language>:<token>",
// appended by every holder inside its critical section): in the order they were appended the
// tokens strictly increase across holders of every language, and each language has its holds.
func checkFenceLedger(t *testing.T, s *Session, p string, holds map[string]int) {
	t.Helper()
	fence := children(t, s, p) // after a sync: on a cluster the holds went through other members
	slices.Sort(fence)
	var last int64
	langs := map[string]int{}
	for _, f := range fence {
		data, _, err := s.Conn().Get(p + "/" + f)
		if err != nil {
			t.Fatal(err)
		}
		lang, tok, _ := strings.Cut(string(data), ":")
		czxid, err := strconv.ParseInt(tok, 10, 64)
		if err != nil || czxid <= last {
			t.Fatalf("ledger entry %s = %q after token %d: fencing tokens must strictly increase across holders", f, data, last)
		}
		last = czxid
		langs[lang]++
	}
	if !maps.Equal(langs, holds) {
		t.Errorf("holds in the ledger by language %v; want %v", langs, holds)
	}
}

// deleteTree deletes p and its children (one level: the ledger).
func deleteTree(c *zk.Conn, p string) error {
	kids, _, err := c.Children(p)
	if err != nil {
		return err
	}
	for _, k := range kids {
		_ = c.Delete(p+"/"+k, -1)
	}
	return c.Delete(p, -1)
}

// curatorProcess starts CuratorContend.java in mode (hold or wait) with a 4 s session and
// returns the command and a channel that receives each line it prints.
func curatorProcess(t *testing.T, ctx context.Context, mode, p string) (*exec.Cmd, <-chan string) {
	t.Helper()
	java, cp := curatorJava(t)
	cmd := exec.CommandContext(ctx, java, "-Xmx96m", "-cp", cp, filepath.Join("testdata", "CuratorContend.java"),
		strings.Join(testServer(t), ","), p, mode, strconv.Itoa(int(testTimeout/time.Millisecond)))
	return cmd, startLines(t, cmd, true)
}

// waitLine waits for the process to print want and fails the test with what it printed instead.
func waitLine(t *testing.T, ctx context.Context, lines <-chan string, want string) {
	t.Helper()
	var seen []string
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the Curator process ended before printing %s: %q", want, seen)
			}
			if l == want {
				return
			}
			seen = append(seen, l)
		case <-ctx.Done():
			t.Fatalf("no %s from the Curator process: %q", want, seen)
		}
	}
}

// A killed holder of either language is succeeded by the other within the session timeout and a
// few seconds: a Curator holder killed with SIGKILL hands the lock to a waiting Go Mutex in
// Curator mode, and a Go holder cut off from the server hands it to a waiting Curator process.
func TestCuratorKilledHolderSucceeded(t *testing.T) {
	const bound = testTimeout + 8*time.Second // a tick late at most, and room for a loaded machine
	t.Run("curator holder killed", func(t *testing.T) {
		p := testPath(t)
		ctx := testCtx(t, 90*time.Second)
		cmd, lines := curatorProcess(t, ctx, "hold", p)
		waitLine(t, ctx, lines, "HELD")
		granted := make(chan error, 1)
		s := newTestSession(t, nil)
		go func() {
			l, err := NewMutex(s, p, WithProtocol(Curator)).Lock(ctx)
			if err == nil {
				err = l.Unlock(ctx)
			}
			granted <- err
		}()
		for len(children(t, s, p)) != 2 {
			if ctx.Err() != nil {
				t.Fatal("the Go contender never queued")
			}
			time.Sleep(5 * time.Millisecond)
		}
		killed := time.Now()
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-granted:
			if err != nil {
				t.Fatal(err)
			}
		case <-ctx.Done():
			t.Fatal("the Go contender was never granted the killed holder's lock")
		}
		if took := time.Since(killed); took > bound {
			t.Errorf("the Go contender got the lock %v after the Curator holder was killed; want within %v", took, bound)
		}
	})
	t.Run("go holder cut off", func(t *testing.T) {
		p := testPath(t)
		ctx := testCtx(t, 90*time.Second)
		f := &faults{}
		l, err := NewMutex(newTestSession(t, f), p, WithProtocol(Curator)).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, lines := curatorProcess(t, ctx, "wait", p)
		obs := newTestSession(t, nil)
		for len(children(t, obs, p)) != 2 {
			if ctx.Err() != nil {
				t.Fatal("the Curator contender never queued")
			}
			time.Sleep(5 * time.Millisecond)
		}
		cut := time.Now()
		f.partition()
		waitLine(t, ctx, lines, "ACQUIRED")
		if took := time.Since(cut); took > bound {
			t.Errorf("the Curator contender got the lock %v after the Go holder was cut off; want within %v", took, bound)
		}
		select {
		case <-l.Done():
		case <-ctx.Done():
			t.Fatal("the cut-off Go holder's lease never ended")
		}
	})
}

// TestCuratorRWInterop runs Curator InterProcessReadWriteLock readers and writers (separate
// processes) and Go RWMutexes in Curator mode on one path. Every section proves the lock's rule
// through the server: a writer finds no reader and no other writer inside, a reader finds no
// writer (see CuratorContend.java); readers may share.
func TestCuratorRWInterop(t *testing.T) {
	java, cp := curatorJava(t)
	addrs := testServer(t)
	p := testPath(t)
	ctx := testCtx(t, 120*time.Second)
	const rounds = 10
	setup := newTestSession(t, nil)
	for _, q := range []string{p, p + "-readers"} {
		if err := ensurePath(ctx, setup, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = setup.Conn().Delete(p+"-readers", -1) })
	var wg sync.WaitGroup
	errs := make(chan error, 1024)
	sides := []string{"read", "write"}
	javaDone := startContenders(t, ctx, errs, len(sides), func() (func(), func() error) {
		side := sides[0]
		sides = sides[1:]
		return contenderProcess(t, ctx, java, "-Xmx96m", "-cp", cp, filepath.Join("testdata", "CuratorContend.java"), strings.Join(addrs, ","), p, strconv.Itoa(rounds), "20000", side)
	})
	for _, write := range []bool{true, false, false} {
		s := newTestSession(t, nil)
		m := NewRWMutex(s, p, WithProtocol(Curator))
		wg.Go(func() {
			c := s.Conn()
			for i := 0; i < rounds || !isClosed(javaDone); i++ {
				lock := m.RLock
				if write {
					lock = m.Lock
				}
				l, err := lock(ctx)
				if err != nil {
					errs <- err
					return
				}
				if write {
					if _, err := c.Create(p+"-writer", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
						errs <- fmt.Errorf("go writer found another writer inside: %v", err)
					} else {
						if kids, _, err := c.Children(p + "-readers"); err != nil || len(kids) != 0 {
							errs <- fmt.Errorf("go writer found readers inside: %v, %v", kids, err)
						}
						_ = c.Delete(p+"-writer", -1)
					}
				} else {
					mine, err := c.Create(p+"-readers/r-", nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
					if err != nil {
						errs <- err
					} else {
						if ok, _, err := c.Exists(p + "-writer"); err != nil || ok {
							errs <- fmt.Errorf("go reader found a writer inside (%v)", err)
						}
						_ = c.Delete(mine, -1)
					}
				}
				if err := l.Unlock(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	<-javaDone
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if c := children(t, setup, p); len(c) != 0 {
		t.Errorf("nodes left: %v", c)
	}
}
