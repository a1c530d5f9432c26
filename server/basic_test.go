package server_test

import (
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkd-io/zkd/server/zkdtest"
)

// connect opens a go-zookeeper session to addrs and waits until it has a session.
func connect(t *testing.T, addrs ...string) (*zk.Conn, <-chan zk.Event) {
	t.Helper()
	c, ev, err := zk.Connect(addrs, 4*time.Second, zk.WithLogInfo(false), zk.WithLogger(quietLogger{}))
	if err != nil {
		t.Fatalf("zk.Connect: %v", err)
	}
	t.Cleanup(c.Close)
	deadline := time.After(10 * time.Second)
	for c.State() != zk.StateHasSession {
		select {
		case <-ev:
		case <-deadline:
			t.Fatalf("no session after 10s (state %v)", c.State())
		}
	}
	return c, ev
}

func TestCRUD(t *testing.T) {
	s := zkdtest.Start(t, zkdtest.WithoutRaft())
	c, _ := connect(t, s.Addr())
	acl := zk.WorldACL(zk.PermAll)
	p, err := c.Create("/a", []byte("one"), 0, acl)
	if err != nil || p != "/a" {
		t.Fatalf("Create(/a) = %q, %v; want /a, nil", p, err)
	}
	if _, err := c.Create("/a", nil, 0, acl); !errors.Is(err, zk.ErrNodeExists) {
		t.Fatalf("Create(/a) again = %v; want ErrNodeExists", err)
	}
	data, st, err := c.Get("/a")
	if err != nil || string(data) != "one" || st.Version != 0 {
		t.Fatalf("Get(/a) = %q, %+v, %v", data, st, err)
	}
	st, err = c.Set("/a", []byte("two"), 0)
	if err != nil || st.Version != 1 {
		t.Fatalf("Set(/a) = %+v, %v", st, err)
	}
	if _, err := c.Set("/a", []byte("x"), 0); !errors.Is(err, zk.ErrBadVersion) {
		t.Fatalf("Set(/a, version 0) = %v; want ErrBadVersion", err)
	}
	seq, err := c.Create("/a/s-", nil, zk.FlagSequence, acl)
	if err != nil || seq != "/a/s-0000000000" {
		t.Fatalf("Create sequential = %q, %v", seq, err)
	}
	kids, _, err := c.Children("/a")
	if err != nil || len(kids) != 1 || kids[0] != "s-0000000000" {
		t.Fatalf("Children(/a) = %v, %v", kids, err)
	}
	if err := c.Delete("/a", -1); !errors.Is(err, zk.ErrNotEmpty) {
		t.Fatalf("Delete(/a) = %v; want ErrNotEmpty", err)
	}
	if err := c.Delete(seq, -1); err != nil {
		t.Fatalf("Delete(%s) = %v", seq, err)
	}
	if ok, _, err := c.Exists(seq); err != nil || ok {
		t.Fatalf("Exists(%s) = %v, %v; want false", seq, ok, err)
	}
}

// quietLogger keeps go-zookeeper's reconnect chatter out of test output.
type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}
