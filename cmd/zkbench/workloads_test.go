package main

import (
	"testing"

	"github.com/zkd-io/zkd/jute"
)

// A lock contender finds its predecessor, the greatest name below its own, in any reply order.
func TestLockViewFindsThePredecessor(t *testing.T) {
	names := []string{"lock-0000000007", "lock-0000000002", "lock-0000000009", "lock-0000000005"}
	frame := jute.AppendReply(nil, jute.ReplyHeader{Xid: 1}, &jute.GetChildrenResponse{Children: names})[4:]
	for _, tc := range []struct {
		mine, pred string
		found      bool
	}{
		{"lock-0000000007", "lock-0000000005", true},
		{"lock-0000000002", "", true},
		{"lock-0000000009", "lock-0000000007", true},
		{"lock-0000000006", "lock-0000000005", false},
	} {
		v := &lockView{mine: tc.mine}
		r := decodeInto(frame, v)
		if r.err != nil || r.body != v {
			t.Fatalf("decode: %+v", r)
		}
		if v.found != tc.found || v.pred != tc.pred {
			t.Errorf("%s: found %v, predecessor %q; want %v, %q", tc.mine, v.found, v.pred, tc.found, tc.pred)
		}
	}
}
