package server

import (
	"fmt"
	"sync"
	"testing"
)

func TestSequenceOf(t *testing.T) {
	for name, want := range map[string]int32{
		"_c_0f-lock-0000000000": 0,
		"lock-0000000042":       42,
		"x2147483647":           1<<31 - 1,
		"lock--000000005":       -5,       // after the counter's wrap
		"lock--2147483648":      -1 << 31, // the one eleven-character value
	} {
		if got, ok := sequenceOf(name); !ok || got != want {
			t.Errorf("sequenceOf(%q) = %d, %v; want %d", name, got, ok, want)
		}
	}
	for _, name := range []string{"lock", "broker-1001", "lock-000000004x", "2147483648", "x+000000001", "lock--000000000"} {
		if got, ok := sequenceOf(name); ok {
			t.Errorf("sequenceOf(%q) = %d; want not sequential", name, got)
		}
	}
}

// The herd walk releases the watch lock every herdStep paths; watches added and removed
// meanwhile (as the apply path does) must not upset it, and a herd that stays put is reported
// once with its counts. Run with -race.
func TestHerdsWhileWatchesChange(t *testing.T) {
	w := newWatchManager(0)
	for i := range 5 {
		c := fakeConn(int64(100+i), 1<<20)
		w.add(c, "/hot", watchData)
		if i < 3 {
			w.add(c, "/hot", watchChild)
		}
	}
	churn := fakeConn(1, 1<<20)
	for i := range 5 * herdStep {
		w.add(churn, fmt.Sprintf("/cold/%d", i), watchData)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			p := fmt.Sprintf("/cold/%d", i%(5*herdStep))
			w.mu.Lock()
			if n := w.lookupLocked(p); n != nil {
				w.clearLocked(churn, n, watchData)
			}
			w.addLocked(churn, p+"x", watchData)
			w.mu.Unlock()
		}
	})
	for range 20 {
		got := w.herds(3)
		if len(got) != 1 || got[0] != (Herd{Path: "/hot", DataWatchers: 5, ChildWatchers: 3}) {
			t.Errorf("herds(3) = %+v; want /hot alone with 5 data and 3 child watchers", got)
			break
		}
	}
	close(stop)
	wg.Wait()
	if got := w.herds(6); len(got) != 0 {
		t.Errorf("herds(6) = %+v; want none", got)
	}
}
