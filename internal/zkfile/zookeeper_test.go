package zkfile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkd-io/zkd/internal/testkit/apachezk"
	"github.com/zkd-io/zkd/internal/testkit/zktest"
	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/znode"
)

// These tests run a real Apache ZooKeeper, put every kind of transaction through it with
// snapshots and logs rolling over, and check that Load rebuilds exactly the tree ZooKeeper
// itself serves after a restart on the same files.

type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

func connect(t *testing.T, addr string) *zk.Conn {
	t.Helper()
	c, events, err := zk.Connect([]string{addr}, 20*time.Second, zk.WithLogInfo(false), zk.WithLogger(quietLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return c
			}
		case <-ctx.Done():
			t.Fatalf("no session with %s: %v", addr, ctx.Err())
		}
	}
}

// zooKeeperExtra is the zoo.cfg the workload needs: TTL nodes, frequent snapshots and small
// logs, a super user (the reader reads every node and ACL as super, and quotas need it), and the
// SASL provider (so that a sasl ACL is valid).
func zooKeeperExtra() map[string]string {
	return map[string]string{
		"extendedTypesEnabled": "true",
		"snapCount":            "40", // a snapshot, and a new log, every 20 to 40 transactions
		"preAllocSize":         "16", // KiB of zero padding after each log's end
		"DigestAuthenticationProvider.superDigest": znode.DigestID("super", "pw"),
		"authProvider.1": "org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
	}
}

// startZooKeeper launches a standalone ZooKeeper in dir with extra zoo.cfg keys and waits for it.
func startZooKeeper(t *testing.T, dir string, extra map[string]string) *apachezk.Process {
	t.Helper()
	return zktest.Launch(t, 1, func(ports []int) apachezk.ServerConfig {
		return apachezk.ServerConfig{Dir: dir, ClientAddr: fmt.Sprintf("127.0.0.1:%d", ports[0]), Extra: extra}
	})
}

// workload puts every transaction kind ZooKeeper logs through c: creates of every mode,
// setData, setACL with every scheme, deletes, successful and failed multis, sessions that end
// (deleting their ephemerals) and one (keep) that stays open with its ephemerals.
func workload(t *testing.T, addr string, rounds int) (keep *zk.Conn) {
	c := connect(t, addr)
	keep = connect(t, addr)
	ok := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	open := zk.WorldACL(zk.PermAll)
	if err := c.AddAuth("digest", []byte("alice:secret")); err != nil {
		t.Fatal(err)
	}
	acls := [][]zk.ACL{
		open,
		zk.WorldACL(zk.PermRead),
		zk.DigestACL(zk.PermAll, "bob", "pw"),
		{{Perms: zk.PermAll, Scheme: "auth", ID: ""}},
		{{Perms: zk.PermRead | zk.PermWrite, Scheme: "ip", ID: "127.0.0.1"}, {Perms: zk.PermAll, Scheme: "digest", ID: "alice:abc"}},
	}
	for _, p := range []string{"/app", "/seq", "/eph", "/multi"} {
		ok(c.Create(p, []byte(p), 0, open))
	}
	// Quotas are nodes under /zookeeper/quota, which only super may write.
	su := connect(t, addr)
	if err := su.AddAuth("digest", []byte("super:pw")); err != nil {
		t.Fatal(err)
	}
	ok(su.Create("/zookeeper/quota/app", nil, 0, open))
	ok(su.Create("/zookeeper/quota/app/zookeeper_limits", []byte("count=1000,bytes=-1"), 0, open))
	ok(su.Create("/zookeeper/quota/app/zookeeper_stats", []byte("count=1,bytes=4"), 0, open))
	su.Close()
	// An ACL of the sasl scheme (the SASL provider is configured, so ZooKeeper accepts it).
	ok(c.Create("/app/sasl", nil, 0, []zk.ACL{{Perms: zk.PermAll, Scheme: "sasl", ID: "bob"}}))
	ok(c.CreateContainer("/cont", nil, zk.FlagContainer, open))
	for r := range rounds {
		n := fmt.Sprintf("/app/n%03d", r)
		ok(c.Create(n, bytes.Repeat([]byte{byte(r)}, r%7*10), 0, acls[r%len(acls)]))
		if r%len(acls) != 1 && r%len(acls) != 2 { // writable by c
			ok(c.Set(n, []byte(fmt.Sprintf("v%d", r)), -1))
			ok(c.Set(n, []byte(fmt.Sprintf("v%d again", r)), 1))
		}
		ok(c.Create("/seq/s-", []byte{byte(r)}, zk.FlagSequence, open))
		ok(c.Create(fmt.Sprintf("/cont/c%03d", r), nil, 0, open))
		ok(c.CreateTTL(fmt.Sprintf("/app/ttl%03d", r), []byte("t"), zk.FlagTTL, open, time.Duration(r+1)*time.Hour))
		if k := r % len(acls); r%3 == 0 && (k == 0 || k == 3) { // ADMIN for c
			ok(c.SetACL(n, acls[(k+1)%len(acls)], -1))
		}
		if r%4 == 0 && r > 0 {
			if err := c.Delete(fmt.Sprintf("/app/n%03d", r-1), -1); err != nil && !errors.Is(err, zk.ErrNoAuth) {
				t.Fatal(err)
			}
			if err := c.Delete(fmt.Sprintf("/cont/c%03d", r-1), -1); err != nil {
				t.Fatal(err)
			}
		}
		ok(keep.Create(fmt.Sprintf("/eph/keep%03d", r), []byte("k"), zk.FlagEphemeral, open))
		ok(keep.Create("/eph/keepseq-", nil, zk.FlagEphemeralSequential, open))
		if r%10 == 0 {
			// A session that ends: its ephemerals go with it (a closeSession transaction).
			s := connect(t, addr)
			ok(s.Create(fmt.Sprintf("/eph/gone%03d", r), nil, zk.FlagEphemeral, open))
			s.Close()
		}
		m := fmt.Sprintf("/multi/m%03d", r)
		ok(c.Multi(
			&zk.CreateRequest{Path: m, Data: []byte("m"), Acl: open},
			&zk.SetDataRequest{Path: m, Data: []byte("m2"), Version: 0},
			&zk.CheckVersionRequest{Path: m, Version: 1},
			&zk.CreateRequest{Path: m + "/child", Acl: open, Flags: zk.FlagSequence},
		))
		// A multi that fails (a check on a wrong version) is logged as an error transaction.
		if _, err := c.Multi(
			&zk.CreateRequest{Path: m + "/never", Acl: open},
			&zk.CheckVersionRequest{Path: m, Version: 99},
		); !errors.Is(err, zk.ErrBadVersion) {
			t.Fatalf("failing multi: %v", err)
		}
		if r%5 == 4 {
			ok(c.Multi(&zk.DeleteRequest{Path: m + "/child" + fmt.Sprintf("%010d", 0), Version: -1}))
		}
	}
	return keep
}

func saveSeed(t *testing.T, from, dir string) {
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, filepath.Base(from)), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// dumpState is zktest.DumpTree's view of a loaded State.
func dumpState(s *State) map[string]zktest.Znode {
	out := map[string]zktest.Znode{}
	for p, n := range s.Nodes {
		acl := make([]zk.ACL, 0, len(n.ACL))
		for _, a := range n.ACL {
			acl = append(acl, zk.ACL{Perms: a.Perms, Scheme: a.ID.Scheme, ID: a.ID.ID})
		}
		if n.ACL == nil {
			acl = zk.WorldACL(zk.PermAll)
		}
		cs := n.ClientStat()
		e := zktest.Znode{Data: n.Data, ACL: acl, Stat: zk.Stat{
			Czxid: cs.Czxid, Mzxid: cs.Mzxid, Ctime: cs.Ctime, Mtime: cs.Mtime, Version: cs.Version,
			Cversion: cs.Cversion, Aversion: cs.Aversion, EphemeralOwner: cs.EphemeralOwner,
			DataLength: cs.DataLength, NumChildren: cs.NumChildren, Pzxid: cs.Pzxid,
		}}
		out[p] = e
	}
	return out
}

// dumpView is zktest.DumpTree's view of a zkd tree, as zkd's server reads it.
func dumpView(t *testing.T, v *znode.View) map[string]zktest.Znode {
	out := map[string]zktest.Znode{}
	err := v.Walk(func(p string, data []byte, st jute.Stat) error {
		list, _ := v.ACL(p)
		acl := make([]zk.ACL, 0, len(list))
		for _, a := range list {
			acl = append(acl, zk.ACL{Perms: a.Perms, Scheme: a.ID.Scheme, ID: a.ID.ID})
		}
		out[p] = zktest.Znode{Data: data, ACL: acl, Stat: zk.Stat{
			Czxid: st.Czxid, Mzxid: st.Mzxid, Ctime: st.Ctime, Mtime: st.Mtime, Version: st.Version,
			Cversion: st.Cversion, Aversion: st.Aversion, EphemeralOwner: st.EphemeralOwner,
			DataLength: st.DataLength, NumChildren: st.NumChildren, Pzxid: st.Pzxid,
		}}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The tree loaded from ZooKeeper's files equals the tree ZooKeeper serves, before it stops and
// after it restarts on the same files, with every snapshot compression ZooKeeper offers.
func TestLoadMatchesZooKeeper(t *testing.T) {
	zktest.Require(t)
	for _, comp := range []string{"", "gz", "snappy"} {
		t.Run("compression="+comp, func(t *testing.T) {
			dir := t.TempDir()
			extra := zooKeeperExtra()
			if comp != "" {
				extra["snapshot.compression.method"] = comp
			}
			zkp := startZooKeeper(t, dir, extra)
			keep := workload(t, zkp.ClientAddr(), 60)
			reader := connect(t, zkp.ClientAddr())
			if err := reader.AddAuth("digest", []byte("super:pw")); err != nil {
				t.Fatal(err)
			}
			before := zktest.DumpTree(t, reader)
			sessions := []int64{keep.SessionID(), reader.SessionID()}
			if err := zkp.Stop(); err != nil {
				t.Fatal(err)
			}

			st, rep, err := Load(dir+"/data", dir+"/txnlog")
			if err != nil {
				t.Fatal(err)
			}
			if keep := os.Getenv("ZKFILE_SEEDS"); keep != "" && comp == "" {
				// Refreshes the fuzz seeds in testdata from a real ZooKeeper's files.
				saveSeed(t, rep.Snapshot, filepath.Join(keep, "snapshot"))
				saveSeed(t, rep.Logs[0], filepath.Join(keep, "log"))
			}
			t.Logf("loaded %s and %d logs (%d transactions after it); %d nodes, %d sessions; digest checked: %v",
				rep.Snapshot, len(rep.Logs), rep.Txns, len(st.Nodes), len(st.Sessions), rep.DigestChecked)
			if rep.Txns > 0 && !rep.DigestChecked {
				t.Error("ZooKeeper 3.8 logs a tree digest after every transaction, yet the digest was not checked")
			}
			if comp != "" && !strings.HasSuffix(rep.Snapshot, "."+comp) {
				t.Errorf("snapshot %s is not %s-compressed", rep.Snapshot, comp)
			}
			snaps, _ := filepath.Glob(dir + "/data/version-2/snapshot.*")
			logs, _ := filepath.Glob(dir + "/txnlog/version-2/log.*")
			if len(snaps) < 3 || len(logs) < 3 {
				t.Errorf("want snapshots and logs rolled over several times: %d snapshots, %d logs", len(snaps), len(logs))
			}
			zktest.DiffTrees(t, "state vs the tree before the stop", dumpState(st), before)
			for _, s := range sessions {
				if _, ok := st.Sessions[s]; !ok {
					t.Errorf("open session %#x missing from the loaded sessions", s)
				}
			}
			if got := len(st.Ephemerals(keep.SessionID())); got != 120 {
				t.Errorf("the open session owns %d ephemerals, want 120", got)
			}

			zkp2 := startZooKeeper(t, dir, extra)
			reader2 := connect(t, zkp2.ClientAddr())
			if err := reader2.AddAuth("digest", []byte("super:pw")); err != nil {
				t.Fatal(err)
			}
			restarted := zktest.DumpTree(t, reader2)
			zktest.DiffTrees(t, "state vs ZooKeeper restarted on the same files", dumpState(st), restarted)
			// The tree zkd import builds from it serves the same, field for field.
			tree, err := st.Tree()
			if err != nil {
				t.Fatal(err)
			}
			zktest.DiffTrees(t, "zkd's imported tree vs ZooKeeper restarted", dumpView(t, tree.View()), restarted)
		})
	}
}
