package server

import (
	"testing"
	"time"
)

func TestConnLimitLeavesDescriptorsForStorage(t *testing.T) {
	for _, tc := range []struct {
		maxConns int
		fds      uint64
		want     int
		byFDs    bool
	}{
		{0, 0, 0, false},        // nothing known, nothing set: unlimited, as in ZooKeeper
		{500, 0, 500, false},    // maxCnxns alone
		{0, 256, 128, true},     // a tiny limit keeps half
		{0, 1024, 768, true},    // 256 kept
		{0, 20000, 19000, true}, // a twentieth kept
		{0, 1 << 20, 1<<20 - 4096, true},
		{500, 20000, 500, false},    // maxCnxns below the descriptors' bound wins
		{30000, 20000, 19000, true}, // above it, the bound wins
	} {
		got, byFDs := connLimit(tc.maxConns, tc.fds)
		if got != tc.want || byFDs != tc.byFDs {
			t.Errorf("connLimit(%d, %d) = %d, %v; want %d, %v", tc.maxConns, tc.fds, got, byFDs, tc.want, tc.byFDs)
		}
	}
}

func TestStrandGraceKeepsLongSessionsThroughAnElection(t *testing.T) {
	const tick, silence = 2 * time.Second, 2 * time.Second
	for _, tc := range []struct {
		timeoutMs int32
		want      time.Duration
	}{
		{0, tick},                 // no session yet
		{4000, tick},              // the shortest session: a tick, as before
		{10000, 3 * time.Second},  // kazoo's default
		{30000, 13 * time.Second}, // zkbench hold's
		{40000, 18 * time.Second}, // the longest at the stock tickTime
	} {
		if got := strandGrace(tick, silence, tc.timeoutMs); got != tc.want {
			t.Errorf("strandGrace(%v, %v, %d) = %v; want %v", tick, silence, tc.timeoutMs, got, tc.want)
		}
	}
}
