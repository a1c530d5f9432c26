package server_test

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/zkd-io/zkd/conformance"
	"github.com/zkd-io/zkd/internal/testkit"
	"github.com/zkd-io/zkd/server"
	"github.com/zkd-io/zkd/server/zkdtest"
)

// startLogged starts a server whose Debug log goes to the returned buffer.
func startLogged(t *testing.T, opts ...zkdtest.Option) (*server.Server, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	opts = append(opts, zkdtest.WithConfig(func(c *server.Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}))
	return zkdtest.Start(t, opts...), logs
}

// waitClosed waits until mntr counts want connections closed for reason (and returns mntr).
func waitClosed(t *testing.T, addr, reason string, want float64) {
	t.Helper()
	key := "zk_connections_closed_" + reason
	testkit.EventuallyNil(t, 10*time.Second, fmt.Sprintf("%s >= %v", key, want), func() error {
		m := mntr(t, addr)
		got, ok := m[key]
		if !ok {
			t.Fatalf("mntr has no %s", key)
		}
		if got < want {
			return fmt.Errorf("%s = %v", key, got)
		}
		return nil
	})
}

// Every connection the server closes, or sees closed, is counted and logged with why.
func TestConnectionCloseReasons(t *testing.T) {
	s, logs := startLogged(t, zkdtest.WithoutRaft())
	addr := s.Addr()

	// The client closes its session: session_closed.
	c, _ := connect(t, addr)
	c.Close()
	waitClosed(t, addr, "session_closed", 1)

	// The client goes away without a word: client_closed.
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	r := conformance.NewRaw(nc, 5*time.Second)
	if err := r.NewSession(30000); err != nil {
		t.Fatal(err)
	}
	r.Close()
	waitClosed(t, addr, "client_closed", 1)

	// A frame longer than the server takes: protocol_error, at Warn.
	r, err = conformance.DialRaw(addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.NewSession(30000); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteBytes([]byte{0x7f, 0xff, 0xff, 0xff}); err != nil {
		t.Fatal(err)
	}
	if err := r.ExpectClosed(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	r.Close()
	waitClosed(t, addr, "protocol_error", 1)

	// A client that sends nothing, not even pings, for its whole session timeout: client_idle.
	r, err = conformance.DialRaw(addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.NewSession(400); err != nil { // tickTime 200ms: the smallest timeout
		t.Fatal(err)
	}
	if err := r.ExpectClosed(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	r.Close()
	waitClosed(t, addr, "client_idle", 1)

	// The mntr calls above are four-letter words.
	waitClosed(t, addr, "four_letter_word", 4)

	closes := logs.lines("connection closed")
	for reason, level := range map[string]string{
		"session_closed": "DEBUG", "client_closed": "DEBUG", "four_letter_word": "DEBUG",
		"protocol_error": "WARN", "client_idle": "INFO",
	} {
		found := false
		for _, line := range closes {
			found = found || strings.Contains(line, "level="+level+" ") && strings.Contains(line, " reason="+reason+" ")
		}
		if !found {
			t.Errorf("no close logged at %s with reason %s in:\n%s", level, reason, strings.Join(closes, ""))
		}
	}
	for _, line := range closes {
		if !strings.Contains(line, " remote=127.0.0.1:") || !strings.Contains(line, " after=") {
			t.Errorf("a close logged without the client's address or the connection's age: %s", line)
		}
	}
	logs.mu.Lock()
	all := logs.b.String()
	logs.mu.Unlock()
	if strings.Contains(all, "use of closed network connection") {
		t.Errorf("a close was blamed on the closed socket it caused:\n%s", all)
	}

	// /metrics has the same counts, as one labelled counter.
	mfs, err := s.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	m := mntr(t, addr)
	for _, mf := range mfs {
		if mf.GetName() != "zkd_connections_closed_total" {
			continue
		}
		if n := len(mf.GetMetric()); n < 20 {
			t.Errorf("zkd_connections_closed_total has %d reasons; want every one", n)
		}
		for _, metric := range mf.GetMetric() {
			reason := metric.GetLabel()[0].GetValue()
			got, want := metric.GetCounter().GetValue(), m["zk_connections_closed_"+reason]
			if reason != "four_letter_word" && got != want {
				t.Errorf("/metrics says %v connections closed for %s, mntr %v", got, reason, want)
			}
		}
		return
	}
	t.Error("/metrics has no zkd_connections_closed_total")
}

// failingListener fails its first n accepts as a process out of file descriptors does.
type failingListener struct {
	net.Listener
	n atomic.Int32
}

func (l *failingListener) Accept() (net.Conn, error) {
	if l.n.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// A listener that runs out of file descriptors for a moment keeps serving once it has them
// again, as ZooKeeper's does: the pause is logged and counted, and the next client gets in.
func TestAcceptSurvivesRunningOutOfFiles(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fl := &failingListener{Listener: ln}
	fl.n.Store(3)
	s, logs := startLogged(t, zkdtest.WithoutRaft(), zkdtest.WithConfig(func(c *server.Config) { c.Listener = fl }))
	c, _ := connect(t, s.Addr())
	defer c.Close()
	if _, _, err := c.Exists("/"); err != nil {
		t.Fatalf("exists after the listener ran out of files: %v", err)
	}
	if got := mntr(t, s.Addr())["zk_accept_retry_count"]; got != 3 {
		t.Errorf("zk_accept_retry_count = %v, want 3", got)
	}
	if lines := logs.matching("accept failed; retrying"); len(lines) != 1 || !strings.Contains(lines[0], "level=WARN") {
		t.Errorf("log lines for the failed accepts: %q, want one WARN", lines)
	}
}
