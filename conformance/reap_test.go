package conformance

import (
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkd-io/zkd/jute"
)

// TestReaping checks that the server deletes empty used containers and expired TTL nodes, and
// only those, delivering NodeDeleted to watchers.
func TestReaping(t *testing.T) {
	needReap := func(t *testing.T, e *env, ttl bool) {
		t.Helper()
		if !e.tg.Caps.FastReap {
			t.Skip("target reaps only every znode.container.checkIntervalMs (60 s by default, which zktest's ZooKeeper keeps); CONFORMANCE_CAPS=fastreap declares a shorter interval")
		}
		if ttl && !e.tg.Caps.TTL {
			t.Skip("target does not enable TTL nodes (extendedTypesEnabled); CONFORMANCE_CAPS=ttl declares it")
		}
	}
	container := func(t *testing.T, e *env, path string) {
		t.Helper()
		_, err := e.raw().Do(jute.OpCreateContainer, &jute.CreateRequest{Path: path, ACL: openACL(), Flags: jute.ModeContainer}, &jute.Create2Response{})
		must(t, "createContainer "+path, err)
	}
	ttlNode := func(t *testing.T, e *env, path string, ttl time.Duration) {
		t.Helper()
		_, err := e.zk.CreateTTL(path, nil, zk.FlagTTL, zk.WorldACL(zk.PermAll), ttl)
		must(t, "createTTL "+path, err)
	}
	// reaped waits, within the reap interval's allowance, for the NodeDeleted event of path.
	reaped := func(t *testing.T, e *env, ch <-chan zk.Event, path string) {
		t.Helper()
		select {
		case ev := <-ch:
			if ev.Type != zk.EventNodeDeleted || ev.Path != path {
				t.Fatalf("watch on %s got %+v; want NodeDeleted", path, ev)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s not reaped within 20 s", path)
		}
		if e.exists(path) {
			t.Fatalf("%s still exists after its NodeDeleted", path)
		}
	}
	watch := func(t *testing.T, e *env, path string) <-chan zk.Event {
		t.Helper()
		ok, _, ch, err := e.zk.ExistsW(path)
		must(t, "existsW "+path, err)
		if !ok {
			t.Fatalf("%s is gone before the check could watch it", path)
		}
		return ch
	}
	runChecks(t, "reap", []check{
		{"empty_used_container_is_reaped_with_NodeDeleted", func(t *testing.T, e *env) {
			needReap(t, e, false)
			container(t, e, e.p("c"))
			e.mk(e.p("c", "kid"), nil)
			ch := watch(t, e, e.p("c"))
			must(t, "delete kid", e.zk.Delete(e.p("c", "kid"), -1))
			reaped(t, e, ch, e.p("c"))
		}},
		{"container_emptied_by_ephemeral_owner_close_is_reaped", func(t *testing.T, e *env) {
			needReap(t, e, false)
			container(t, e, e.p("c"))
			other := e.conn()
			_, err := other.Create(e.p("c", "eph"), nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
			must(t, "create ephemeral", err)
			ch := watch(t, e, e.p("c"))
			other.Close()
			reaped(t, e, ch, e.p("c"))
		}},
		{"container_with_a_child_is_kept_while_an_empty_one_is_reaped", func(t *testing.T, e *env) {
			needReap(t, e, false)
			container(t, e, e.p("full"))
			e.mk(e.p("full", "kid"), nil)
			container(t, e, e.p("empty"))
			e.mk(e.p("empty", "kid"), nil)
			ch := watch(t, e, e.p("empty"))
			must(t, "delete kid", e.zk.Delete(e.p("empty", "kid"), -1))
			reaped(t, e, ch, e.p("empty"))
			if !e.exists(e.p("full")) {
				t.Fatalf("container with a child was reaped")
			}
		}},
		{"expired_ttl_node_is_reaped_with_NodeDeleted", func(t *testing.T, e *env) {
			needReap(t, e, true)
			ttlNode(t, e, e.p("t"), time.Second)
			ch := watch(t, e, e.p("t"))
			reaped(t, e, ch, e.p("t"))
		}},
		{"ttl_node_is_kept_before_its_ttl_and_while_it_has_children", func(t *testing.T, e *env) {
			needReap(t, e, true)
			// Both long-lived nodes exist before the short one, so when the short one is reaped
			// the one with a child is past its TTL too.
			ttlNode(t, e, e.p("parent"), 500*time.Millisecond)
			e.mk(e.p("parent", "kid"), nil)
			ttlNode(t, e, e.p("long"), 10*time.Minute)
			ttlNode(t, e, e.p("short"), time.Second)
			ch := watch(t, e, e.p("short"))
			reaped(t, e, ch, e.p("short"))
			if !e.exists(e.p("long")) {
				t.Fatalf("TTL node reaped before its TTL")
			}
			if !e.exists(e.p("parent")) {
				t.Fatalf("expired TTL node with a child was reaped")
			}
		}},
		{"expired_ttl_node_is_reaped_once_its_child_is_gone", func(t *testing.T, e *env) {
			needReap(t, e, true)
			ttlNode(t, e, e.p("t"), 500*time.Millisecond)
			e.mk(e.p("t", "kid"), nil)
			ch := watch(t, e, e.p("t"))
			must(t, "delete kid", e.zk.Delete(e.p("t", "kid"), -1))
			reaped(t, e, ch, e.p("t"))
		}},
	})
}
