package recipes

import (
	"regexp"
	"testing"
)

func TestNewPrefixGolden(t *testing.T) {
	uuid := `[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}`
	cases := []struct {
		p    Protocol
		r    role
		want string
	}{
		{Native, roleExclusive, `^_c_` + uuid + `-lock-$`},
		{Native, roleWrite, `^_c_` + uuid + `-__WRIT__$`},
		{Native, roleRead, `^_c_` + uuid + `-__READ__$`},
		{Curator, roleExclusive, `^_c_` + uuid + `-lock-$`},
		{Curator, roleWrite, `^_c_` + uuid + `-__WRIT__$`},
		{Curator, roleRead, `^_c_` + uuid + `-__READ__$`},
		{Kazoo, roleExclusive, `^[0-9a-f]{32}__lock__$`},
		{Kazoo, roleWrite, `^[0-9a-f]{32}__lock__$`},
		{Kazoo, roleRead, `^[0-9a-f]{32}__rlock__$`},
		{CuratorLatch, roleExclusive, `^_c_` + uuid + `-latch-$`},
	}
	for _, c := range cases {
		got := c.p.newPrefix(c.r)
		if !regexp.MustCompile(c.want).MatchString(got) {
			t.Errorf("%v.newPrefix(%d) = %q; want match %s", c.p, c.r, got, c.want)
		}
		if again := c.p.newPrefix(c.r); again == got {
			t.Errorf("%v.newPrefix(%d) repeated %q; want a fresh id per attempt", c.p, c.r, got)
		}
	}
}

func TestCuratorKeyGolden(t *testing.T) {
	cases := []struct {
		name string
		r    role
		want string
		lock string // the exclusive marker: lock- unless set
	}{
		{"_c_53345f98-9423-4e0c-a7b5-9f819e3ec2e1-lock-0000000012", roleExclusive, "0000000012", ""},
		{"_c_53345f98-9423-4e0c-a7b5-9f819e3ec2e1-latch-0000000012", roleExclusive, "0000000012", markLatch},
		{"_c_53345f98-9423-4e0c-a7b5-9f819e3ec2e1-lock-0000000012", roleExclusive, "_c_53345f98-9423-4e0c-a7b5-9f819e3ec2e1-lock-0000000012", markLatch},
		{"_c_38553bd6d1d57f710ae70ddcc3d24715-lock-0000000003", roleExclusive, "0000000003", ""},
		{"da5719988c244fc793f49ec3aa29b566__lock__0000000001", roleExclusive, "da5719988c244fc793f49ec3aa29b566__lock__0000000001", ""},
		{"_c_53345f98-9423-4e0c-a7b5-9f819e3ec2e1-__READ__0000000007", roleRead, "0000000007", ""},
		{"_c_53345f98-9423-4e0c-a7b5-9f819e3ec2e1-__WRIT__0000000008", roleWrite, "0000000008", ""},
		{"config", roleWrite, "config", ""},
	}
	for _, c := range cases {
		lock := c.lock
		if lock == "" {
			lock = markLock
		}
		if got := curatorKey(c.name, c.r, lock); got != c.want {
			t.Errorf("curatorKey(%q) = %q; want %q", c.name, got, c.want)
		}
	}
}

func TestParseNative(t *testing.T) {
	cases := []struct {
		name string
		ok   bool
		r    role
		seq  int32
	}{
		{"_c_53345f98-9423-4e0c-a7b5-9f819e3ec2e1-lock-0000000012", true, roleExclusive, 12},
		{"_c_53345f98-9423-4e0c-a7b5-9f819e3ec2e1-lock--2147483648", true, roleExclusive, -2147483648},
		{"_c_53345f98-9423-4e0c-a7b5-9f819e3ec2e1-lock--000000005", true, roleExclusive, -5},
		{"_c_53345f98-9423-4e0c-a7b5-9f819e3ec2e1-__READ__2147483647", true, roleRead, 2147483647},
		{"_c_53345f98-9423-4e0c-a7b5-9f819e3ec2e1-__WRIT__0000000001", true, roleWrite, 1},
		{"da5719988c244fc793f49ec3aa29b566__lock__0000000001", false, 0, 0},
		{"config", false, 0, 0},
		{"_c_x-lock-abc", false, 0, 0},
		{"_c_x-lock-99999999999", false, 0, 0},
	}
	for _, c := range cases {
		r, seq, ok := parseNative(c.name)
		if ok != c.ok || (ok && (r != c.r || seq != c.seq)) {
			t.Errorf("parseNative(%q) = %d, %d, %v; want %d, %d, %v", c.name, r, seq, ok, c.r, c.seq, c.ok)
		}
	}
}

func TestSeqBeforeAcrossWrap(t *testing.T) {
	cases := []struct {
		a, b int32
		want bool
	}{
		{1, 2, true},
		{2, 1, false},
		{2147483646, 2147483647, true},
		{2147483647, -2147483648, true}, // the wrap
		{-2147483648, 2147483647, false},
		{-6, -5, true},
		{-1, 0, true},
		{5, 5, false},
	}
	for _, c := range cases {
		if got := seqBefore(c.a, c.b); got != c.want {
			t.Errorf("seqBefore(%d, %d) = %v; want %v", c.a, c.b, got, c.want)
		}
	}
}

func TestDecideGolden(t *testing.T) {
	const (
		w1 = "_c_00000000-0000-4000-8000-000000000001-__WRIT__0000000001"
		r2 = "_c_00000000-0000-4000-8000-000000000002-__READ__0000000002"
		r3 = "_c_00000000-0000-4000-8000-000000000003-__READ__0000000003"
		w4 = "_c_00000000-0000-4000-8000-000000000004-__WRIT__0000000004"
		r5 = "_c_00000000-0000-4000-8000-000000000005-__READ__0000000005"

		m1 = "_c_00000000-0000-4000-8000-00000000000a-lock-2147483646"
		m2 = "_c_00000000-0000-4000-8000-00000000000b-lock-2147483647"
		m3 = "_c_00000000-0000-4000-8000-00000000000c-lock--2147483648"
		m4 = "_c_00000000-0000-4000-8000-00000000000d-lock--2147483647"
		m5 = "_c_00000000-0000-4000-8000-00000000000e-lock--000000005"
		m6 = "_c_00000000-0000-4000-8000-00000000000f-lock--000000004"

		k1 = "00000000000000000000000000000001__lock__0000000001"
		k2 = "00000000000000000000000000000002__rlock__0000000002"
		k3 = "00000000000000000000000000000003__lock__0000000003"
		k4 = "00000000000000000000000000000004__rlock__0000000004"
		kx = "_c_00000000-0000-4000-8000-000000000009-lock-0000000000" // a go-zk/Curator node
	)
	rw := []string{r5, w4, r3, w1, r2} // getChildren is unordered
	wrap := []string{m4, m2, m1, m3, "config", "x-lock-abc", m6, m5}
	kz := []string{k4, k3, k2, k1, kx}
	cases := []struct {
		name     string
		p        Protocol
		children []string
		own      string
		r        role
		held     bool
		watch    string
	}{
		{"native writer first", Native, rw, w1, roleWrite, true, ""},
		{"native reader behind writer", Native, rw, r2, roleRead, false, w1},
		{"native reader watches nearest lower writer", Native, rw, r3, roleRead, false, w1},
		{"native writer watches predecessor reader", Native, rw, w4, roleWrite, false, r3},
		{"native reader behind second writer", Native, rw, r5, roleRead, false, w4},
		{"native readers share once writer left", Native, []string{r2, r3, w4, r5}, r3, roleRead, true, ""},
		{"native later writer ignored by reader", Native, []string{r2, w4, r5}, r2, roleRead, true, ""},
		{"native wrap: first before the wrap holds", Native, wrap, m1, roleExclusive, true, ""},
		{"native wrap: -2147483648 follows 2147483647", Native, wrap, m3, roleExclusive, false, m2},
		{"native wrap: -2147483647 follows -2147483648", Native, wrap, m4, roleExclusive, false, m3},
		{"native small negatives", Native, wrap, m6, roleExclusive, false, m5},
		{"native own node missing", Native, rw, "gone", roleWrite, false, ""},

		{"curator writer first", Curator, rw, w1, roleWrite, true, ""},
		{"curator reader watches first writer", Curator, rw, r5, roleRead, false, w1},
		{"curator writer predecessor", Curator, rw, w4, roleWrite, false, r3},
		{"curator counts foreign children", Curator, []string{"config", m1}, m1, roleExclusive, true, ""}, // "2147483646" < "config"
		{"curator string order after wrap (Curator's own rule)", Curator, []string{m2, m3}, m2, roleExclusive, false, m3},
		{"curator: kazoo node sorts after digits", Curator, []string{k1, kx}, kx, roleExclusive, true, ""},

		{"kazoo lock ignores rlock", Kazoo, kz, k3, roleExclusive, false, k1},
		{"kazoo write lock honours rlock", Kazoo, kz, k3, roleWrite, false, k2},
		{"kazoo read lock waits for lower lock", Kazoo, kz, k4, roleRead, false, k3},
		{"kazoo read lock ignores readers", Kazoo, kz, k2, roleRead, false, k1},
		{"kazoo first lock holds; dash-lock nodes are not contenders", Kazoo, kz, k1, roleExclusive, true, ""},
		{"kazoo string order after wrap", Kazoo, []string{
			"00000000000000000000000000000001__lock__2147483647",
			"00000000000000000000000000000002__lock__-2147483648"},
			"00000000000000000000000000000001__lock__2147483647", roleExclusive, false,
			"00000000000000000000000000000002__lock__-2147483648"},
		{"kazoo own nine-digit negative decides without hanging", Kazoo, []string{
			"00000000000000000000000000000001__lock__-000000006",
			"00000000000000000000000000000002__lock__-000000005"},
			"00000000000000000000000000000002__lock__-000000005", roleExclusive, true, ""},
		{"kazoo nine-digit negative is no contender", Kazoo, []string{
			"00000000000000000000000000000001__lock__-000000005",
			"00000000000000000000000000000002__lock__0000000001"},
			"00000000000000000000000000000002__lock__0000000001", roleExclusive, true, ""},
	}
	for _, c := range cases {
		d := c.p.decide(c.children, c.own, c.r)
		if d.held != c.held || d.watch != c.watch {
			t.Errorf("%s: decide = held %v watch %q; want held %v watch %q", c.name, d.held, d.watch, c.held, c.watch)
		}
	}
}
