package raft

// Test of zkd's change to this fork (see ZKD.md): a VerifyLeader future still queued when raft
// shuts down resolves with ErrRaftShutdown instead of blocking its waiter forever, and a future
// answered before the shutdown keeps its answer.

import (
	"errors"
	"testing"
	"time"
)

func TestZkdVerifyQueuedAtShutdownResolves(t *testing.T) {
	// A raft whose main loop never takes the request: it stays in verifyCh's buffer, as one
	// does when Shutdown comes first.
	r := &Raft{shutdownCh: make(chan struct{}), verifyCh: make(chan *verifyFuture, 1)}
	f := r.VerifyLeader()
	close(r.shutdownCh)
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrRaftShutdown) {
			t.Fatalf("Error() = %v; want ErrRaftShutdown", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a verify future queued at shutdown never resolved")
	}
}

func TestZkdAnswerBeforeShutdownKept(t *testing.T) {
	for i := 0; i < 100; i++ { // both select cases are ready: the answer must win every time (upstream's go.mod is go1.20)
		var d deferError
		d.init()
		d.ShutdownCh = make(chan struct{})
		d.respond(nil)
		close(d.ShutdownCh)
		if err := d.Error(); err != nil {
			t.Fatalf("Error() = %v; want the answer given before the shutdown (nil)", err)
		}
	}
}
