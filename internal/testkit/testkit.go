// Package testkit holds the small helpers zkd's tests share; the packages below it are the
// larger test machinery (real ZooKeeper servers, child processes, the chaos suite, test
// certificates, a fault-injecting network). Nothing under internal/testkit may be imported by
// production code (internal/lint), except cmd/zkbench's use of apachezk and child.
package testkit

import (
	"testing"
	"time"
)

// pollEvery is how often Eventually looks again: short against the deadlines tests use, long
// enough that a poll loop does not starve the code under test of the CPU.
const pollEvery = 10 * time.Millisecond

// Eventually waits until cond holds, looking again every few milliseconds, and fails the test
// (naming what it waited for) if it does not hold within d. It is for conditions that no event or
// channel announces; d is a generous bound, not a guess at how long things take.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(pollEvery) // polling: the condition has no event to wait on
	}
}

// EventuallyNil is Eventually for a step that may fail for a while: it waits until try returns
// nil, and on timeout fails the test with try's last error.
func EventuallyNil(t testing.TB, d time.Duration, what string, try func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := try()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %v", d, what, err)
		}
		time.Sleep(pollEvery) // polling: the step has no event to wait on
	}
}
