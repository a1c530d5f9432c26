package consensus

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/znode"
)

// sessionKeeper is the leader's side of session liveness and of what expires: it batches the
// touches a follower's clients send, keeps the deadlines (sessionTracker) on the leader, validates
// reattaching sessions and hands out attachment tokens and session ids, and proposes the close of
// expired sessions and the deletion of expired TTL nodes and empty containers.
type sessionKeeper struct {
	n       *Node
	tracker *sessionTracker

	touchMu sync.Mutex
	touches map[int64]struct{} // batched for the leader (follower)

	// attachMu guards the attachment tokens this node hands out as leader (newAttach).
	attachMu    sync.Mutex
	attachTerm  uint64
	attachCount uint64

	sidMu   sync.Mutex
	lastSID int64 // last session id this node issued as leader
}

func newSessionKeeper(n *Node, tracker *sessionTracker) *sessionKeeper {
	return &sessionKeeper{n: n, tracker: tracker, touches: make(map[int64]struct{})}
}

// touch records live sessions: on the leader in the tracker, elsewhere in the batch for it.
func (k *sessionKeeper) touch(ids []int64) {
	n := k.n
	if n.IsLeader() {
		now := time.Now()
		for _, id := range ids {
			k.tracker.touch(id, now)
		}
		return
	}
	k.touchMu.Lock()
	defer k.touchMu.Unlock()
	for _, id := range ids {
		k.touches[id] = struct{}{}
	}
}

// flushTouches sends the batched touches to the leader.
func (k *sessionKeeper) flushTouches() {
	n := k.n
	k.touchMu.Lock()
	if len(k.touches) == 0 {
		k.touchMu.Unlock()
		return
	}
	ids := make([]int64, 0, len(k.touches))
	for id := range k.touches {
		ids = append(ids, id)
	}
	clear(k.touches)
	k.touchMu.Unlock()
	if n.IsLeader() {
		k.touch(ids)
		return
	}
	addr, id := n.raft.LeaderWithID()
	if id == "" {
		k.touch(ids) // keep them for the next round
		return
	}
	n.goTracked(func() {
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.TickTime)
		defer cancel()
		if err := n.callLeader(ctx, string(addr), rpcTouch, &sessionsMsg{IDs: ids}, &sessionsMsg{}); err != nil {
			n.log.Debug("session touch failed", "err", err)
			k.touch(ids)
		}
	})
}

func (k *sessionKeeper) leaderTouch(ids []int64) error {
	n := k.n
	if !n.IsLeader() {
		return ErrNotLeader
	}
	now := time.Now()
	for _, id := range ids {
		k.tracker.touch(id, now) // a session the leader does not know has expired: nothing to keep
	}
	return nil
}

// leaderValidate checks a session that attaches on server and, if it is live, makes server its
// owner (from then on writes for it through any other server are refused with ErrSessionMoved)
// and returns the new attachment's token. An empty server (an older peer) validates without
// moving the session.
func (k *sessionKeeper) leaderValidate(id int64, server string) (bool, uint64, error) {
	n := k.n
	if !n.IsLeader() {
		return false, 0, ErrNotLeader
	}
	if !k.tracker.touch(id, time.Now()) {
		// A follower may apply the entry that created the session before this leader's FSM
		// does (the commit reaches it with the next AppendEntries while the FSM is still at
		// work), and answer its client, who may attach at once. Look again once everything
		// committed is applied here.
		ctx, cancel := context.WithTimeout(n.ctx, time.Second)
		err := n.WaitApplied(ctx, n.lead.lastCommandUpTo(n.raft.CommitIndex()))
		cancel()
		if err != nil || !k.tracker.touch(id, time.Now()) {
			return false, 0, nil
		}
	}
	attach, err := k.newAttach()
	if err != nil {
		return false, 0, err
	}
	if server != "" {
		k.tracker.claim(id, server)
	}
	return true, attach, nil
}

// newAttach returns a new attachment token: the leader's term in the high 32 bits and a count
// within the term below. Only one node leads in a term and terms only grow, so tokens grow across
// leaders and restarts without being stored. A node deposed without knowing it may still hand out
// tokens of its old term; they are smaller than the new leader's, so at worst the session's writes
// through that attachment are refused and its client reconnects.
func (k *sessionKeeper) newAttach() (uint64, error) {
	n := k.n
	term := n.raft.CurrentTerm()
	k.attachMu.Lock()
	defer k.attachMu.Unlock()
	if term != k.attachTerm {
		k.attachTerm, k.attachCount = term, 0
	}
	if term >= 1<<32 || k.attachCount >= 1<<32-1 {
		return 0, fmt.Errorf("%w: attachment tokens of term %d used up", ErrNotLeader, term)
	}
	k.attachCount++
	return term<<32 | k.attachCount, nil
}

// expireSessions proposes the close of every session whose deadline passed (leader only).
func (k *sessionKeeper) expireSessions() {
	n := k.n
	ids := k.tracker.expire(time.Now())
	if len(ids) == 0 {
		return
	}
	n.log.Info("expiring sessions", "count", len(ids))
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.HoldTimeout)
	pd, err := n.props.start(ctx, &command{op: jute.OpCloseSession, body: closeSessionsBody(ids)}, true)
	cancel()
	if err != nil {
		k.tracker.unclose(ids)
		return
	}
	n.goTracked(func() {
		if _, err := pd.Wait(n.ctx); err != nil {
			n.log.Warn("session expiry failed", "err", err)
			k.tracker.unclose(ids)
			return
		}
		n.stats.expired.Add(int64(len(ids)))
		n.metrics.staleExpired.Add(int64(len(ids)))
	})
}

// reap proposes the deletion of expired TTL nodes and empty containers (leader only).
func (k *sessionKeeper) reap() {
	n := k.n
	paths := n.View().ReapCandidates(time.Now().UnixMilli(), n.cfg.ContainerNeverUsedInterval, n.cfg.ReapMaxPerInterval)
	if len(paths) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.HoldTimeout)
	pd, err := n.props.start(ctx, &command{op: jute.OpDeleteContainer, body: reapBody(paths, n.cfg.ContainerNeverUsedInterval)}, true)
	cancel()
	if err != nil {
		return
	}
	n.goTracked(func() {
		if _, err := pd.Wait(n.ctx); err == nil {
			n.stats.reaped.Add(int64(len(paths)))
		}
	})
}

// stampSession fills in a createSession entry: a new session id, a random password and the token
// of the session's first attachment. It returns the new entry.
func (k *sessionKeeper) stampSession(entry []byte, server string) ([]byte, error) {
	c, err := unmarshalCommand(entry)
	if err != nil || len(c.body) != 4 {
		return nil, fmt.Errorf("%w: createSession proposal body", ErrBadRequest)
	}
	timeout := int32(binary.BigEndian.Uint32(c.body))
	// The password is the session's only secret: whoever knows id and password can take the
	// session over, so it comes from the operating system's CSPRNG.
	passwd := make([]byte, 16)
	crand.Read(passwd)
	attach, err := k.newAttach()
	if err != nil {
		return nil, err
	}
	id := k.newSessionID()
	k.tracker.claim(id, server)
	c.body = createSessionBody(znode.CreateSession{ID: id, Timeout: timeout, Passwd: passwd, Attach: attach})
	return c.marshal(), nil
}

// newSessionID picks a session id the way ZooKeeper lays them out: the top byte names the server
// (here 1..127 from a hash of the server id, so ids are positive and never 0x8000000000000000),
// the other 56 bits start from the clock and count up. Ids are unique among the sessions this
// leader knows and increase while it leads.
func (k *sessionKeeper) newSessionID() int64 {
	n := k.n
	h := fnv.New32a()
	h.Write([]byte(n.cfg.ID))
	prefix := uint64(h.Sum32()%127 + 1)
	base := int64(prefix<<56 | (uint64(time.Now().UnixMilli())<<24)>>8)
	k.sidMu.Lock()
	defer k.sidMu.Unlock()
	id := max(base, k.lastSID+1)
	v := n.View()
	for {
		if _, taken := v.Session(id); !taken && id > 0 {
			break
		}
		id++
	}
	k.lastSID = id
	return id
}
