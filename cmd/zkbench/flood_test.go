package main

import (
	"bytes"
	"testing"
	"time"
)

// A small flood against the test's server (an in-process zkd, or ZooKeeper under
// ZKBENCH_TARGET=zookeeper): the probes are never failed or disconnected, no flooder is
// disconnected, every acknowledged create is there afterwards, and the client that never reads
// is not dropped (ZooKeeper queues its replies; zkd stops reading it). Latency is reported, not
// asserted: the machine's load decides it.
func TestFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("floods a server for seconds")
	}
	if targetErr != nil {
		t.Skip(targetErr)
	}
	cfg := floodConfig{
		Addr: target[0], Flooders: 50, Depth: 8, Storm: 4, Probes: 2,
		Baseline: time.Second, Duration: 3 * time.Second,
		NonReaderReqs: 64, NonReaderBytes: 256 << 10, SessionTimeout: 30 * time.Second,
		Root: "/zkbench-flood-test",
	}
	var progress bytes.Buffer
	res, err := flood(t.Context(), cfg, &progress)
	if err != nil {
		t.Fatalf("flood: %v\n%s", err, progress.String())
	}
	var out bytes.Buffer
	printFlood(&out, res)
	t.Log(out.String())
	if res.Lost != 0 {
		t.Errorf("%d acknowledged creates missing afterwards", res.Lost)
	}
	if res.ProbeErrors != 0 || res.ProbeDisconnects != 0 {
		t.Errorf("the well-behaved probes saw %d errors and %d disconnects", res.ProbeErrors, res.ProbeDisconnects)
	}
	if res.FloodDisconnects != 0 || len(res.FloodErrors) != 0 {
		t.Errorf("flooders: %d disconnected, errors %v", res.FloodDisconnects, res.FloodErrors)
	}
	if res.FloodAcked == 0 || res.StormSessions == 0 || res.FloodWrite.Count == 0 || res.FloodRead.Count == 0 {
		t.Errorf("the flood did not run: %d creates, %d storm sessions, %d/%d probe ops", res.FloodAcked, res.StormSessions, res.FloodWrite.Count, res.FloodRead.Count)
	}
	if res.NonReaderClosed {
		t.Error("the server closed the client that only stopped reading")
	}
}
