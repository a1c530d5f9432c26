package conformance

import (
	"regexp"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/zkd-io/zkd/jute"
)

func TestSequential(t *testing.T) {
	seq := func(t *testing.T, e *env, prefix string) string {
		t.Helper()
		p, err := e.zk.Create(prefix, nil, zk.FlagSequence, zk.WorldACL(zk.PermAll))
		must(t, "create sequential "+prefix, err)
		return p
	}
	runChecks(t, "sequential", []check{
		{"first_suffix_is_ten_zero_digits", func(t *testing.T, e *env) {
			if got := seq(t, e, e.p("s-")); got != e.p("s-0000000000") {
				t.Fatalf("created %q; want %q", got, e.p("s-0000000000"))
			}
		}},
		{"suffixes_count_up", func(t *testing.T, e *env) {
			for i := range 3 {
				want := e.p("s-000000000" + itoa(i))
				if got := seq(t, e, e.p("s-")); got != want {
					t.Fatalf("create %d: %q; want %q", i, got, want)
				}
			}
		}},
		{"counter_is_not_reused_after_delete", func(t *testing.T, e *env) {
			for range 3 {
				seq(t, e, e.p("s-"))
			}
			must(t, "delete s-1", e.zk.Delete(e.p("s-0000000001"), -1))
			if got := seq(t, e, e.p("s-")); got != e.p("s-0000000003") {
				t.Fatalf("after deleting s-1: %q; want s-0000000003", got)
			}
		}},
		{"plain_child_creates_advance_the_counter", func(t *testing.T, e *env) {
			for range 3 {
				seq(t, e, e.p("s-"))
			}
			must(t, "delete s-1", e.zk.Delete(e.p("s-0000000001"), -1))
			seq(t, e, e.p("s-"))
			e.mk(e.p("plain"), nil)
			if got := seq(t, e, e.p("s-")); got != e.p("s-0000000005") {
				t.Fatalf("after a plain create: %q; want s-0000000005", got)
			}
		}},
		{"counter_is_per_parent", func(t *testing.T, e *env) {
			e.mk(e.p("a"), nil)
			e.mk(e.p("b"), nil)
			seq(t, e, e.p("a", "x"))
			if got := seq(t, e, e.p("b", "x")); got != e.p("b", "x0000000000") {
				t.Fatalf("first under b: %q", got)
			}
		}},
		{"different_prefixes_share_the_parents_counter", func(t *testing.T, e *env) {
			seq(t, e, e.p("lock-"))
			if got := seq(t, e, e.p("read-")); got != e.p("read-0000000001") {
				t.Fatalf("second prefix: %q; want read-0000000001", got)
			}
		}},
		{"ephemeral_sequential_gets_suffix_and_owner", func(t *testing.T, e *env) {
			p, err := e.zk.Create(e.p("e-"), nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
			must(t, "create", err)
			if p != e.p("e-0000000000") {
				t.Fatalf("created %q", p)
			}
			if st := e.stat(p); st.EphemeralOwner != e.zk.SessionID() {
				t.Fatalf("owner 0x%x; want 0x%x", st.EphemeralOwner, e.zk.SessionID())
			}
		}},
		{"protected_ephemeral_sequential_name_shape", func(t *testing.T, e *env) {
			p, err := e.zk.CreateProtectedEphemeralSequential(e.p("lock-"), nil, zk.WorldACL(zk.PermAll))
			must(t, "create protected", err)
			name := p[strings.LastIndex(p, "/")+1:]
			if !regexp.MustCompile(`^_c_[0-9a-f]{32}-lock-\d{10}$`).MatchString(name) {
				t.Fatalf("name %q does not have the _c_<guid>-lock-<10 digits> shape", name)
			}
		}},
		{"sequential_creates_in_one_multi_are_consecutive", func(t *testing.T, e *env) {
			r := e.raw()
			req := &jute.MultiRequest{Ops: []jute.MultiOp{
				{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: e.p("m-"), ACL: openACL(), Flags: jute.ModePersistentSequential}},
				{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: e.p("m-"), ACL: openACL(), Flags: jute.ModePersistentSequential}},
			}}
			var resp jute.MultiResponse
			_, err := r.Do(jute.OpMulti, req, &resp)
			must(t, "multi", err)
			if len(resp.Results) != 2 {
				t.Fatalf("%d results", len(resp.Results))
			}
			p0 := resp.Results[0].Resp.(*jute.CreateResponse).Path
			p1 := resp.Results[1].Resp.(*jute.CreateResponse).Path
			if p0 != e.p("m-0000000000") || p1 != e.p("m-0000000001") {
				t.Fatalf("multi created %q and %q", p0, p1)
			}
		}},
		{"failed_multi_does_not_advance_the_counter", func(t *testing.T, e *env) {
			_, err := e.zk.Multi(
				&zk.CreateRequest{Path: e.p("s-"), Acl: zk.WorldACL(zk.PermAll), Flags: zk.FlagSequence},
				&zk.CheckVersionRequest{Path: e.base, Version: 99},
			)
			if err == nil {
				t.Fatalf("multi with a bad check succeeded")
			}
			if got := seq(t, e, e.p("s-")); got != e.p("s-0000000000") {
				t.Fatalf("after a failed multi: %q; want s-0000000000", got)
			}
		}},
		{"sequential_name_sorts_by_last_ten_characters", func(t *testing.T, e *env) {
			var names []string
			for range 12 {
				p := seq(t, e, e.p("n-"))
				names = append(names, p[len(p)-10:])
			}
			for i := 1; i < len(names); i++ {
				if names[i] <= names[i-1] {
					t.Fatalf("suffix %q does not sort after %q", names[i], names[i-1])
				}
			}
		}},
		{"sequential_create_with_data_stores_it", func(t *testing.T, e *env) {
			p, err := e.zk.Create(e.p("d-"), []byte("payload"), zk.FlagSequence, zk.WorldACL(zk.PermAll))
			must(t, "create", err)
			data, _, err := e.zk.Get(p)
			if err != nil || string(data) != "payload" {
				t.Fatalf("get %s = %q, %v", p, data, err)
			}
		}},
	})
}
