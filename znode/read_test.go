package znode

import (
	"slices"
	"testing"

	"github.com/zkd-io/zkd/jute"
)

func TestValidatePath(t *testing.T) {
	tests := []struct {
		path string
		ok   bool
	}{
		{"/", true},
		{"/a", true},
		{"/a/b/c", true},
		{"/a..b", true},
		{"/.hidden", true},
		{"/...", true},
		{"/ünï-çødé", true},
		{"/a b", true},
		{"/\u00a0", true},
		{"/\uf900", true},
		{"/\ufeff", true},
		{"", false},
		{"a", false},
		{"a/b", false},
		{"/a/", false},
		{"//", false},
		{"/a//b", false},
		{"/.", false},
		{"/..", false},
		{"/a/./b", false},
		{"/a/../b", false},
		{"/a/..", false},
		{"/a\x00b", false},
		{"/a\x01", false},
		{"/a\x1f", false},
		{"/a\x7f", false},
		{"/a\u0085", false},
		{"/a\u009f", false},
		{"/a\ud7ff", true},
		{"/a\ue000", false}, // private use area
		{"/a\uf8ff", false},
		{"/a\ufff0", false},
		{"/a\uffff", false},
		{"/\U0001F600", false}, // outside the BMP: a surrogate pair in Java
		{"/a\xff", false},      // not UTF-8: U+FFFD
	}
	for _, tt := range tests {
		err := ValidatePath(tt.path)
		if tt.ok {
			wantCode(t, "ValidatePath("+tt.path+")", err, jute.CodeOK)
		} else {
			wantCode(t, "ValidatePath("+tt.path+")", err, jute.CodeBadArguments)
		}
	}
}

func TestReads(t *testing.T) {
	h := newHarness(t)
	h.mustCreate("/a", 0)
	h.mustCreate("/a/z", 0)
	h.mustCreate("/a/b", 0)
	h.mustCreate("/a/b/c", 0)
	h.mustCreate("/a/b/c/d", 0)
	v := h.tree.View()
	for _, tt := range []struct {
		path string
		want int32
	}{{"/", 8}, {"/a", 4}, {"/a/b", 2}, {"/a/b/c/d", 0}, {"/zookeeper", 2}} {
		resp, err := v.Read(0, nil, jute.OpGetAllChildrenNumber, &jute.GetAllChildrenNumberRequest{Path: tt.path})
		if err != nil || resp.(*jute.GetAllChildrenNumberResponse).TotalNumber != tt.want {
			t.Errorf("getAllChildrenNumber(%q) = %v, %v; want %d", tt.path, resp, err, tt.want)
		}
	}
	resp, err := v.Read(0, nil, jute.OpGetChildren2, &jute.GetChildren2Request{Path: "/a"})
	if err != nil {
		t.Fatal(err)
	}
	gc := resp.(*jute.GetChildren2Response)
	if !slices.Equal(gc.Children, []string{"b", "z"}) || gc.Stat != h.stat("/a") {
		t.Fatalf("getChildren2(/a) = %+v", gc)
	}
	resp, _ = v.Read(0, nil, jute.OpGetChildren, &jute.GetChildrenRequest{Path: "/a/b/c/d"})
	if c := resp.(*jute.GetChildrenResponse).Children; c == nil || len(c) != 0 {
		t.Fatalf("getChildren of a leaf = %#v; want empty, not null", c)
	}
	resp, _ = v.Read(0, nil, jute.OpExists, &jute.ExistsRequest{Path: "/a/b"})
	if resp.(*jute.ExistsResponse).Stat != h.stat("/a/b") {
		t.Fatalf("exists stat mismatch")
	}
	// Reads do not validate: malformed paths are simply not found.
	for _, p := range []string{"", "a", "/a/", "//a", "/a//b", "/nope"} {
		_, err := v.Read(0, nil, jute.OpExists, &jute.ExistsRequest{Path: p})
		wantCode(t, "exists("+p+")", err, jute.CodeNoNode)
	}
	_, err = v.Read(0, nil, jute.OpSync, &jute.SyncRequest{Path: "/"})
	wantCode(t, "read of sync", err, jute.CodeUnimplemented)
	_, err = v.Read(0, nil, jute.OpGetData, &jute.ExistsRequest{Path: "/"})
	wantCode(t, "mismatched record", err, jute.CodeMarshallingError)
}

func TestViewIsolation(t *testing.T) {
	h := newHarness(t)
	h.mustCreate("/a", 0)
	old := h.tree.View()
	oldStat := h.stat("/a")
	h.mustCreate("/a/b", 0)
	h.apply(jute.OpSetData, &jute.SetDataRequest{Path: "/a", Data: []byte("new"), Version: -1})
	h.mustCreate("/c", 0)
	h.apply(jute.OpDelete, &jute.DeleteRequest{Path: "/c", Version: -1})
	if st, _ := old.Stat("/a"); st != oldStat {
		t.Fatalf("old view's stat changed: %+v vs %+v", st, oldStat)
	}
	if _, ok := old.Stat("/a/b"); ok {
		t.Fatalf("old view sees a later create")
	}
	resp, _ := old.Read(0, nil, jute.OpGetData, &jute.GetDataRequest{Path: "/a"})
	if string(resp.(*jute.GetDataResponse).Data) != "d" {
		t.Fatalf("old view sees later data")
	}
	if old.Zxid() != 1 || old.NodeCount() != 6 || h.tree.View().NodeCount() != 7 {
		t.Fatalf("zxid %d, counts %d/%d", old.Zxid(), old.NodeCount(), h.tree.View().NodeCount())
	}
}

func TestCounters(t *testing.T) {
	h := newHarness(t)
	h.openSession(1)
	h.sess = 1
	base := h.tree.View().DataSize()
	h.apply(jute.OpCreate, &jute.CreateRequest{Path: "/abc", Data: []byte("12345"), ACL: worldAll})
	h.apply(jute.OpCreate, &jute.CreateRequest{Path: "/abc/e", Data: []byte("1"), ACL: worldAll, Flags: jute.ModeEphemeral})
	if got, want := h.tree.View().DataSize(), base+4+5+6+1; got != want {
		t.Fatalf("DataSize = %d; want %d", got, want)
	}
	h.apply(jute.OpSetData, &jute.SetDataRequest{Path: "/abc", Data: []byte("1"), Version: -1})
	if got, want := h.tree.View().DataSize(), base+4+1+6+1; got != want {
		t.Fatalf("DataSize after setData = %d; want %d", got, want)
	}
	h.apply(jute.OpCloseSession, nil)
	h.sess = 0
	h.apply(jute.OpDelete, &jute.DeleteRequest{Path: "/abc", Version: -1})
	v := h.tree.View()
	if v.DataSize() != base || v.NodeCount() != 5 || v.EphemeralCount() != 0 {
		t.Fatalf("after deleting everything: size %d, count %d, ephemerals %d", v.DataSize(), v.NodeCount(), v.EphemeralCount())
	}
}
