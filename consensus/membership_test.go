package consensus

import (
	"bytes"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zkd-io/zkd/jute"
)

// join starts a new member-to-be and registers it with the cluster helper.
func (c *cluster) join(id string) *Node {
	c.t.Helper()
	ln, err := c.network(id).Listen("127.0.0.1:0")
	if err != nil {
		c.t.Fatal(err)
	}
	c.ids = append(c.ids, id)
	c.addrs[id] = ln.Addr().String()
	if !c.memory {
		c.dirs[id] = c.t.TempDir()
	}
	cfg := c.config(id, ln)
	cfg.Peers = nil
	cfg.NoBootstrap = true
	n, err := New(cfg)
	if err != nil {
		c.t.Fatalf("start %s: %v", id, err)
	}
	c.nodes[id] = n
	return n
}

func memberIDs(t *testing.T, n *Node) []string {
	t.Helper()
	ms, err := n.Members()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range ms {
		ids = append(ids, m.ID)
	}
	slices.Sort(ids)
	return ids
}

func TestMembershipAddRemoveTransfer(t *testing.T) { synctest.Test(t, testMembershipAddRemoveTransfer) }

func testMembershipAddRemoveTransfer(t *testing.T) {
	c := newBubbleCluster(t, 3, false, nil)
	leader := c.leader()
	ctx := ctxT(t, 30*time.Second)
	for i := range 30 {
		if res, err := leader.Propose(ctx, createReq(fmt.Sprintf("/m%d", i), nil, jute.ModePersistent)); err != nil || res.Err != nil {
			t.Fatal(err, res.Err)
		}
	}
	n4 := c.join("n4")
	// Added through a follower: the request is forwarded to the leader.
	if err := c.followers()[0].AddVoter(ctx, "n4", n4.Addr()); err != nil {
		t.Fatalf("add voter: %v", err)
	}
	c.converge()
	if got := memberIDs(t, leader); !slices.Equal(got, []string{"n1", "n2", "n3", "n4"}) {
		t.Fatalf("members after add = %v", got)
	}
	// The new member serves writes (forwarded) like any other.
	if res, err := n4.Propose(ctx, createReq("/from-n4", nil, jute.ModePersistent)); err != nil || res.Err != nil {
		t.Fatalf("write via new member: %v %v", err, res.Err)
	}

	// Hand leadership over, then remove the old leader.
	old := leader.ID()
	if err := leader.TransferLeadership(ctx); err != nil {
		t.Fatalf("transfer: %v", err)
	}
	var others []string
	for _, id := range c.ids {
		if id != old {
			others = append(others, id)
		}
	}
	nl := c.leader(others...)
	if err := nl.RemoveServer(ctx, old); err != nil {
		t.Fatalf("remove %s: %v", old, err)
	}
	c.stop(old)
	eventually(t, 5*time.Second, "membership without the old leader", func() bool {
		return !slices.Contains(memberIDs(t, nl), old) && len(memberIDs(t, nl)) == 3
	})
	if res, err := nl.Propose(ctx, createReq("/after-remove", nil, jute.ModePersistent)); err != nil || res.Err != nil {
		t.Fatalf("write after removal: %v %v", err, res.Err)
	}
	c.converge()
}

// lockedBuffer is a log sink safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A member removed by a membership change says so in plain words, once.
func TestRemovedMemberSaysSo(t *testing.T) {
	for _, whileDown := range []bool{false, true} {
		t.Run(map[bool]string{false: "live", true: "while-down"}[whileDown], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testRemovedMemberSaysSo(t, whileDown) })
		})
	}
}

func testRemovedMemberSaysSo(t *testing.T, whileDown bool) {
	const said = "this server was removed from the cluster by a membership change"
	var logs lockedBuffer
	c := newBubbleCluster(t, 3, false, func(cfg *Config) {
		if cfg.ID == "n3" {
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		}
	})
	leader := c.leader()
	if leader.ID() == "n3" {
		if err := leader.TransferLeadership(ctxT(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		leader = c.leader("n1", "n2")
	}
	if whileDown {
		// n3 cannot receive the change that removes it: it comes back with the old
		// configuration and must learn from its former peers.
		c.stop("n3")
	}
	if err := leader.RemoveServer(ctxT(t, 10*time.Second), "n3"); err != nil {
		t.Fatal(err)
	}
	if whileDown {
		c.start("n3")
	}
	// Whether or not the leader's last send of the change reached n3, it says so, once.
	eventually(t, 15*time.Second, "n3 to say it was removed", func() bool { return strings.Contains(logs.String(), said) })
	time.Sleep(300 * time.Millisecond) // fake clock (synctest): a few more serving checks; the message is not repeated
	if n := strings.Count(logs.String(), said); n != 1 {
		t.Fatalf("said %d times; want once:\n%s", n, logs.String())
	}
	if c.nodes["n3"].Serving() {
		t.Fatal("the removed server serves")
	}
}
