package recipes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkd-io/zkd/internal/testkit/pyclient"
)

// kazooScript contends for a kazoo Lock and proves exclusion through ZooKeeper itself: inside
// the critical section it creates an ephemeral "<path>-holder" node, which fails if any other
// holder (Go or Python) is inside at the same time, reads it back, still its own, and records its
// fencing token (the czxid of its lock node) in the ledger <path>-fence before deleting it.
const kazooScript = `
import sys
from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError
hosts, path, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
zk = KazooClient(hosts=hosts)
zk.start(timeout=20)
lock = zk.Lock(path, "kazoo-" + sys.argv[4])
print("READY", flush=True)
sys.stdin.readline()
for i in range(rounds):
    with lock:
        try:
            zk.create(path + "-holder", b"kazoo", ephemeral=True)
        except NodeExistsError:
            print("OVERLAP")
            sys.exit(3)
        _, stat = zk.get(path + "-holder")
        if stat.ephemeralOwner != zk.client_id[0]:
            print("OVERLAP")
            sys.exit(3)
        token = zk.exists(path + "/" + lock.node).czxid
        zk.create(path + "-fence/f-", ("kazoo:%d" % token).encode(), sequence=True)
        zk.delete(path + "-holder")
zk.stop()
print("OK")
`

// TestKazooInterop runs kazoo Lock processes and Go Mutexes in Kazoo mode on one path. Every
// holder proves exclusion through the server and appends its fencing token to a ledger: read back
// in order, the tokens of both languages' holders strictly increase, and every hold is there.
func TestKazooInterop(t *testing.T) {
	py := pyclient.KazooPython(t)
	addrs := testServer(t)
	p := testPath(t)
	ctx := testCtx(t, 90*time.Second)
	script := filepath.Join(t.TempDir(), "contend.py")
	if err := os.WriteFile(script, []byte(kazooScript), 0o600); err != nil {
		t.Fatal(err)
	}
	const pyProcs, pyRounds, goWorkers, goRounds = 2, 8, 3, 8
	setup := newTestSession(t, nil)
	for _, q := range []string{p, p + "-fence"} {
		if err := ensurePath(ctx, setup, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = deleteTree(setup.Conn(), p+"-fence") })
	var wg sync.WaitGroup
	var goHolds atomic.Int32
	errs := make(chan error, 1024)
	// Every contender starts at once, and the Go workers go on until the kazoo processes are done,
	// so the languages contend.
	i := 0
	pyDone := startContenders(t, ctx, errs, pyProcs, func() (func(), func() error) {
		i++
		return contenderProcess(t, ctx, py, script, strings.Join(addrs, ","), p, strconv.Itoa(pyRounds), strconv.Itoa(i))
	})
	for range goWorkers {
		s := newTestSession(t, nil)
		m := NewMutex(s, p, WithProtocol(Kazoo), WithData([]byte("go")))
		wg.Go(func() {
			for i := 0; i < goRounds || !isClosed(pyDone); i++ {
				l, err := m.Lock(ctx)
				if err != nil {
					errs <- err
					return
				}
				_, err = s.Conn().Create(p+"-holder", []byte("go"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
				if err != nil {
					errs <- errors.New("go contender found the lock taken: " + err.Error())
					_ = l.Unlock(context.WithoutCancel(ctx))
					return
				}
				// The critical section's work: read the holder node back through the server; it
				// is still ours unless another holder got in.
				if _, st, err := s.Conn().Get(p + "-holder"); err != nil || st.EphemeralOwner != s.Conn().SessionID() {
					errs <- fmt.Errorf("go contender lost its holder node inside the lock (%v)", err)
				}
				if _, err := s.Conn().Create(p+"-fence/f-", fmt.Appendf(nil, "go:%d", l.Token().Czxid), zk.FlagSequence, zk.WorldACL(zk.PermAll)); err != nil {
					errs <- err
				}
				_ = s.Conn().Delete(p+"-holder", -1)
				goHolds.Add(1)
				if err := l.Unlock(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	<-pyDone
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	checkFenceLedger(t, setup, p+"-fence", map[string]int{"go": int(goHolds.Load()), "kazoo": pyProcs * pyRounds})
	if c := children(t, setup, p); len(c) != 0 {
		t.Errorf("nodes left: %v", c)
	}
}

// kazooReader takes a kazoo ReadLock once, giving up after argv[3] seconds: it prints READY, then
// ACQUIRED or TIMEOUT.
const kazooReader = `
import sys
from kazoo.client import KazooClient
from kazoo.exceptions import LockTimeout
zk = KazooClient(hosts=sys.argv[1])
zk.start(timeout=20)
lock = zk.ReadLock(sys.argv[2], "kazoo-reader")
print("READY", flush=True)
try:
    got = lock.acquire(timeout=float(sys.argv[3]))
except LockTimeout:
    got = False
print("ACQUIRED" if got else "TIMEOUT", flush=True)
if got:
    lock.release()
zk.stop()
`

// A reader queued behind a held write lock, with a second writer queued behind the reader: once
// the first writer releases, ZooKeeper's shared-lock recipe gives the reader the lock (only
// writers before it block it), then the second writer. A Go reader in Kazoo mode does so, as
// kazoo's ReadLock does from 2.9 on. kazoo 2.8's ReadLock (Debian's) waits for the last writer on
// the path, even one queued after it (kazoo#649, fixed in 2.9.0), so it and the second writer
// wait for each other until the reader gives up; the Go writer then gets the lock.
func TestKazooReadLockBehindALaterWriter(t *testing.T) {
	py := pyclient.KazooPython(t)
	out, err := exec.Command(py, "-c", "import kazoo.version as v; print(v.__version__)").Output()
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(string(out))
	var major, minor int
	if _, err := fmt.Sscanf(version, "%d.%d", &major, &minor); err != nil {
		t.Fatalf("kazoo version %q: %v", version, err)
	}
	fixed := major > 2 || major == 2 && minor >= 9
	script := filepath.Join(t.TempDir(), "reader.py")
	if err := os.WriteFile(script, []byte(kazooReader), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, reader := range []string{"go", "kazoo"} {
		t.Run(reader, func(t *testing.T) {
			p := testPath(t)
			ctx := testCtx(t, 60*time.Second)
			obs := newTestSession(t, nil)
			queued := func(n int) {
				t.Helper()
				for len(children(t, obs, p)) != n {
					if ctx.Err() != nil {
						t.Fatalf("%d contenders never queued", n)
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			w1, err := NewRWMutex(newTestSession(t, nil), p, WithProtocol(Kazoo)).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			read := make(chan string, 1)
			if reader == "go" {
				r := NewRWMutex(newTestSession(t, nil), p, WithProtocol(Kazoo))
				go func() {
					rctx, cancel := context.WithTimeout(ctx, 6*time.Second)
					defer cancel()
					l, err := r.RLock(rctx)
					if err != nil {
						read <- "TIMEOUT"
						return
					}
					read <- "ACQUIRED"
					_ = l.Unlock(ctx)
				}()
			} else {
				lines := startLines(t, exec.CommandContext(ctx, py, script, strings.Join(testServer(t), ","), p, "6"), false)
				go func() {
					for l := range lines {
						if l == "ACQUIRED" || l == "TIMEOUT" {
							read <- l
						}
					}
				}()
			}
			queued(2)
			w2 := make(chan error, 1)
			go func() {
				l, err := NewRWMutex(newTestSession(t, nil), p, WithProtocol(Kazoo)).Lock(ctx)
				if err == nil {
					err = l.Unlock(ctx)
				}
				w2 <- err
			}()
			queued(3)
			if err := w1.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			var got string
			select {
			case got = <-read:
			case <-ctx.Done():
				t.Fatal("the reader never answered")
			}
			want := "ACQUIRED"
			if reader == "kazoo" && !fixed {
				want = "TIMEOUT"
			}
			if got != want {
				t.Errorf("%s reader (kazoo %s): %s; want %s", reader, version, got, want)
			}
			select {
			case err := <-w2:
				if err != nil {
					t.Fatal(err)
				}
			case <-ctx.Done():
				t.Fatal("the second writer never got the lock")
			}
		})
	}
}

// TestKazooSeesGoHolder checks the names directly: while a Go Kazoo-mode lease is held, kazoo's
// non-blocking acquire fails, and kazoo's contenders() lists the Go node's data.
func TestKazooSeesGoHolder(t *testing.T) {
	py := pyclient.KazooPython(t)
	addrs := testServer(t)
	p := testPath(t)
	ctx := testCtx(t, 30*time.Second)
	s := newTestSession(t, nil)
	l, err := NewMutex(s, p, WithProtocol(Kazoo), WithData([]byte("go-holder"))).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, py, "-c", `
import sys
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1]); zk.start(timeout=20)
lock = zk.Lock(sys.argv[2], "py")
print(lock.acquire(blocking=False), lock.contenders())
zk.stop()
`, strings.Join(addrs, ","), p).CombinedOutput()
	if err != nil {
		t.Fatalf("kazoo: %v: %s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "False ['go-holder']" {
		t.Fatalf("kazoo saw %q; want it blocked behind the Go holder", got)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// kazooRWScript runs kazoo WriteLock writers. Each holder announces itself with an ephemeral
// node and then looks for the other kind (create, then check, on both sides), so any overlap of
// a writer with a reader or another writer is seen by at least one side.
const kazooRWScript = `
import sys
from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError
hosts, path, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
zk = KazooClient(hosts=hosts)
zk.start(timeout=20)
lock = zk.WriteLock(path, "kazoo-writer")
print("READY", flush=True)
sys.stdin.readline()
for i in range(rounds):
    with lock:
        try:
            zk.create(path + "-writer", b"kazoo", ephemeral=True)
        except NodeExistsError:
            print("WRITER OVERLAP")
            sys.exit(3)
        if zk.get_children(path + "-readers"):
            print("READER INSIDE")
            sys.exit(3)
        _, stat = zk.get(path + "-writer")
        if stat.ephemeralOwner != zk.client_id[0]:
            print("WRITER OVERLAP")
            sys.exit(3)
        zk.delete(path + "-writer")
zk.stop()
print("OK")
`

// TestKazooRWInterop: kazoo WriteLock writers and Go Kazoo-mode RWMutex readers and writers on
// one path.
func TestKazooRWInterop(t *testing.T) {
	py := pyclient.KazooPython(t)
	addrs := testServer(t)
	p := testPath(t)
	ctx := testCtx(t, 90*time.Second)
	script := filepath.Join(t.TempDir(), "rw.py")
	if err := os.WriteFile(script, []byte(kazooRWScript), 0o600); err != nil {
		t.Fatal(err)
	}
	setup := newTestSession(t, nil)
	for _, q := range []string{p, p + "-readers"} {
		if err := ensurePath(ctx, setup, q); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 1024)
	pyDone := startContenders(t, ctx, errs, 2, func() (func(), func() error) {
		return contenderProcess(t, ctx, py, script, strings.Join(addrs, ","), p, "6")
	})
	for i := range 4 {
		s := newTestSession(t, nil)
		m := NewRWMutex(s, p, WithProtocol(Kazoo))
		write := i == 0
		wg.Go(func() {
			for i := 0; i < 6 || !isClosed(pyDone); i++ {
				var l *Lease
				var err error
				if write {
					l, err = m.Lock(ctx)
				} else {
					l, err = m.RLock(ctx)
				}
				if err != nil {
					errs <- err
					return
				}
				if write {
					if _, err := s.Conn().Create(p+"-writer", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
						errs <- errors.New("go writer overlapped a writer: " + err.Error())
					} else {
						if kids, _, _ := s.Conn().Children(p + "-readers"); len(kids) != 0 {
							errs <- errors.New("go writer found readers inside")
						}
						// The critical section's work: read the writer node back through the
						// server; it is still ours unless another writer got in.
						if _, st, err := s.Conn().Get(p + "-writer"); err != nil || st.EphemeralOwner != s.Conn().SessionID() {
							errs <- fmt.Errorf("go writer lost its writer node inside the lock (%v)", err)
						}
						_ = s.Conn().Delete(p+"-writer", -1)
					}
				} else {
					node, err := s.Conn().Create(p+"-readers/r", nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
					if err != nil {
						errs <- err
					} else {
						if ok, _, _ := s.Conn().Exists(p + "-writer"); ok {
							errs <- errors.New("go reader found a writer inside")
						}
						// The critical section's work: look again through the server, which must
						// still hold no writer.
						if ok, _, _ := s.Conn().Exists(p + "-writer"); ok {
							errs <- errors.New("go reader found a writer inside")
						}
						_ = s.Conn().Delete(node, -1)
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
	<-pyDone
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
