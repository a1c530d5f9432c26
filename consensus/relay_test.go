package consensus

import "testing"

// TestRelayWaitsForTheEntry drives the relay's bookkeeping: a commit is relayed only once the
// local log holds its entry, a newer commit replaces an older one, and a commit already applied
// is dropped.
func TestRelayWaitsForTheEntry(t *testing.T) {
	r := newRelay()
	r.storedThrough(5)
	r.offer(7, 2)
	if idx, _, waited := r.next(4); idx != 0 || !waited {
		t.Fatalf("entry 7 not stored yet: next = %d, waited %v; want 0, true", idx, waited)
	}
	r.offer(6, 2) // older than the pending one: ignored
	r.storedThrough(7)
	select {
	case <-r.wake:
	default:
		t.Fatal("storing the pending entry did not wake the relay")
	}
	if idx, term, _ := r.next(4); idx != 7 || term != 2 {
		t.Fatalf("next = (%d, %d); want (7, 2)", idx, term)
	}
	if idx, _, waited := r.next(4); idx != 0 || waited {
		t.Fatalf("relayed twice: next = %d, waited %v", idx, waited)
	}
	r.offer(9, 3)
	r.storedThrough(12)
	if idx, _, _ := r.next(9); idx != 0 {
		t.Fatalf("entry 9 already applied, but next = %d", idx)
	}
	r.offer(10, 3)
	r.storedThrough(8) // the log was cut back (a new leader's entries replaced its tail)
	if idx, _, waited := r.next(9); idx != 0 || !waited {
		t.Fatalf("entry 10 no longer stored: next = %d, waited %v; want 0, true", idx, waited)
	}
}
