package zktest

import (
	"bytes"
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"
)

// Znode is everything a client sees of one znode: its data, its ACL and its Stat.
type Znode struct {
	Data []byte
	ACL  []zk.ACL
	Stat zk.Stat
}

// DumpTree reads every znode through c (whose session must be allowed to read them all: the
// tests use a super user), keyed by path.
func DumpTree(t testing.TB, c *zk.Conn) map[string]Znode {
	t.Helper()
	out := map[string]Znode{}
	var walk func(p string)
	walk = func(p string) {
		data, st, err := c.Get(p)
		if err != nil {
			t.Fatalf("get %s: %v", p, err)
		}
		acl, _, err := c.GetACL(p)
		if err != nil {
			t.Fatalf("getACL %s: %v", p, err)
		}
		out[p] = Znode{Data: data, ACL: acl, Stat: *st}
		kids, _, err := c.Children(p)
		if err != nil {
			t.Fatalf("children %s: %v", p, err)
		}
		slices.Sort(kids)
		for _, k := range kids {
			walk(path.Join(p, k))
		}
	}
	walk("/")
	return out
}

// DiffTrees reports, as one test error, every path whose data, ACL or Stat differs between got
// and want, or that only one of them holds. what names the comparison.
func DiffTrees(t testing.TB, what string, got, want map[string]Znode) {
	t.Helper()
	var bad []string
	for p, w := range want {
		g, ok := got[p]
		switch {
		case !ok:
			bad = append(bad, "missing "+p)
		case !bytes.Equal(g.Data, w.Data):
			bad = append(bad, fmt.Sprintf("%s data %q, want %q", p, g.Data, w.Data))
		case !slices.Equal(g.ACL, w.ACL):
			bad = append(bad, fmt.Sprintf("%s ACL %v, want %v", p, g.ACL, w.ACL))
		case g.Stat != w.Stat:
			bad = append(bad, fmt.Sprintf("%s stat %+v, want %+v", p, g.Stat, w.Stat))
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			bad = append(bad, "extra "+p)
		}
	}
	if len(bad) == 0 {
		return
	}
	slices.Sort(bad)
	n := len(bad)
	if n > 20 {
		bad = append(bad[:20], fmt.Sprintf("... %d more", n-20))
	}
	t.Errorf("%s: %d differences:\n%s", what, n, strings.Join(bad, "\n"))
}
