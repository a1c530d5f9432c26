package server

import (
	"testing"

	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/znode"
)

// The expected orders were observed on Apache ZooKeeper 3.8: whoAmI after a digest auth lists
// alice:secret before the ip id, and alice:pw after it.
func TestJavaHashSetOrder(t *testing.T) {
	ip := jute.Id{Scheme: "ip", ID: "127.0.0.1"}
	for _, tc := range []struct {
		user, pass string
		ipFirst    bool
	}{{"alice", "secret", false}, {"alice", "pw", true}} {
		dg := jute.Id{Scheme: "digest", ID: znode.DigestID(tc.user, tc.pass)}
		got := javaHashSetOrder([]jute.Id{ip, dg})
		if (got[0] == ip) != tc.ipFirst {
			t.Errorf("%s:%s: order %v; want ip first = %v", tc.user, tc.pass, got, tc.ipFirst)
		}
	}
	if h := javaStringHash("hello"); h != 99162322 {
		t.Errorf(`javaStringHash("hello") = %d; want 99162322 (Java's "hello".hashCode())`, h)
	}
}
