// Package testkit holds the small helpers zkd's tests share; the packages below it are the
// larger test machinery (real ZooKeeper servers, child processes, the chaos suite, test
// certificates, a fault-injecting network). Nothing under internal/testkit may be imported by
// production code (internal/lint), except cmd/zkbench's use of apachezk and child.
package testkit

import (
	"testing"
	"time"
)

// The polls look again after firstPoll, then twice as long each time up to maxPoll: a condition
// that holds soon is seen soon, and a long wait (on a JVM, a cluster) does not load the machine
// with probes.
const (
	firstPoll = time.Millisecond
	maxPoll   = 50 * time.Millisecond
)

// Until looks at cond until it holds or d has passed, and reports whether it held. cond is
// looked at at least once. It is for conditions that no event or channel announces, where the
// caller says what failed with what it knows (a process's output, the last error); d is a
// generous bound, not a guess at how long things take.
func Until(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for wait := firstPoll; !cond(); wait = min(2*wait, maxPoll) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(wait) // polling: the condition has no event to wait on
	}
	return true
}

// Eventually waits until cond holds and fails the test, naming what it waited for, if it does
// not hold within d.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Until(d, cond) {
		t.Fatalf("timed out after %v waiting for %s", d, what)
	}
}

// EventuallyNil is Eventually for a step that may fail for a while: it waits until try returns
// nil, and on timeout fails the test with try's last error.
func EventuallyNil(t testing.TB, d time.Duration, what string, try func() error) {
	t.Helper()
	var err error
	if !Until(d, func() bool { err = try(); return err == nil }) {
		t.Fatalf("timed out after %v waiting for %s: %v", d, what, err)
	}
}
