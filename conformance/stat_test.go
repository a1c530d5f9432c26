package conformance

import (
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/zkd-io/zkd/jute"
)

func TestStat(t *testing.T) {
	runChecks(t, "stat", []check{
		{"new_node_stat_fields", func(t *testing.T, e *env) {
			r := e.raw()
			h, resp := rawCreate(t, r, e.p("n"), []byte("four"), jute.ModePersistent)
			st := resp.Stat
			if st.Czxid != h.Zxid || st.Mzxid != h.Zxid || st.Pzxid != h.Zxid || st.Ctime != st.Mtime || st.Ctime <= 0 ||
				st.Version != 0 || st.Cversion != 0 || st.Aversion != 0 || st.EphemeralOwner != 0 || st.DataLength != 4 || st.NumChildren != 0 {
				t.Fatalf("stat %+v (reply zxid 0x%x); want czxid=mzxid=pzxid=zxid, ctime=mtime>0, versions 0, owner 0, dataLength 4, no children", st, h.Zxid)
			}
		}},
		{"create_reply_zxid_is_the_nodes_czxid", func(t *testing.T, e *env) {
			r := e.raw()
			h, _ := rawCreate(t, r, e.p("n"), nil, jute.ModePersistent)
			if st := e.stat(e.p("n")); st.Czxid != h.Zxid {
				t.Fatalf("czxid 0x%x; reply zxid 0x%x", st.Czxid, h.Zxid)
			}
		}},
		{"setData_bumps_version_and_mzxid_only", func(t *testing.T, e *env) {
			r := e.raw()
			_, c := rawCreate(t, r, e.p("n"), []byte("a"), jute.ModePersistent)
			var resp jute.SetDataResponse
			h, err := r.Do(jute.OpSetData, &jute.SetDataRequest{Path: e.p("n"), Data: []byte("abc"), Version: 0}, &resp)
			must(t, "setData", err)
			st, old := resp.Stat, c.Stat
			if st.Version != 1 || st.Mzxid != h.Zxid || st.Czxid != old.Czxid || st.Pzxid != old.Pzxid || st.Ctime != old.Ctime ||
				st.Mtime < old.Mtime || st.Cversion != 0 || st.Aversion != 0 || st.DataLength != 3 {
				t.Fatalf("after setData %+v (was %+v, reply zxid 0x%x)", st, old, h.Zxid)
			}
		}},
		{"setData_reply_zxid_is_the_new_mzxid", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			r := e.raw()
			var resp jute.SetDataResponse
			h, err := r.Do(jute.OpSetData, &jute.SetDataRequest{Path: e.p("n"), Data: []byte("x"), Version: -1}, &resp)
			must(t, "setData", err)
			if resp.Stat.Mzxid != h.Zxid {
				t.Fatalf("mzxid 0x%x reply zxid 0x%x", resp.Stat.Mzxid, h.Zxid)
			}
		}},
		{"setACL_bumps_aversion_even_with_the_same_acl", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			before := e.stat(e.p("n"))
			for i := int32(0); i < 2; i++ {
				st, err := e.zk.SetACL(e.p("n"), zk.WorldACL(zk.PermAll), i)
				must(t, "setACL", err)
				if st.Aversion != i+1 || st.Version != 0 || st.Mzxid != before.Mzxid || st.Cversion != 0 {
					t.Fatalf("after setACL #%d: %+v; want aversion %d and nothing else changed", i, st, i+1)
				}
			}
		}},
		{"child_create_bumps_parent_cversion_numChildren_and_pzxid", func(t *testing.T, e *env) {
			r := e.raw()
			rawCreate(t, r, e.p("p"), nil, jute.ModePersistent)
			before := e.stat(e.p("p"))
			h, _ := rawCreate(t, r, e.p("p", "c"), nil, jute.ModePersistent)
			st := e.stat(e.p("p"))
			if st.Cversion != before.Cversion+1 || st.NumChildren != 1 || st.Pzxid != h.Zxid ||
				st.Mzxid != before.Mzxid || st.Version != before.Version || st.Mtime != before.Mtime {
				t.Fatalf("parent after child create %+v (before %+v, child zxid 0x%x)", st, before, h.Zxid)
			}
		}},
		{"child_delete_bumps_parent_cversion_and_pzxid", func(t *testing.T, e *env) {
			r := e.raw()
			rawCreate(t, r, e.p("p"), nil, jute.ModePersistent)
			rawCreate(t, r, e.p("p", "c"), nil, jute.ModePersistent)
			before := e.stat(e.p("p"))
			h, err := r.Do(jute.OpDelete, &jute.DeleteRequest{Path: e.p("p", "c"), Version: -1}, nil)
			must(t, "delete", err)
			st := e.stat(e.p("p"))
			if st.Cversion != before.Cversion+1 || st.NumChildren != 0 || st.Pzxid != h.Zxid || st.Mzxid != before.Mzxid {
				t.Fatalf("parent after child delete %+v (before %+v, delete zxid 0x%x)", st, before, h.Zxid)
			}
		}},
		{"cversion_counts_creates_and_deletes", func(t *testing.T, e *env) {
			e.mk(e.p("p"), nil)
			for _, n := range []string{"a", "b", "c"} {
				e.mk(e.p("p", n), nil)
			}
			must(t, "delete", e.zk.Delete(e.p("p", "b"), -1))
			if st := e.stat(e.p("p")); st.Cversion != 4 || st.NumChildren != 2 {
				t.Fatalf("cversion %d numChildren %d after 3 creates and 1 delete; want 4 and 2", st.Cversion, st.NumChildren)
			}
		}},
		{"child_setData_leaves_parent_stat_alone", func(t *testing.T, e *env) {
			e.mk(e.p("p"), nil)
			e.mk(e.p("p", "c"), nil)
			before := e.stat(e.p("p"))
			_, err := e.zk.Set(e.p("p", "c"), []byte("x"), -1)
			must(t, "set child", err)
			if st := e.stat(e.p("p")); *st != *before {
				t.Fatalf("parent stat changed from %+v to %+v", before, st)
			}
		}},
		{"grandchild_create_leaves_grandparent_alone", func(t *testing.T, e *env) {
			e.mk(e.p("p"), nil)
			e.mk(e.p("p", "c"), nil)
			before := e.stat(e.p("p"))
			e.mk(e.p("p", "c", "g"), nil)
			if st := e.stat(e.p("p")); *st != *before {
				t.Fatalf("grandparent stat changed from %+v to %+v", before, st)
			}
		}},
		{"ephemeral_owner_is_the_session_id", func(t *testing.T, e *env) {
			_, err := e.zk.Create(e.p("e"), nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
			must(t, "create ephemeral", err)
			if st := e.stat(e.p("e")); st.EphemeralOwner != e.zk.SessionID() {
				t.Fatalf("ephemeralOwner 0x%x; session 0x%x", st.EphemeralOwner, e.zk.SessionID())
			}
		}},
		{"null_data_has_dataLength_zero", func(t *testing.T, e *env) {
			r := e.raw()
			_, resp := rawCreate(t, r, e.p("n"), nil, jute.ModePersistent)
			if resp.Stat.DataLength != 0 {
				t.Fatalf("dataLength %d for null data", resp.Stat.DataLength)
			}
		}},
		{"failed_setData_changes_no_stat", func(t *testing.T, e *env) {
			e.mk(e.p("n"), []byte("a"))
			before := e.stat(e.p("n"))
			if _, err := e.zk.Set(e.p("n"), []byte("b"), 9); err == nil {
				t.Fatalf("set with a bad version succeeded")
			}
			if st := e.stat(e.p("n")); *st != *before {
				t.Fatalf("stat changed from %+v to %+v", before, st)
			}
		}},
		{"failed_write_uses_a_zxid", func(t *testing.T, e *env) {
			r := e.raw()
			h1, _ := rawCreate(t, r, e.p("n"), nil, jute.ModePersistent)
			rep, err := r.Call(jute.OpCreate, &jute.CreateRequest{Path: e.p("n"), ACL: openACL()})
			must(t, "duplicate create", err)
			if rep.Header.Err != jute.CodeNodeExists || rep.Header.Zxid <= h1.Zxid {
				t.Fatalf("duplicate create reply %+v; want NodeExists with a zxid after 0x%x", rep.Header, h1.Zxid)
			}
		}},
		{"read_reply_zxid_is_at_least_the_sessions_last_write", func(t *testing.T, e *env) {
			r := e.raw()
			h, _ := rawCreate(t, r, e.p("n"), nil, jute.ModePersistent)
			rep, err := r.Call(jute.OpGetData, &jute.GetDataRequest{Path: e.p("n")})
			must(t, "getData", err)
			if rep.Header.Zxid < h.Zxid {
				t.Fatalf("read reply zxid 0x%x before the write's 0x%x", rep.Header.Zxid, h.Zxid)
			}
		}},
		{"zxids_increase_with_each_write", func(t *testing.T, e *env) {
			r := e.raw()
			var last int64
			for i := range 5 {
				h, _ := rawCreate(t, r, e.p("n"+itoa(i)), nil, jute.ModePersistent)
				if h.Zxid <= last {
					t.Fatalf("write %d zxid 0x%x not after 0x%x", i, h.Zxid, last)
				}
				last = h.Zxid
			}
		}},
		{"mtime_changes_on_setData_and_ctime_does_not", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			before := e.stat(e.p("n"))
			st, err := e.zk.Set(e.p("n"), []byte("x"), -1)
			must(t, "set", err)
			if st.Ctime != before.Ctime || st.Mtime < before.Mtime {
				t.Fatalf("ctime %d→%d mtime %d→%d", before.Ctime, st.Ctime, before.Mtime, st.Mtime)
			}
		}},
		{"stat_from_exists_getData_and_getChildren2_agree", func(t *testing.T, e *env) {
			e.mk(e.p("n"), []byte("abc"))
			e.mk(e.p("n", "c"), nil)
			_, st1, err := e.zk.Exists(e.p("n"))
			must(t, "exists", err)
			_, st2, err := e.zk.Get(e.p("n"))
			must(t, "get", err)
			_, st3, err := e.zk.Children(e.p("n"))
			must(t, "children", err)
			if *st1 != *st2 || *st2 != *st3 {
				t.Fatalf("stats differ: exists %+v get %+v children %+v", st1, st2, st3)
			}
		}},
		{"ctime_is_wall_clock_milliseconds", func(t *testing.T, e *env) {
			e.mk(e.p("n"), nil)
			st := e.stat(e.p("n"))
			// 2020-01-01 and 2100-01-01 in ms: a value outside is not a wall-clock time in ms.
			if st.Ctime < 1577836800000 || st.Ctime > 4102444800000 {
				t.Fatalf("ctime %d is not a wall-clock time in milliseconds", st.Ctime)
			}
		}},
	})
}
