package server_test

import (
	"bytes"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/server"
	"github.com/zkd-io/zkd/server/zkdtest"
)

// logBuffer collects a server's log lines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// matching returns the lines that contain sub.
func (l *logBuffer) matching(sub string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for line := range strings.Lines(l.b.String()) {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return out
}

// lines returns the lines whose message is msg.
func (l *logBuffer) lines(msg string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for line := range strings.Lines(l.b.String()) {
		if strings.Contains(line, ` msg="`+msg+`" `) {
			out = append(out, line)
		}
	}
	return out
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// durationAttr returns the duration a log line gives key.
func durationAttr(t *testing.T, line, key string) time.Duration {
	t.Helper()
	m := regexp.MustCompile(` ` + key + `=(\S+)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no %s in %q", key, line)
	}
	d, err := time.ParseDuration(m[1])
	if err != nil {
		t.Fatalf("%s in %q: %v", key, line, err)
	}
	return d
}

// A client that stops reading its replies makes its requests slow in the last stage, sending the
// reply. In a synctest bubble the stall is exactly 3s: every request is logged with its whole
// time in send, at most slowLogBurst of them, and the window's summary counts the rest.
func TestSlowRequestLogSend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out logBuffer
		ln := startFake(t, func(c *server.Config) {
			c.SlowRequestThreshold = time.Second
			c.Logger = out.logger()
		})
		cl := ln.dial(t)
		if err := cl.NewSession(30000); err != nil {
			t.Fatal(err)
		}
		mustCreate(t, cl, "/slow", openACL, 0)
		const n = 15
		for range n {
			if err := cl.Send(cl.NextXid(), jute.OpGetData, &jute.GetDataRequest{Path: "/slow"}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(3 * time.Second) // fake clock (synctest): the client reads nothing, the server's writer waits
		for range n {
			if rep, err := cl.ReadReply(); err != nil || rep.Header.Err != jute.CodeOK {
				t.Fatalf("reply: %+v, %v", rep.Header, err)
			}
		}
		synctest.Wait() // the writer logs once its write returned
		lines := out.lines("slow request")
		if len(lines) != 10 {
			t.Fatalf("%d slow request lines; want the burst of 10:\n%s", len(lines), strings.Join(lines, ""))
		}
		for _, line := range lines {
			if !strings.Contains(line, " op=getData path=/slow ") || !strings.Contains(line, " session=0x") ||
				!strings.Contains(line, " total=3s queued=0s execute=0s send=3s") {
				t.Errorf("line %q; want getData /slow, its session, 3s all in send", line)
			}
		}
		if s := out.lines("slow requests not logged"); len(s) != 0 {
			t.Fatalf("summary before the window ended: %q", s)
		}
		time.Sleep(11 * time.Second) // fake clock (synctest): housekeeping closes the window
		s := out.lines("slow requests not logged")
		if len(s) != 1 || !strings.Contains(s[0], " count=5 window=10s slowest=3s slowestOp=getData") {
			t.Errorf("summary %q; want the 5 left out, the slowest 3s", s)
		}
	})
}

// With a threshold of 1ns every request is slow: through a real server with Raft, a write is
// logged with its stages propose, queued, commit and send, a read with queued, execute and send,
// and the stages add up to the total.
func TestSlowRequestLogStages(t *testing.T) {
	var out logBuffer
	s := zkdtest.Start(t, zkdtest.WithConfig(func(c *server.Config) {
		c.SlowRequestThreshold = time.Nanosecond
		c.Logger = out.logger()
	}))
	c, _ := connect(t, s.Addr())
	if _, err := c.Create("/timed", []byte("x"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Get("/timed"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Exists("/timed"); err != nil { // its reply leaves after the others were logged
		t.Fatal(err)
	}
	find := func(op string) string {
		for _, l := range out.lines("slow request") {
			if strings.Contains(l, " op="+op+" path=/timed ") {
				return l
			}
		}
		t.Fatalf("no slow request line for %s /timed", op)
		return ""
	}
	for op, stages := range map[string][]string{
		"create":  {"propose", "queued", "commit", "send"},
		"getData": {"queued", "execute", "send"},
	} {
		line := find(op)
		var sum time.Duration
		for _, st := range stages {
			d := durationAttr(t, line, st)
			if d < 0 {
				t.Errorf("%s: negative %s in %q", op, st, line)
			}
			sum += d
		}
		if total := durationAttr(t, line, "total"); sum != total || total <= 0 {
			t.Errorf("%s: stages add up to %v, total %v: %q", op, sum, total, line)
		}
		if !strings.Contains(line, "level=WARN") || !strings.Contains(line, " session=0x") || !strings.Contains(line, " xid=") {
			t.Errorf("%s: %q lacks the level, session or xid", op, line)
		}
	}
}

// A negative threshold turns the log off.
func TestSlowRequestLogOff(t *testing.T) {
	var out logBuffer
	s := zkdtest.Start(t, zkdtest.WithoutRaft(), zkdtest.WithConfig(func(c *server.Config) {
		c.SlowRequestThreshold = -1
		c.Logger = out.logger()
	}))
	c, _ := connect(t, s.Addr())
	if _, err := c.Create("/untimed", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Exists("/untimed"); err != nil {
		t.Fatal(err)
	}
	if l := out.lines("slow request"); len(l) != 0 {
		t.Errorf("slow request lines with the log off: %q", l)
	}
}
