package server

import (
	"encoding/binary"
	"log/slog"
	"sync"
	"time"

	"github.com/zkd-io/zkd/jute"
)

// The slow-request log (Config.SlowRequestThreshold): a request whose reply leaves for the socket
// more than the threshold after the request arrived is logged at WARN, with where its time went.
// The stages are measured on the request's way through the connection's pipeline
// (docs/architecture.md, "Slow requests"), each boundary read from the clock once, and only
// while the log is on; with it off, a request costs nothing more than before.
//
// A storm of slow requests (a stalled disk, a lost quorum) must not flood the log, so at most
// slowLogBurst lines are written per slowLogWindow; the rest are counted, and one summary line
// per window says how many were left out and which was the slowest.

const (
	slowLogWindow = 10 * time.Second
	slowLogBurst  = 10
)

// slowLog decides which slow requests are logged. Its clock is an argument, so its rate limit is
// tested with made-up times.
type slowLog struct {
	threshold time.Duration // <= 0: off
	log       *slog.Logger
	mu        struct {
		sync.Mutex
		start      time.Time // of the current window
		logged     int       // lines written in it
		suppressed int64     // slow requests left out of it
		worst      time.Duration
		worstOp    jute.Op
	}
}

func newSlowLog(threshold time.Duration, log *slog.Logger) *slowLog {
	return &slowLog{threshold: threshold, log: log}
}

// on reports whether requests are timed at all.
func (l *slowLog) on() bool { return l.threshold > 0 }

// admit reports whether a request that took total may be logged now; if not, it is counted in
// the window's summary.
func (l *slowLog) admit(now time.Time, op jute.Op, total time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rollLocked(now)
	if l.mu.logged < slowLogBurst {
		l.mu.logged++
		return true
	}
	l.mu.suppressed++
	if total > l.mu.worst {
		l.mu.worst, l.mu.worstOp = total, op
	}
	return false
}

// flush writes the summary of a window that has ended (the server's housekeeping calls it, so the
// summary appears even when no further slow request comes).
func (l *slowLog) flush(now time.Time) {
	if !l.on() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rollLocked(now)
}

// rollLocked starts a new window once the current one has ended, summarising what it left out.
func (l *slowLog) rollLocked(now time.Time) {
	if now.Sub(l.mu.start) < slowLogWindow {
		return
	}
	if l.mu.suppressed > 0 {
		l.log.Warn("slow requests not logged", "count", l.mu.suppressed, "window", slowLogWindow,
			"slowest", l.mu.worst, "slowestOp", l.mu.worstOp)
	}
	l.mu.start, l.mu.logged, l.mu.suppressed, l.mu.worst = now, 0, 0, 0
}

// replyWritten is called by a connection's writer with the requests whose replies it has just
// written to the socket, at now; it logs those that were slow.
func (c *conn) replyWritten(rs []*request, now time.Time) {
	l := c.s.slow
	for _, r := range rs {
		total := now.Sub(r.arrived)
		if total < l.threshold || !l.admit(now, r.hdr.Type, total) {
			continue
		}
		// c.log names the connection's remote address and session.
		attrs := []any{"op", r.hdr.Type, "path", r.path(), "xid", r.hdr.Xid, "total", total}
		sent := total - r.answered
		if r.pending != nil {
			// A write is handed to consensus on arrival and may progress while the executor
			// answers the requests before it: "queued" overlaps "commit".
			attrs = append(attrs, "propose", r.proposed, "queued", r.started-r.proposed,
				"commit", r.answered-r.started, "send", sent)
		} else {
			attrs = append(attrs, "queued", r.started, "execute", r.answered-r.started, "send", sent)
		}
		c.log.Warn("slow request", attrs...)
	}
}

// path returns the path a request names, for the log: from the decoded body of a read, or the
// one copied from a write's undecoded body on arrival.
func (r *request) path() string {
	if r.writePath != "" {
		return r.writePath
	}
	return jute.RequestPath(r.body)
}

// writePathOf returns the path at the start of a write's body (create, delete, setData and
// setACL begin with it; a multi's first operation follows a 9-byte header), or "".
func writePathOf(op jute.Op, body []byte) string {
	if op == jute.OpMulti {
		if len(body) < 9 {
			return ""
		}
		body = body[9:]
	} else if op == jute.OpCloseSession {
		return ""
	}
	if len(body) < 4 {
		return ""
	}
	n := int(int32(binary.BigEndian.Uint32(body)))
	if n < 0 || n > len(body)-4 {
		return ""
	}
	return string(body[4 : 4+n])
}
