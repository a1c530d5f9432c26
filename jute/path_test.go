package jute

import "testing"

func TestRequestPath(t *testing.T) {
	for _, c := range []struct {
		r    Record
		want string
	}{
		{&CreateRequest{Path: "/a"}, "/a"},
		{&SetDataRequest{Path: "/s"}, "/s"},
		{&GetEphemeralsRequest{PrefixPath: "/p"}, "/p"},
		{&MultiRequest{Ops: []MultiOp{{Type: OpDelete, Req: &DeleteRequest{Path: "/m"}}}}, "/m"},
		{&MultiRequest{}, ""},
		{&AuthPacket{}, ""},
		{nil, ""},
	} {
		if got := RequestPath(c.r); got != c.want {
			t.Errorf("RequestPath(%T) = %q, want %q", c.r, got, c.want)
		}
	}
}
