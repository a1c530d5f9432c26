package conformance

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"
)

func TestQuota(t *testing.T) {
	// setQuota does what zkCli's setquota does: it creates the quota node chain under
	// /zookeeper/quota, the zookeeper_limits node and a zookeeper_stats node with the current usage.
	setQuota := func(t *testing.T, e *env, limits, stats string) string {
		t.Helper()
		q := "/zookeeper/quota"
		for _, seg := range strings.Split(strings.TrimPrefix(e.base, "/"), "/") {
			q += "/" + seg
			if _, err := e.zk.Create(q, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
				t.Fatalf("create %s: %v", q, err)
			}
		}
		e.mk(q+"/zookeeper_limits", []byte(limits))
		e.mk(q+"/zookeeper_stats", []byte(stats))
		return q + "/zookeeper_stats"
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
	})
}
