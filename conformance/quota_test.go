package conformance

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkd-io/zkd/internal/testkit"
)

func TestQuota(t *testing.T) {
	// setQuotaOn does what zkCli's setquota does for path: it creates the quota node chain under
	// /zookeeper/quota, the zookeeper_limits node and a zookeeper_stats node (whose data the
	// server replaces with the subtree's current usage). It returns the stats node's path.
	setQuotaOn := func(t *testing.T, e *env, path, limits, stats string) string {
		t.Helper()
		q := "/zookeeper/quota"
		for _, seg := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
			q += "/" + seg
			if _, err := e.zk.Create(q, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
				t.Fatalf("create %s: %v", q, err)
			}
		}
		e.mk(q+"/zookeeper_limits", []byte(limits))
		e.mk(q+"/zookeeper_stats", []byte(stats))
		return q + "/zookeeper_stats"
	}
	setQuota := func(t *testing.T, e *env, limits, stats string) string {
		t.Helper()
		return setQuotaOn(t, e, e.base, limits, stats)
	}
	stats := func(t *testing.T, e *env, path string) string {
		t.Helper()
		data, _, err := e.zk.Get(path)
		must(t, "get "+path, err)
		return string(data)
	}
	runChecks(t, "quota", []check{
		{"stats_count_and_bytes_follow_creates", func(t *testing.T, e *env) {
			sp := setQuota(t, e, "count=10,bytes=-1", "count=1,bytes=0")
			e.mk(e.p("a"), []byte("hello"))
			e.mk(e.p("a", "b"), []byte("xy"))
			if got := stats(t, e, sp); got != "count=3,bytes=7" {
				t.Fatalf("zookeeper_stats %q; want count=3,bytes=7", got)
			}
		}},
		{"stats_bytes_follow_setData", func(t *testing.T, e *env) {
			sp := setQuota(t, e, "count=10,bytes=-1", "count=1,bytes=0")
			e.mk(e.p("a"), []byte("hello"))
			_, err := e.zk.Set(e.p("a"), []byte("hi"), -1)
			must(t, "set", err)
			if got := stats(t, e, sp); got != "count=2,bytes=2" {
				t.Fatalf("zookeeper_stats %q; want count=2,bytes=2", got)
			}
		}},
		{"stats_follow_deletes", func(t *testing.T, e *env) {
			sp := setQuota(t, e, "count=10,bytes=-1", "count=1,bytes=0")
			e.mk(e.p("a"), []byte("hello"))
			must(t, "delete", e.zk.Delete(e.p("a"), -1))
			if got := stats(t, e, sp); got != "count=1,bytes=0" {
				t.Fatalf("zookeeper_stats %q; want count=1,bytes=0", got)
			}
		}},
		{"exceeding_a_soft_quota_is_allowed", func(t *testing.T, e *env) {
			setQuota(t, e, "count=2,bytes=-1", "count=1,bytes=0")
			for _, n := range []string{"a", "b", "c"} {
				e.mk(e.p(n), nil)
			}
		}},
		{"creating_stats_counts_the_subtree", func(t *testing.T, e *env) {
			e.mk(e.p("a"), []byte("hello"))
			e.mk(e.p("a", "b"), []byte("xy"))
			sp := setQuota(t, e, "count=10,bytes=-1", "count=99,bytes=99")
			if got := stats(t, e, sp); got != "count=3,bytes=7" {
				t.Fatalf("zookeeper_stats %q; want count=3,bytes=7", got)
			}
		}},
		{"stats_update_keeps_the_stat_and_fires_no_watch", func(t *testing.T, e *env) {
			sp := setQuota(t, e, "count=10,bytes=-1", "")
			_, before, ch, err := e.zk.GetW(sp)
			must(t, "getW", err)
			e.mk(e.p("a"), []byte("hello"))
			// A watch event for the change would have been read before the create's reply.
			select {
			case ev := <-ch:
				t.Fatalf("watch fired: %+v", ev)
			default:
			}
			data, after, err := e.zk.Get(sp)
			must(t, "get", err)
			if string(data) != "count=2,bytes=5" {
				t.Fatalf("zookeeper_stats %q; want count=2,bytes=5", data)
			}
			want := *before
			want.DataLength = int32(len(data))
			if *after != want {
				t.Fatalf("stats Stat %+v; want %+v (only dataLength changes)", *after, want)
			}
		}},
		{"nested_roots_the_longest_wins", func(t *testing.T, e *env) {
			outer := setQuota(t, e, "count=10,bytes=-1", "")
			e.mk(e.p("a"), []byte("12"))
			inner := setQuotaOn(t, e, e.p("a"), "count=10,bytes=-1", "")
			e.mk(e.p("a", "b"), []byte("345"))
			e.mk(e.p("x"), []byte("6789"))
			if got := stats(t, e, outer); got != "count=3,bytes=6" {
				t.Fatalf("outer zookeeper_stats %q; want count=3,bytes=6", got)
			}
			if got := stats(t, e, inner); got != "count=2,bytes=5" {
				t.Fatalf("inner zookeeper_stats %q; want count=2,bytes=5", got)
			}
		}},
		{"a_root_does_not_cover_a_sibling_sharing_its_prefix", func(t *testing.T, e *env) {
			e.mk(e.p("a"), nil)
			sp := setQuotaOn(t, e, e.p("a"), "count=10,bytes=-1", "")
			e.mk(e.p("ab"), []byte("xyz"))
			e.mk(e.p("a", "b"), []byte("q"))
			if got := stats(t, e, sp); got != "count=2,bytes=1" {
				t.Fatalf("zookeeper_stats %q; want count=2,bytes=1", got)
			}
		}},
		{"removing_the_limits_node_ends_accounting", func(t *testing.T, e *env) {
			sp := setQuota(t, e, "count=10,bytes=-1", "")
			e.mk(e.p("a"), []byte("1"))
			must(t, "delete limits", e.zk.Delete(strings.TrimSuffix(sp, "zookeeper_stats")+"zookeeper_limits", -1))
			e.mk(e.p("b"), []byte("22"))
			if got := stats(t, e, sp); got != "count=2,bytes=1" {
				t.Fatalf("zookeeper_stats %q; want count=2,bytes=1", got)
			}
		}},
		{"stats_text_keeps_extra_fields", func(t *testing.T, e *env) {
			sp := setQuota(t, e, "count=10,bytes=-1", "")
			_, err := e.zk.Set(sp, []byte("count=1,bytes=0=;zzz=5;aaa=2"), -1)
			must(t, "set stats", err)
			e.mk(e.p("a"), []byte("xyz"))
			if got := stats(t, e, sp); got != "count=2,bytes=3=;aaa=2;zzz=5" {
				t.Fatalf("zookeeper_stats %q; want count=2,bytes=3=;aaa=2;zzz=5", got)
			}
		}},
		{"multi_ops_are_charged", func(t *testing.T, e *env) {
			sp := setQuota(t, e, "count=10,bytes=-1", "")
			e.mk(e.p("old"), []byte("1234"))
			_, err := e.zk.Multi(
				&zk.CreateRequest{Path: e.p("m"), Data: []byte("abc"), Acl: zk.WorldACL(zk.PermAll)},
				&zk.SetDataRequest{Path: e.p("m"), Data: []byte("abcdefg"), Version: -1},
				&zk.DeleteRequest{Path: e.p("old"), Version: -1},
			)
			must(t, "multi", err)
			if got := stats(t, e, sp); got != "count=2,bytes=7" {
				t.Fatalf("zookeeper_stats %q; want count=2,bytes=7", got)
			}
		}},
		{"ephemerals_of_a_closed_session_are_charged", func(t *testing.T, e *env) {
			sp := setQuota(t, e, "count=10,bytes=-1", "")
			other, _ := e.connect(10 * time.Second)
			_, err := other.Create(e.p("eph"), []byte("12345"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
			must(t, "create ephemeral", err)
			if got := stats(t, e, sp); got != "count=2,bytes=5" {
				t.Fatalf("zookeeper_stats %q; want count=2,bytes=5", got)
			}
			other.Close()
			if !testkit.Until(waitTimeout, func() bool { return !e.exists(e.p("eph")) }) {
				t.Fatalf("ephemeral still there %v after its session closed", waitTimeout)
			}
			if got := stats(t, e, sp); got != "count=1,bytes=0" {
				t.Fatalf("zookeeper_stats %q; want count=1,bytes=0", got)
			}
		}},
	})
}
