package znode

import (
	"fmt"
	"slices"
	"testing"

	"github.com/zkd-io/zkd/jute"
)

// TestChildrenListsAsGetChildren checks View.Children against getChildren: the same names in the
// same order, the same Stat as getChildren2, the same errors, and that From resumes at a name,
// present or not, and that the list is the view's even after the tree changed.
func TestChildrenListsAsGetChildren(t *testing.T) {
	h := newHarness(t)
	h.mustCreate("/d", jute.ModePersistent)
	for i := range 200 {
		h.mustCreate(fmt.Sprintf("/d/n%03d", (i*37)%200), jute.ModePersistent)
	}
	v := h.tree.View()
	kids, stat, err := v.Children("/d", nil)
	wantCode(t, "Children(/d)", err, jute.CodeOK)
	resp, err := v.Read(0, nil, jute.OpGetChildren2, &jute.GetChildren2Request{Path: "/d"})
	wantCode(t, "getChildren2(/d)", err, jute.CodeOK)
	want := resp.(*jute.GetChildren2Response)
	if got := slices.Collect(kids.From("")); !slices.Equal(got, want.Children) || kids.Len() != len(want.Children) {
		t.Fatalf("Children = %d names (Len %d); want getChildren2's %d", len(got), kids.Len(), len(want.Children))
	}
	if stat != want.Stat {
		t.Fatalf("Children stat = %+v; want %+v", stat, want.Stat)
	}
	if got := slices.Collect(kids.From("n150")); !slices.Equal(got, want.Children[150:]) {
		t.Fatalf("From(n150) = %v...; want from n150", got[:1])
	}
	if got := slices.Collect(kids.From("n149x")); !slices.Equal(got, want.Children[150:]) {
		t.Fatalf("From(n149x) starts at %v; want n150", got[:1])
	}
	if got := kids.NameBytes(); got != 200*4 {
		t.Fatalf("NameBytes = %d; want %d", got, 200*4)
	}
	h.apply(jute.OpDelete, &jute.DeleteRequest{Path: "/d/n000", Version: -1})
	if got := slices.Collect(kids.From("")); len(got) != 200 || got[0] != "n000" || kids.NameBytes() != 200*4 {
		t.Fatal("a held child list changed with the tree")
	}
	h.mustCreate("/d/longer-name", jute.ModePersistent)
	now, _, _ := h.tree.View().Children("/d", nil)
	if got, want := now.NameBytes(), 199*4+len("longer-name"); got != want {
		t.Fatalf("NameBytes after a delete and a create = %d; want %d", got, want)
	}

	_, _, err = v.Children("/missing", nil)
	wantCode(t, "Children(/missing)", err, jute.CodeNoNode)
	h.apply(jute.OpCreate, &jute.CreateRequest{Path: "/secret", ACL: []jute.ACL{{Perms: jute.PermWrite, ID: jute.Id{Scheme: "world", ID: "anyone"}}}})
	_, _, err = h.tree.View().Children("/secret", nil)
	wantCode(t, "Children(/secret)", err, jute.CodeNoAuth)
	if (Children{}).Len() != 0 || len(slices.Collect(Children{}.From(""))) != 0 {
		t.Fatal("the zero Children is not empty")
	}
}
