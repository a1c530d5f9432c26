package jute_test

import (
	"bytes"
	"fmt"

	"github.com/zkd-io/zkd/jute"
)

// A server reads a request frame, decodes it by op, and writes the reply frame.
func Example() {
	var wire bytes.Buffer // stands in for a connection

	// Client side: one getData request.
	wire.Write(jute.AppendRequest(nil, jute.RequestHeader{Xid: 1, Type: jute.OpGetData},
		&jute.GetDataRequest{Path: "/app/config", Watch: true}))

	// Server side: read the frame, decode it, answer it.
	fr := jute.NewFrameReader(&wire, jute.DefaultMaxBuffer)
	frame, err := fr.Next()
	if err != nil {
		fmt.Println(err)
		return
	}
	h, body, err := jute.DecodeRequest(frame, jute.DefaultMaxBuffer)
	if err != nil {
		fmt.Println(err)
		return
	}
	req := body.(*jute.GetDataRequest)
	fmt.Printf("xid %d %v %s watch=%v\n", h.Xid, h.Type, req.Path, req.Watch)
	reply := jute.AppendReply(nil, jute.ReplyHeader{Xid: h.Xid, Zxid: 42},
		&jute.GetDataResponse{Data: []byte("v1"), Stat: jute.Stat{Czxid: 40, Mzxid: 42, DataLength: 2}})

	// Client side again: decode the reply for the op it sent.
	rh, rbody, err := jute.DecodeReply(reply[jute.FrameHeaderLen:], jute.OpGetData, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("xid %d zxid %d data %q\n", rh.Xid, rh.Zxid, rbody.(*jute.GetDataResponse).Data)
	// Output:
	// xid 1 getData /app/config watch=true
	// xid 1 zxid 42 data "v1"
}
