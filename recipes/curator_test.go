package recipes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkd-io/zkd/internal/testkit/apachezk"
)

// TestCuratorInterop runs Curator 5.4 InterProcessMutex processes (Debian's
// libcurator-recipes-java) and Go Mutexes in Curator mode on one path. Every holder proves
// exclusion through the server (an ephemeral holder node, created and read back as its own) and
// appends its fencing token, the czxid of its lock node, to a sequential ledger: read back in
// order, the tokens of both languages' holders strictly increase, and every hold is there.
func TestCuratorInterop(t *testing.T) {
	java, err := exec.LookPath("java")
	if err != nil {
		t.Skip("no java for Curator")
	}
	cp, err := apachezk.CuratorClasspath()
	if err != nil {
		t.Skip(err)
	}
	addrs := testServer(t)
	p := testPath(t)
	ctx := testCtx(t, 120*time.Second)
	const javaProcs, javaRounds, goWorkers, goRounds = 2, 6, 3, 6
	setup := newTestSession(t, nil)
	for _, q := range []string{p, p + "-fence"} {
		if err := ensurePath(ctx, setup, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = deleteTree(setup.Conn(), p+"-fence") })
	var wg sync.WaitGroup
	errs := make(chan error, javaProcs+goWorkers*goRounds)
	for range javaProcs {
		wg.Go(func() {
			cmd := exec.CommandContext(ctx, java, "-Xmx96m", "-cp", cp, filepath.Join("testdata", "CuratorContend.java"),
				strings.Join(addrs, ","), p, strconv.Itoa(javaRounds))
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Run(); err != nil || !strings.Contains(out.String(), "OK") {
				errs <- fmt.Errorf("curator contender: %v: %s", err, strings.TrimSpace(out.String()))
			}
		})
	}
	for range goWorkers {
		s := newTestSession(t, nil)
		m := NewMutex(s, p, WithProtocol(Curator))
		wg.Go(func() {
			for range goRounds {
				l, err := m.Lock(ctx)
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
				if err := l.Unlock(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	fence, _, err := setup.Conn().Children(p + "-fence")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(fence)
	if len(fence) != javaProcs*javaRounds+goWorkers*goRounds {
		t.Fatalf("%d holds in the ledger; want %d", len(fence), javaProcs*javaRounds+goWorkers*goRounds)
	}
	var last int64
	langs := map[string]int{}
	for _, f := range fence {
		data, _, err := setup.Conn().Get(p + "-fence/" + f)
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
	if langs["go"] != goWorkers*goRounds || langs["curator"] != javaProcs*javaRounds {
		t.Errorf("holds by language %v", langs)
	}
	if c := children(t, setup, p); len(c) != 0 {
		t.Errorf("nodes left: %v", c)
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
