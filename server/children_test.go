package server_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkd-io/zkd/server/zkdtest"
)

// A child list long enough to be streamed (server/outstream.go) reaches a real client whole and
// in order with the replies around it: getChildren and getChildren2 with its Stat, many of them
// pipelined with other reads on one connection, and a child watch set by one fires.
func TestLongChildListReachesClients(t *testing.T) {
	s := zkdtest.Start(t, zkdtest.WithoutRaft())
	c, _ := connect(t, s.Addr())
	acl := zk.WorldACL(zk.PermAll)
	if _, err := c.Create("/big", nil, 0, acl); err != nil {
		t.Fatal(err)
	}
	var want []string
	var ops []any
	for i := range 4000 {
		name := fmt.Sprintf("lock-%010d-%s", i, "abcdefghij"[:i%11])
		want = append(want, name)
		ops = append(ops, &zk.CreateRequest{Path: "/big/" + name, Acl: acl})
		if len(ops) == 500 {
			if _, err := c.Multi(ops...); err != nil {
				t.Fatal(err)
			}
			ops = nil
		}
	}
	slices.Sort(want)

	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 16 {
		wg.Go(func() {
			got, stat, err := c.Children("/big")
			switch {
			case err != nil:
				errs <- err
			case !slices.Equal(got, want):
				errs <- fmt.Errorf("reader %d: %d children, not the %d created", i, len(got), len(want))
			case stat.NumChildren != int32(len(want)):
				errs <- fmt.Errorf("reader %d: numChildren %d", i, stat.NumChildren)
			}
			if _, _, err := c.Exists("/big"); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	got, _, ev, err := c.ChildrenW("/big")
	if err != nil || len(got) != len(want) {
		t.Fatalf("ChildrenW = %d names, %v", len(got), err)
	}
	if _, err := c.Create("/big/one-more", nil, 0, acl); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-ev:
		if e.Type != zk.EventNodeChildrenChanged || e.Path != "/big" {
			t.Fatalf("event %+v; want NodeChildrenChanged on /big", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no child event")
	}
}
