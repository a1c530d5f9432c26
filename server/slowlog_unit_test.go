package server

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkd-io/zkd/jute"
)

// syncBuffer collects log output from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The slow-request log's rate limit, on made-up times: a burst is logged, the rest of the window
// is counted, and the window's summary says how many were left out and the slowest of them.
func TestSlowLogRateLimit(t *testing.T) {
	var out syncBuffer
	l := newSlowLog(time.Millisecond, slog.New(slog.NewTextHandler(&out, nil)))
	t0 := time.Unix(1000, 0)
	logged := 0
	for i := range slowLogBurst + 5 {
		if l.admit(t0.Add(time.Duration(i)*time.Millisecond), jute.OpGetData, time.Duration(i+1)*time.Second) {
			logged++
		}
	}
	if logged != slowLogBurst {
		t.Errorf("%d of %d admitted in one window; want %d", logged, slowLogBurst+5, slowLogBurst)
	}
	l.flush(t0.Add(slowLogWindow - time.Millisecond))
	if out.String() != "" {
		t.Errorf("summary before the window ended: %q", out.String())
	}
	l.flush(t0.Add(slowLogWindow))
	want := fmt.Sprintf("level=WARN msg=\"slow requests not logged\" count=5 window=10s slowest=%s slowestOp=getData\n", time.Duration(slowLogBurst+5)*time.Second)
	if got := out.String(); !strings.HasSuffix(got, want) {
		t.Errorf("summary = %q; want it to end with %q", got, want)
	}
	// A new window logs again, and a window with nothing left out has no summary.
	if !l.admit(t0.Add(slowLogWindow+time.Second), jute.OpCreate, time.Second) {
		t.Error("first slow request of a new window not admitted")
	}
	before := out.String()
	l.flush(t0.Add(3 * slowLogWindow))
	if out.String() != before {
		t.Errorf("summary of a window that left nothing out: %q", strings.TrimPrefix(out.String(), before))
	}
}

func TestWritePathOf(t *testing.T) {
	create := jute.Marshal(nil, &jute.CreateRequest{Path: "/a/b", Data: []byte("x")})
	if got := writePathOf(jute.OpCreate, create); got != "/a/b" {
		t.Errorf("create: %q", got)
	}
	if got := writePathOf(jute.OpDelete, []byte{0, 0, 0, 9, '/'}); got != "" {
		t.Errorf("truncated body: %q; want empty", got)
	}
	if got := writePathOf(jute.OpCloseSession, nil); got != "" {
		t.Errorf("closeSession: %q", got)
	}
}
