package raft

import (
	"testing"
	"time"
)

// Deliver hands an RPC to the transport's consumer, which answers it; once the transport is
// closed, or the caller's stop channel is, Deliver gives up instead of waiting for a consumer.
func TestZkdDeliver(t *testing.T) {
	trans, err := NewTCPTransportWithLogger("127.0.0.1:0", nil, 2, time.Second, newTestLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	req := &AppendEntriesRequest{Term: 3, PrevLogEntry: 7, PrevLogTerm: 3, LeaderCommitIndex: 7}
	respCh := make(chan RPCResponse, 1)
	go func() {
		rpc := <-trans.Consumer()
		got, ok := rpc.Command.(*AppendEntriesRequest)
		if !ok || got != req {
			rpc.Respond(nil, ErrUnsupportedProtocol)
			return
		}
		rpc.Respond(&AppendEntriesResponse{Term: 3, Success: true}, nil)
	}()
	if !trans.Deliver(RPC{Command: req, RespChan: respCh}, nil) {
		t.Fatal("an open transport did not take the RPC")
	}
	out := <-respCh
	if resp, _ := out.Response.(*AppendEntriesResponse); out.Error != nil || resp == nil || !resp.Success {
		t.Fatalf("the consumer answered %+v", out)
	}

	stop := make(chan struct{})
	close(stop)
	if trans.Deliver(RPC{Command: req, RespChan: respCh}, stop) {
		t.Fatal("Deliver with no consumer and stop closed reported the RPC taken")
	}
	if err := trans.Close(); err != nil {
		t.Fatal(err)
	}
	if trans.Deliver(RPC{Command: req, RespChan: respCh}, nil) {
		t.Fatal("a closed transport took the RPC")
	}
}
