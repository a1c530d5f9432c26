package consensus

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zkd-io/zkd/jute"
)

// TestMetricsOfACluster checks the measurements mntr and /metrics read, on a real 3-node
// cluster after real writes: the leader's view of its followers (lag, synced), the log and apply
// timings, and what each side counts.
func TestMetricsOfACluster(t *testing.T) { synctest.Test(t, testMetricsOfACluster) }

func testMetricsOfACluster(t *testing.T) {
	c := newBubbleCluster(t, 3, true, nil)
	leader := c.leader()
	ctx := ctxT(t, 30*time.Second)
	const writes = 20
	for i := range writes {
		if res, err := leader.Propose(ctx, createReq(fmt.Sprintf("/m%02d", i), []byte("data"), jute.ModePersistent)); err != nil || res.Err != nil {
			t.Fatalf("write %d: %v %v", i, err, res.Err)
		}
	}
	c.converge()
	eventually(t, 10*time.Second, "the leader sees both followers synced and caught up", func() bool {
		fs := leader.Stats().Followers
		if len(fs) != 2 {
			return false
		}
		for _, f := range fs {
			if !f.Synced || f.Syncing || f.Lag != 0 || f.LastContact < 0 {
				return false
			}
		}
		return true
	})
	st := leader.Stats()
	if st.LeaderChanges < 1 || st.LeaderSince.IsZero() || st.ProposalSizeMin <= 0 || st.ProposalSizeMax < st.ProposalSizeMin {
		t.Errorf("leader stats: changes %d, since %v, proposal sizes %d..%d", st.LeaderChanges, st.LeaderSince, st.ProposalSizeMin, st.ProposalSizeMax)
	}
	m := leader.metrics
	if n := m.fsync.Total().Count; n == 0 {
		t.Error("no log append was timed on the leader")
	}
	if m.proposals.Total() < writes || m.commits.Total() < writes || m.localCommit.Total().Count < writes {
		t.Errorf("leader counted %d proposals, %d commits, %d local commits; want at least %d each",
			m.proposals.Total(), m.commits.Total(), m.localCommit.Total().Count, writes)
	}
	if m.election.Total().Count < 1 || m.apply.Total().Count < writes {
		t.Errorf("leader timed %d elections and %d applies", m.election.Total().Count, m.apply.Total().Count)
	}
	// The followers are the nodes that did not take the writes. (Asking who leads now can name
	// the leader itself: on a machine stalled past the leader lease, it steps down and is elected
	// again, which happened in a CI run.)
	for _, f := range c.running() {
		if f == leader {
			continue
		}
		fm := f.metrics
		if fm.learnerProps.Total() < writes {
			t.Errorf("follower %s counted %d entries received; want at least %d", f.ID(), fm.learnerProps.Total(), writes)
		}
		if fm.commitProp.Total().Count < writes {
			t.Errorf("follower %s timed %d commit propagations; want at least %d", f.ID(), fm.commitProp.Total().Count, writes)
		}
		if f.IsLeader() {
			t.Logf("%s leads since the writes: what it proposed and its followers are a leader's", f.ID())
			continue
		}
		if f.Stats().Followers != nil || fm.proposals.Total() != 0 {
			t.Errorf("follower %s reports followers (%v) or counted %d proposals", f.ID(), f.Stats().Followers, fm.proposals.Total())
		}
	}
}
