package testkit

import (
	"errors"
	"testing"
	"time"
)

func TestUntil(t *testing.T) {
	n := 0
	if !Until(time.Minute, func() bool { n++; return n == 3 }) || n != 3 {
		t.Fatalf("Until returned before the condition held, or looked again after (n = %d)", n)
	}
	n = 0
	if Until(0, func() bool { n++; return false }) {
		t.Fatal("Until reported a condition that never held")
	}
	if n == 0 {
		t.Fatal("Until did not look at the condition once")
	}
}

func TestEventuallyNil(t *testing.T) {
	n := 0
	EventuallyNil(t, time.Minute, "the third try", func() error {
		if n++; n < 3 {
			return errors.New("not yet")
		}
		return nil
	})
}
