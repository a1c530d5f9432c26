package conformance

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkd-io/zkd/internal/testkit"
)

// These checks run the small coordination patterns real clients build on the server: go-zookeeper's
// own lock, and the watch-the-predecessor election that Curator and kazoo recipes use.
func TestClientRecipes(t *testing.T) {
	runChecks(t, "recipes", []check{
		{"go_client_lock_is_exclusive_and_hands_over", func(t *testing.T, e *env) {
			a, b := e.conn(), e.conn()
			la := zk.NewLock(a, e.p("lock"), zk.WorldACL(zk.PermAll))
			lb := zk.NewLock(b, e.p("lock"), zk.WorldACL(zk.PermAll))
			must(t, "a locks", la.Lock())
			got := make(chan error, 1)
			go func() { got <- lb.Lock() }()
			// b must be queued behind a: its node exists and it does not hold the lock.
			var kids []string
			if !testkit.Until(waitTimeout, func() bool { // no event tells a third party b has queued
				var err error
				kids, _, err = e.zk.Children(e.p("lock"))
				must(t, "children", err)
				return len(kids) == 2
			}) {
				t.Fatalf("b's lock node never appeared: %v", kids)
			}
			select {
			case err := <-got:
				t.Fatalf("b got the lock while a held it: %v", err)
			default:
			}
			must(t, "a unlocks", la.Unlock())
			select {
			case err := <-got:
				must(t, "b locks", err)
			case <-time.After(waitTimeout):
				t.Fatalf("b did not get the lock after a released it")
			}
			must(t, "b unlocks", lb.Unlock())
		}},
		{"election_by_lowest_sequence_and_predecessor_watch", func(t *testing.T, e *env) {
			var conns []*zk.Conn
			var nodes []string
			for range 3 {
				c := e.conn()
				p, err := c.Create(e.p("n_"), nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
				must(t, "create candidate", err)
				conns, nodes = append(conns, c), append(nodes, p)
			}
			kids, _, err := e.zk.Children(e.base)
			must(t, "children", err)
			slices.SortFunc(kids, func(x, y string) int { return strings.Compare(x[len(x)-10:], y[len(y)-10:]) })
			if e.p(kids[0]) != nodes[0] {
				t.Fatalf("lowest sequence %s; want the first candidate %s", kids[0], nodes[0])
			}
			// The second candidate watches its predecessor; the leader's session ends.
			ok, _, ch, err := conns[1].ExistsW(nodes[0])
			if err != nil || !ok {
				t.Fatalf("existsW predecessor: %v %v", ok, err)
			}
			conns[0].Close()
			if ev := zkEvent(t, ch); ev.Type != zk.EventNodeDeleted || ev.Path != nodes[0] {
				t.Fatalf("event %+v; want NodeDeleted of the old leader", ev)
			}
			kids, _, err = conns[1].Children(e.base)
			must(t, "children", err)
			slices.Sort(kids)
			if e.p(kids[0]) != nodes[1] {
				t.Fatalf("after the leader left the lowest node is %s; want %s", kids[0], nodes[1])
			}
		}},
		{"protected_create_finds_own_node_by_guid", func(t *testing.T, e *env) {
			p, err := e.zk.CreateProtectedEphemeralSequential(e.p("x-"), nil, zk.WorldACL(zk.PermAll))
			must(t, "create", err)
			kids, _, err := e.zk.Children(e.base)
			must(t, "children", err)
			name := p[strings.LastIndex(p, "/")+1:]
			if !slices.Contains(kids, name) {
				t.Fatalf("children %v lack %s", kids, name)
			}
		}},
		{"barrier_with_children_watch", func(t *testing.T, e *env) {
			e.mk(e.p("barrier"), nil)
			kids, _, ch, err := e.zk.ChildrenW(e.p("barrier"))
			if err != nil || len(kids) != 0 {
				t.Fatalf("childrenW: %v %v", kids, err)
			}
			other := e.conn()
			_, err = other.Create(e.p("barrier", "ready"), nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
			must(t, "create", err)
			if ev := zkEvent(t, ch); ev.Type != zk.EventNodeChildrenChanged {
				t.Fatalf("event %+v", ev)
			}
		}},
	})
}
