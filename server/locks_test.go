package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkd-io/zkd/internal/testkit"
	"github.com/zkd-io/zkd/recipes"
	"github.com/zkd-io/zkd/server"
	"github.com/zkd-io/zkd/server/zkdtest"
)

// withAdmin gives the server an admin HTTP server on a free loopback port.
func withAdmin(t *testing.T) zkdtest.Option {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return zkdtest.WithConfig(func(c *server.Config) { c.AdminListener = ln })
}

// adminJSON fetches an admin command and decodes its JSON answer into out.
func adminJSON(t *testing.T, s *server.Server, command string, out any) {
	t.Helper()
	resp, err := http.Get("http://" + s.AdminAddr() + "/commands/" + command)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/commands/%s: %d %s", command, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatalf("/commands/%s: %v in %s", command, err, body)
	}
}

// locksAnswer is the locks admin command's JSON.
type locksAnswer struct {
	server.LockReport
	Command string  `json:"command"`
	Error   *string `json:"error"`
}

// waitLocks polls the locks command until ok accepts the report (a lock queue has no event a test
// could wait on from outside the clients).
func waitLocks(t *testing.T, s *server.Server, query string, ok func(server.LockReport) bool) server.LockReport {
	t.Helper()
	var rep server.LockReport
	testkit.EventuallyNil(t, 10*time.Second, "the locks condition", func() error {
		var a locksAnswer
		adminJSON(t, s, "locks"+query, &a)
		if a.Error != nil {
			t.Fatalf("locks: error %q", *a.Error)
		}
		if rep = a.LockReport; !ok(rep) {
			return fmt.Errorf("last report %+v", rep)
		}
		return nil
	})
	return rep
}

func queueAt(rep server.LockReport, path string) (server.LockQueue, bool) {
	for _, q := range rep.Locks {
		if q.Path == path {
			return q, true
		}
	}
	return server.LockQueue{}, false
}

func lockSession(t *testing.T, addr string) *recipes.Session {
	t.Helper()
	s, err := recipes.Connect([]string{addr}, 4*time.Second, zk.WithLogInfo(false), zk.WithLogger(quietLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// TestLockReport holds a lock with the module's Mutex recipe and queues two more contenders on a
// real server: the locks command and lcks show the holder and the queue in order, each with its
// session, client address, age and last activity; after the holder unlocks, the next one holds.
func TestLockReport(t *testing.T) {
	s := zkdtest.Start(t, zkdtest.WithoutRaft(), withAdmin(t))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	sess := []*recipes.Session{lockSession(t, s.Addr()), lockSession(t, s.Addr()), lockSession(t, s.Addr())}
	first, err := recipes.NewMutex(sess[0], "/app/lock").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Two waiters, queued one after the other.
	type acquired struct {
		lease *recipes.Lease
		err   error
	}
	got := []chan acquired{make(chan acquired, 1), make(chan acquired, 1)}
	for i := range 2 {
		go func() {
			l, err := recipes.NewMutex(sess[i+1], "/app/lock").Lock(ctx)
			got[i] <- acquired{l, err}
		}()
		waitLocks(t, s, "", func(rep server.LockReport) bool {
			q, ok := queueAt(rep, "/app/lock")
			return ok && len(q.Waiters) == i+1
		})
	}
	rep := waitLocks(t, s, "", func(server.LockReport) bool { return true })
	q, _ := queueAt(rep, "/app/lock")
	ids := []int64{q.Holder.SessionID, q.Waiters[0].SessionID, q.Waiters[1].SessionID}
	for i, id := range ids {
		if id != sess[i].ID() {
			t.Errorf("contender %d belongs to session 0x%x; want 0x%x (holder, then the waiters in queue order)", i, id, sess[i].ID())
		}
	}
	if first.Token().Path != q.Holder.Node {
		t.Errorf("holder node %s; the recipe holds %s", q.Holder.Node, first.Token().Path)
	}
	addr := regexp.MustCompile(`^127\.0\.0\.1:\d+$`)
	for i, c := range append([]server.LockContender{q.Holder}, q.Waiters...) {
		if !strings.HasPrefix(c.Node, "/app/lock/") || c.SessionIDHex != fmt.Sprintf("0x%x", c.SessionID) {
			t.Errorf("contender %+v: bad node or session id", c)
		}
		if !addr.MatchString(c.ClientAddress) || c.Server != "1" {
			t.Errorf("contender %d: client %q on server %q; want its loopback address on server 1", i, c.ClientAddress, c.Server)
		}
		if c.SessionTimeoutMs != 4000 || c.SessionAgeMs < 0 || c.LastActivityMs < 0 || c.NodeAgeMs < 0 {
			t.Errorf("contender %d: timeout %dms, session age %dms, last activity %dms, node age %dms; want 4000 and known ages",
				i, c.SessionTimeoutMs, c.SessionAgeMs, c.LastActivityMs, c.NodeAgeMs)
		}
	}
	if q.Holder.Sequence >= q.Waiters[0].Sequence || q.Waiters[0].Sequence >= q.Waiters[1].Sequence {
		t.Errorf("sequences %d, %d, %d; want ascending", q.Holder.Sequence, q.Waiters[0].Sequence, q.Waiters[1].Sequence)
	}

	// The four-letter word shows the same queue.
	text := word(t, s.Addr(), "lcks")
	want := regexp.MustCompile(fmt.Sprintf(`(?m)^/app/lock: 2 waiting\n\tholder %s session 0x%x client 127\.0\.0\.1:\d+ node_age \d+ms session_age \d+ms last_activity \d+ms\n\twaiter 1 %s session 0x%x `,
		regexp.QuoteMeta(q.Holder.Node), ids[0], regexp.QuoteMeta(q.Waiters[0].Node), ids[1]))
	if !want.MatchString(text) {
		t.Errorf("lcks =\n%s\nwant the holder and the first waiter of /app/lock", text)
	}

	// Unlocked, the first waiter holds and the second waits behind it.
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	a := <-got[0]
	if a.err != nil {
		t.Fatal(a.err)
	}
	rep = waitLocks(t, s, "", func(rep server.LockReport) bool {
		q, ok := queueAt(rep, "/app/lock")
		return ok && len(q.Waiters) == 1
	})
	q, _ = queueAt(rep, "/app/lock")
	if q.Holder.SessionID != ids[1] || q.Waiters[0].SessionID != ids[2] || q.Holder.Node != a.lease.Token().Path {
		t.Errorf("after unlock: holder 0x%x (%s), waiter 0x%x; want 0x%x holding %s, 0x%x waiting",
			q.Holder.SessionID, q.Holder.Node, q.Waiters[0].SessionID, ids[1], a.lease.Token().Path, ids[2])
	}
	if err := a.lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if a := <-got[1]; a.err != nil {
		t.Fatal(a.err)
	} else if err := a.lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	waitLocks(t, s, "", func(rep server.LockReport) bool { _, ok := queueAt(rep, "/app/lock"); return !ok })
}

// TestHerdReport has many sessions watch one node and one node's children: both show in the
// locks command's herds once the threshold is reached, with their counts, and not below it.
func TestHerdReport(t *testing.T) {
	s := zkdtest.Start(t, zkdtest.WithoutRaft(), withAdmin(t))
	c, _ := connect(t, s.Addr())
	for _, p := range []string{"/herd", "/herd/leader", "/quiet"} {
		if _, err := c.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	const n = 12
	for i := range n {
		w, _ := connect(t, s.Addr())
		if _, _, _, err := w.ExistsW("/herd/leader"); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if _, _, _, err := w.ChildrenW("/herd"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, _, _, err := c.GetW("/quiet"); err != nil {
		t.Fatal(err)
	}
	// The watches are registered before each reply, so the report sees them all now.
	var a locksAnswer
	adminJSON(t, s, "locks", &a)
	want := []server.Herd{{Path: "/herd/leader", DataWatchers: n}}
	if a.HerdThreshold != 10 || fmt.Sprint(a.Herds) != fmt.Sprint(want) {
		t.Errorf("herds at the default threshold: %d %+v; want 10 %+v", a.HerdThreshold, a.Herds, want)
	}
	adminJSON(t, s, "locks?threshold=6", &a)
	want = []server.Herd{{Path: "/herd/leader", DataWatchers: n}, {Path: "/herd", ChildWatchers: n / 2}}
	if a.HerdThreshold != 6 || fmt.Sprint(a.Herds) != fmt.Sprint(want) {
		t.Errorf("herds at threshold 6: %d %+v; want %+v", a.HerdThreshold, a.Herds, want)
	}
	adminJSON(t, s, "locks?threshold=13", &a)
	if len(a.Herds) != 0 {
		t.Errorf("herds at threshold 13: %+v; want none", a.Herds)
	}
	adminJSON(t, s, "locks?threshold=x", &a)
	if a.Error == nil {
		t.Error("threshold=x: no error")
	}
	if text := word(t, s.Addr(), "lcks"); !strings.Contains(text, "Herds (10 or more sessions of this server watching one node): 1\n/herd/leader: 12 data watchers, 0 child watchers\n") {
		t.Errorf("lcks =\n%s", text)
	}
}

// TestLocksWordWhitelist: lcks is on by default and, like every word, off when the whitelist
// leaves it out.
func TestLocksWordWhitelist(t *testing.T) {
	s := zkdtest.Start(t, zkdtest.WithoutRaft(), zkdtest.WithConfig(func(c *server.Config) { c.FourLetterWords = nil }))
	if got := word(t, s.Addr(), "lcks"); !strings.HasPrefix(got, "Locks: 0 at zxid 0x") {
		t.Errorf("lcks with the default whitelist = %q", got)
	}
	s2 := zkdtest.Start(t, zkdtest.WithoutRaft(), zkdtest.WithConfig(func(c *server.Config) { c.FourLetterWords = []string{"ruok"} }))
	if got := word(t, s2.Addr(), "lcks"); got != "lcks is not executed because it is not in the whitelist.\n" {
		t.Errorf("lcks not whitelisted = %q", got)
	}
}

// lockBreak sends the lock_break command as a POST with query and the given Authorization header
// (none if empty), and returns the HTTP status and the decoded answer.
func lockBreak(t *testing.T, s *server.Server, method, query, auth string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, "http://"+s.AdminAddr()+"/commands/lock_break?"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

// leaseEnded waits for l to end and returns why.
func leaseEnded(t *testing.T, l *recipes.Lease) error {
	t.Helper()
	select {
	case <-l.Done():
		return l.Err()
	case <-time.After(30 * time.Second):
		t.Fatalf("the lease on %s did not end", l.Token().Path)
		return nil
	}
}

// TestLockBreak: the lock_break admin command deletes a stuck holder's node, handing the lock to the
// next contender while the holder's session lives (the holder's lease ends with ErrLockLost), or
// closes the holder's session (its lease ends with ErrSessionExpired). It takes only a POST, and
// only from a caller with ALL permission on /.
func TestLockBreak(t *testing.T) {
	s := zkdtest.Start(t, withAdmin(t)) // through Raft: the break is a replicated write
	ctx := t.Context()
	sess := []*recipes.Session{lockSession(t, s.Addr()), lockSession(t, s.Addr()), lockSession(t, s.Addr())}
	holder, err := recipes.NewMutex(sess[0], "/app/lock").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	next := make(chan *recipes.Lease, 2)
	for _, w := range sess[1:] {
		go func() {
			l, err := recipes.NewMutex(w, "/app/lock").Lock(ctx)
			if err != nil {
				t.Error(err)
			}
			next <- l
		}()
	}
	waitLocks(t, s, "", func(rep server.LockReport) bool {
		q, ok := queueAt(rep, "/app/lock")
		return ok && len(q.Waiters) == 2
	})

	node := holder.Token().Path
	if code, out := lockBreak(t, s, http.MethodGet, "node="+node, ""); code != http.StatusMethodNotAllowed {
		t.Fatalf("lock_break as a GET: %d %v; want 405", code, out)
	}
	for _, q := range []string{"", "node=/app/lock", "node=/app/lock/nope", "node=bad"} {
		if code, out := lockBreak(t, s, http.MethodPost, q, ""); code != http.StatusOK || out["error"] == nil {
			t.Errorf("lock_break?%s: %d %v; want an error", q, code, out)
		}
	}
	code, out := lockBreak(t, s, http.MethodPost, "node="+node, "")
	if code != http.StatusOK || out["error"] != nil || out["node"] != node || out["session_id"] != float64(sess[0].ID()) {
		t.Fatalf("lock_break of the holder: %d %v", code, out)
	}
	if err := leaseEnded(t, holder); !errors.Is(err, recipes.ErrLockLost) {
		t.Fatalf("the broken holder's lease ended with %v; want ErrLockLost", err)
	}
	second := <-next
	if second.Token().Czxid <= holder.Token().Czxid {
		t.Errorf("the next holder's token %d is not above the broken one's %d", second.Token().Czxid, holder.Token().Czxid)
	}

	code, out = lockBreak(t, s, http.MethodPost, "node="+second.Token().Path+"&expire=true", "")
	if code != http.StatusOK || out["error"] != nil {
		t.Fatalf("lock_break expire=true: %d %v", code, out)
	}
	// The close deletes the holder's node and ends its connection: the client may handle the
	// deletion's notification before it learns that its session is gone.
	if err := leaseEnded(t, second); !errors.Is(err, recipes.ErrSessionExpired) && !errors.Is(err, recipes.ErrLockLost) {
		t.Fatalf("the holder whose session was closed ended with %v; want ErrSessionExpired or ErrLockLost", err)
	}
	third := <-next
	if err := third.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	// Only a caller with ALL permission on / may break a lock.
	c, _ := connect(t, s.Addr())
	if err := c.AddAuth("digest", []byte("ops:secret")); err != nil {
		t.Fatal(err)
	}
	l, err := recipes.NewMutex(sess[1], "/app/lock").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetACL("/", zk.DigestACL(zk.PermAll, "ops", "secret"), -1); err != nil {
		t.Fatal(err)
	}
	if code, out := lockBreak(t, s, http.MethodPost, "node="+l.Token().Path, ""); code != http.StatusForbidden {
		t.Fatalf("lock_break without credentials under a digest ACL on /: %d %v; want 403", code, out)
	}
	if code, out := lockBreak(t, s, http.MethodPost, "node="+l.Token().Path, "digest ops:secret"); code != http.StatusOK || out["error"] != nil {
		t.Fatalf("lock_break with the digest credentials: %d %v", code, out)
	}
	if err := leaseEnded(t, l); !errors.Is(err, recipes.ErrLockLost) {
		t.Fatalf("lease ended with %v; want ErrLockLost", err)
	}
}
