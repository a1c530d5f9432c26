package peernet

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestFailLogOncePerPeer(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	f := FailLog{every: time.Hour}
	for range 50 {
		f.Note(log, "a", "refused")
	}
	f.Note(log, "b", "refused")
	f.OK(log, "a", "again")
	f.OK(log, "a", "again") // nothing to say twice
	if got, want := strings.Count(buf.String(), "\n"), 3; got != want {
		t.Fatalf("%d log lines; want %d (one per peer, one recovery):\n%s", got, want, buf.String())
	}
	f.every = time.Nanosecond
	f.Note(log, "c", "refused")
	f.Note(log, "c", "refused")
	if !strings.Contains(buf.String(), "failures=2") {
		t.Fatalf("a failure that goes on is not summarised:\n%s", buf.String())
	}
	for i := range 2 * MaxFailKeys {
		f.Note(log, fmt.Sprint("scan", i), "refused")
	}
	if len(f.m) > MaxFailKeys {
		t.Fatalf("FailLog tracks %d peers; want at most %d", len(f.m), MaxFailKeys)
	}
}
