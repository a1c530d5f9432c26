package conformance

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkd-io/zkd/jute"
)

// Helpers that build differential steps; each takes paths relative to the run's base.

func sCreate(name, rel string, data []byte, flags jute.CreateMode) Step {
	return Step{name, jute.OpCreate2, func(b string) jute.Record {
		return &jute.CreateRequest{Path: b + rel, Data: data, ACL: openACL(), Flags: flags}
	}}
}

func sCreate1(name, rel string, flags jute.CreateMode) Step {
	return Step{name, jute.OpCreate, func(b string) jute.Record {
		return &jute.CreateRequest{Path: b + rel, ACL: openACL(), Flags: flags}
	}}
}

func sGet(name, rel string, watch bool) Step {
	return Step{name, jute.OpGetData, func(b string) jute.Record { return &jute.GetDataRequest{Path: b + rel, Watch: watch} }}
}

func sExists(name, rel string, watch bool) Step {
	return Step{name, jute.OpExists, func(b string) jute.Record { return &jute.ExistsRequest{Path: b + rel, Watch: watch} }}
}

func sSet(name, rel string, data []byte, version int32) Step {
	return Step{name, jute.OpSetData, func(b string) jute.Record {
		return &jute.SetDataRequest{Path: b + rel, Data: data, Version: version}
	}}
}

func sDelete(name, rel string, version int32) Step {
	return Step{name, jute.OpDelete, func(b string) jute.Record { return &jute.DeleteRequest{Path: b + rel, Version: version} }}
}

func sChildren(name, rel string, watch bool) Step {
	return Step{name, jute.OpGetChildren2, func(b string) jute.Record { return &jute.GetChildren2Request{Path: b + rel, Watch: watch} }}
}

func sMulti(name string, op jute.Op, ops func(b string) []jute.MultiOp) Step {
	return Step{name, op, func(b string) jute.Record { return &jute.MultiRequest{Ops: ops(b)} }}
}

// diffScripts are the operation sequences the differential mode sends to every target.
func diffScripts() []Script {
	return []Script{
		{"crud_and_stat", []Step{
			sCreate("create2 a", "/a", []byte("x"), 0),
			sExists("exists a", "/a", false),
			sSet("setData a", "/a", []byte("yy"), 0),
			sGet("getData a", "/a", false),
			sCreate1("create a/c", "/a/c", 0),
			sChildren("getChildren2 a", "/a", false),
			sDelete("delete a/c", "/a/c", -1),
			sExists("exists a after child delete", "/a", false),
			{"setACL a", jute.OpSetACL, func(b string) jute.Record { return &jute.SetACLRequest{Path: b + "/a", ACL: openACL(), Version: 0} }},
			{"getACL a", jute.OpGetACL, func(b string) jute.Record { return &jute.GetACLRequest{Path: b + "/a"} }},
			sDelete("delete a bad version", "/a", 7),
			sDelete("delete a", "/a", 1),
			sGet("getData a gone", "/a", false),
			sCreate("create2 a again", "/a", nil, 0),
			sGet("getData null data", "/a", false),
			{"sync", jute.OpSync, func(b string) jute.Record { return &jute.SyncRequest{Path: b + "/a"} }},
		}},
		{"errors", []Step{
			sCreate1("create missing parent", "/missing/x", 0),
			sCreate1("create p", "/p", 0),
			sCreate1("create p again", "/p", 0),
			sCreate1("create flags 7", "/f", 7),
			sCreate1("create p/c", "/p/c", 0),
			sDelete("delete non-empty p", "/p", -1),
			sCreate1("create ephemeral e", "/e", jute.ModeEphemeral),
			sCreate1("create under ephemeral", "/e/c", 0),
			sCreate1("create trailing slash", "/p/", 0),
			sSet("setData bad version", "/p", nil, 3),
			sSet("setData missing", "/nope", nil, -1),
			{"create empty acl", jute.OpCreate, func(b string) jute.Record { return &jute.CreateRequest{Path: b + "/acl", ACL: []jute.ACL{}} }},
			{"checkWatches none", jute.OpCheckWatches, func(b string) jute.Record {
				return &jute.CheckWatchesRequest{Path: b + "/p", Type: jute.WatcherData}
			}},
			{"getAllChildrenNumber missing", jute.OpGetAllChildrenNumber, func(b string) jute.Record {
				return &jute.GetAllChildrenNumberRequest{Path: b + "/nope"}
			}},
		}},
		{"sequential", []Step{
			sCreate("seq 0", "/s-", nil, jute.ModePersistentSequential),
			sCreate("seq 1", "/s-", nil, jute.ModePersistentSequential),
			sCreate("seq 2", "/s-", nil, jute.ModePersistentSequential),
			sDelete("delete seq 1", "/s-0000000001", -1),
			sCreate("seq 3", "/s-", nil, jute.ModePersistentSequential),
			sCreate1("plain child", "/plain", 0),
			sCreate("seq 5", "/s-", nil, jute.ModeEphemeralSequential),
			sChildren("children", "", false),
			{"getEphemerals", jute.OpGetEphemerals, func(b string) jute.Record { return &jute.GetEphemeralsRequest{PrefixPath: b} }},
			{"getAllChildrenNumber", jute.OpGetAllChildrenNumber, func(b string) jute.Record {
				return &jute.GetAllChildrenNumberRequest{Path: b}
			}},
		}},
		{"multi", []Step{
			sCreate1("create s", "/s", 0),
			sMulti("multi ok", jute.OpMulti, func(b string) []jute.MultiOp {
				return []jute.MultiOp{mCreate(b+"/m", 0), mSet(b+"/s", []byte("v"), 0), mCheck(b+"/s", 1), mCreate(b+"/m/c", 0), mDelete(b + "/m/c")}
			}),
			sMulti("multi fails", jute.OpMulti, func(b string) []jute.MultiOp {
				return []jute.MultiOp{mCreate(b+"/n", 0), mCheck(b+"/s", 9), mSet(b+"/s", nil, -1)}
			}),
			sExists("exists n", "/n", false),
			sMulti("empty multi", jute.OpMulti, func(string) []jute.MultiOp { return nil }),
			sMulti("multiRead", jute.OpMultiRead, func(b string) []jute.MultiOp {
				return []jute.MultiOp{
					{Type: jute.OpGetChildren, Req: &jute.GetChildrenRequest{Path: b + "/m"}},
					{Type: jute.OpGetData, Req: &jute.GetDataRequest{Path: b + "/s"}},
					{Type: jute.OpGetData, Req: &jute.GetDataRequest{Path: b + "/nope"}},
				}
			}),
			sMulti("multi with a read", jute.OpMulti, func(b string) []jute.MultiOp {
				return []jute.MultiOp{mCreate(b+"/r", 0), {Type: jute.OpGetData, Req: &jute.GetDataRequest{Path: b + "/s"}}}
			}),
		}},
		{"watches", []Step{
			sCreate1("create w", "/w", 0),
			sGet("getData watch w", "/w", true),
			sChildren("child watch w", "/w", true),
			sSet("setData w fires", "/w", []byte("1"), -1),
			sExists("exists watch x", "/x", true),
			sCreate1("create x fires", "/x", 0),
			sCreate1("create w/c fires", "/w/c", 0),
			{"addWatch recursive r", jute.OpAddWatch, func(b string) jute.Record {
				return &jute.AddWatchRequest{Path: b + "/r", Mode: jute.AddWatchPersistentRecursive}
			}},
			sCreate1("create r", "/r", 0),
			sCreate1("create r/c", "/r/c", 0),
			sSet("setData r/c", "/r/c", []byte("x"), -1),
			sDelete("delete r/c", "/r/c", -1),
			{"removeWatches r", jute.OpRemoveWatches, func(b string) jute.Record {
				return &jute.RemoveWatchesRequest{Path: b + "/r", Type: jute.WatcherAny}
			}},
			sCreate1("create r/d silent", "/r/d", 0),
			sGet("getData watch x", "/x", true),
			sDelete("delete x fires", "/x", -1),
		}},
		{"setwatches_catch_up", []Step{
			sCreate1("create w", "/w", 0),
			{"setWatches from zxid 0", jute.OpSetWatches, func(b string) jute.Record {
				return &jute.SetWatches{
					DataWatches:  []string{b + "/w", b + "/gone"},
					ExistWatches: []string{b + "/w", b + "/later"},
					ChildWatches: []string{b + "/w"},
				}
			}},
			sCreate1("create later fires", "/later", 0),
		}},
		{"containers_and_ttl_switch", []Step{
			{"createContainer c", jute.OpCreateContainer, func(b string) jute.Record {
				return &jute.CreateRequest{Path: b + "/c", ACL: openACL(), Flags: jute.ModeContainer}
			}},
			sCreate1("create c/kid", "/c/kid", 0),
			sExists("exists c", "/c", false),
			sCreate1("create flag 4 through op 1", "/plain", jute.ModeContainer),
			{"createContainer bad flags", jute.OpCreateContainer, func(b string) jute.Record {
				return &jute.CreateRequest{Path: b + "/bad", ACL: openACL(), Flags: 9}
			}},
			sMulti("createContainer in multi", jute.OpMulti, func(b string) []jute.MultiOp {
				return []jute.MultiOp{{Type: jute.OpCreateContainer, Req: &jute.CreateRequest{Path: b + "/mc", ACL: openACL(), Flags: jute.ModeContainer}}}
			}),
		}},
		{"ephemerals_and_close", []Step{
			sCreate("ephemeral", "/e", []byte("d"), jute.ModeEphemeral),
			sCreate("ephemeral sequential", "/es-", nil, jute.ModeEphemeralSequential),
			{"getEphemerals prefix", jute.OpGetEphemerals, func(b string) jute.Record { return &jute.GetEphemeralsRequest{PrefixPath: b + "/e"} }},
			sGet("getData ephemeral", "/e", false),
			{"closeSession", jute.OpCloseSession, func(string) jute.Record { return nil }},
		}},
		{"persistent_watches", []Step{
			{"addWatch persistent p", jute.OpAddWatch, func(b string) jute.Record {
				return &jute.AddWatchRequest{Path: b + "/p", Mode: jute.AddWatchPersistent}
			}},
			sCreate1("create p fires", "/p", 0),
			sCreate1("create p/c fires", "/p/c", 0),
			sSet("setData p fires", "/p", []byte("1"), -1),
			sSet("setData p fires again", "/p", []byte("2"), -1),
			sSet("setData p/c silent", "/p/c", []byte("x"), -1),
			{"addWatch bad mode", jute.OpAddWatch, func(b string) jute.Record { return &jute.AddWatchRequest{Path: b + "/p", Mode: 9} }},
			{"checkWatches any", jute.OpCheckWatches, func(b string) jute.Record {
				return &jute.CheckWatchesRequest{Path: b + "/p", Type: jute.WatcherAny}
			}},
			{"removeWatches any", jute.OpRemoveWatches, func(b string) jute.Record {
				return &jute.RemoveWatchesRequest{Path: b + "/p", Type: jute.WatcherAny}
			}},
			sDelete("delete p/c silent", "/p/c", -1),
		}},
		{"acl_and_auth", []Step{
			{"auth digest", jute.OpAuth, func(string) jute.Record { return &jute.AuthPacket{Scheme: "digest", Auth: []byte("alice:secret")} }},
			{"create with auth acl", jute.OpCreate, func(b string) jute.Record {
				return &jute.CreateRequest{Path: b + "/a", ACL: []jute.ACL{{Perms: 31, ID: jute.Id{Scheme: "auth"}}}}
			}},
			{"getACL", jute.OpGetACL, func(b string) jute.Record { return &jute.GetACLRequest{Path: b + "/a"} }},
			{"whoAmI", jute.OpWhoAmI, func(string) jute.Record { return nil }},
			{"create world read", jute.OpCreate, func(b string) jute.Record {
				return &jute.CreateRequest{Path: b + "/r", ACL: []jute.ACL{{Perms: jute.PermRead, ID: jute.Id{Scheme: "world", ID: "anyone"}}}}
			}},
			sSet("setData without WRITE", "/r", []byte("x"), -1),
			{"create bad ip acl", jute.OpCreate, func(b string) jute.Record {
				return &jute.CreateRequest{Path: b + "/i", ACL: []jute.ACL{{Perms: 31, ID: jute.Id{Scheme: "ip", ID: "notanip"}}}}
			}},
		}},
	}
}

// knownDifferences lists differential mismatches that are accepted, keyed by a substring of the
// diff line, with the reason. Every difference from ZooKeeper that remains must be listed here.
var knownDifferences = map[string]string{}

func TestDifferential(t *testing.T) {
	if theSuite.skip != "" {
		t.Skip(theSuite.skip)
	}
	var ref *Target
	for _, tg := range theSuite.targets {
		if tg.Reference {
			ref = tg
			break
		}
	}
	if ref == nil {
		t.Skip("no reference ZooKeeper among the targets (CONFORMANCE_REFERENCE=1 marks CONFORMANCE_ADDR as one)")
	}
	others := slices.DeleteFunc(slices.Clone(theSuite.targets), func(tg *Target) bool { return tg == ref })
	selfCheck := len(others) == 0
	if selfCheck {
		// Nothing to compare with: run every script twice on the reference, which proves the
		// normalisation leaves no run-specific value behind.
		others = []*Target{ref}
	}
	for _, tg := range others {
		t.Run(tg.Name, func(t *testing.T) {
			for _, s := range diffScripts() {
				t.Run(s.Name, func(t *testing.T) {
					want := runDiffScript(t, ref, s)
					got := runDiffScript(t, tg, s)
					var unexpected []string
					for _, line := range Diff(ref.Name, want, tg.Name, got) {
						if reason, ok := knownDifference(line); ok {
							t.Logf("known difference (%s): %s", reason, line)
							continue
						}
						unexpected = append(unexpected, line)
					}
					if len(unexpected) > 0 {
						t.Errorf("%s differs from %s in %d fields:\n%s", tg.Name, ref.Name, len(unexpected), strings.Join(unexpected, "\n"))
					}
					if selfCheck {
						t.Logf("self-check on %s: %d steps agree", ref.Name, len(want))
					}
				})
			}
		})
	}
}

func knownDifference(line string) (string, bool) {
	for k, reason := range knownDifferences {
		if strings.Contains(line, k) {
			return reason, true
		}
	}
	return "", false
}

// runDiffScript runs s on tg's first server under a fresh base node.
func runDiffScript(t *testing.T, tg *Target, s Script) []Observation {
	t.Helper()
	c, events, err := zk.Connect(tg.Addrs[:1], 10*time.Second, zk.WithLogger(discardLogger{}), zk.WithLogInfo(false))
	must(t, "connect", err)
	defer c.Close()
	waitState(t, events, zk.StateHasSession)
	root := "/zkconf-" + theSuite.runID
	if _, err := c.Create(root, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		t.Fatalf("create %s: %v", root, err)
	}
	base, err := c.Create(root+"/diff-"+s.Name+"-", nil, zk.FlagSequence, zk.WorldACL(zk.PermAll))
	must(t, "create base", err)
	obs, err := RunScript(tg.Addrs[0], base, s)
	must(t, "run "+s.Name+" on "+tg.Name, err)
	return obs
}

func TestDiffReportsEachDifferingField(t *testing.T) {
	a := []Observation{{Step: "create", Fields: []Field{{"header.Err", "0"}, {"body.Path", `"{base}/a"`}, {"body.Stat.Version", "0"}}}}
	b := []Observation{{Step: "create", Fields: []Field{{"header.Err", "0"}, {"body.Path", `"{base}/a"`}, {"body.Stat.Version", "1"}, {"body.Extra", "x"}}},
		{Step: "delete", Fields: []Field{{"header.Err", "0"}}}}
	got := Diff("zk", a, "zkd", b)
	want := []string{
		"step 0 create: body.Stat.Version: zk=0 zkd=1",
		"step 0 create: body.Extra: zk=(absent) zkd=x",
		"step 1 delete: only zkd ran it",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Diff =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if d := Diff("zk", a, "zk", a); d != nil {
		t.Fatalf("Diff of a run with itself = %v", d)
	}
}

func TestNormalizerLabelsByFirstAppearance(t *testing.T) {
	n := &normalizer{base: "/b", session: 7, zxids: map[int64]int{}}
	var fs []Field
	n.flatten("body", reflectValue(&jute.Create2Response{Path: "/b/x", Stat: jute.Stat{Czxid: 900, Mzxid: 900, Pzxid: 950, Ctime: 5, Mtime: 5, EphemeralOwner: 7}}), &fs)
	m := fieldMap(fs)
	want := map[string]string{
		"body.Path": `"{base}/x"`, "body.Stat.Czxid": "z1", "body.Stat.Mzxid": "z1", "body.Stat.Pzxid": "z2",
		"body.Stat.Ctime": "t", "body.Stat.Mtime": "t", "body.Stat.EphemeralOwner": "session",
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %q; want %q", k, m[k], v)
		}
	}
}

func reflectValue(v any) reflect.Value { return reflect.ValueOf(v) }
