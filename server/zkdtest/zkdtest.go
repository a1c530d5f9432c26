// Package zkdtest starts real zkd servers for tests: a standalone server or an N-server cluster
// in the test's process, on loopback ports, in memory, stopped automatically when the test ends.
//
//	func TestSomething(t *testing.T) {
//		addr := zkdtest.Start(t).Addr()
//		conn, _, err := zk.Connect([]string{addr}, time.Second)
//		...
//	}
package zkdtest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/zkd-io/zkd/internal/serverhook"
	"github.com/zkd-io/zkd/server"
)

// settings are what the options set: the server's configuration, and how it runs.
type settings struct {
	cfg         server.Config
	withoutRaft bool
}

// Option adjusts how the server is configured or run before it starts.
type Option func(*settings)

// WithConfig applies fn to the configuration.
func WithConfig(fn func(*server.Config)) Option { return func(s *settings) { fn(&s.cfg) } }

// WithDir makes the server durable in dir instead of in memory.
func WithDir(dir string) Option { return func(s *settings) { s.cfg.Dir = dir } }

// WithoutRaft runs a server of Start or StartServer on consensus.Memory, the in-memory twin of
// the consensus node: the same entries, apply path and session rules with no Raft, no peers and
// no disk, so it starts at once and its writes apply as they arrive. For tests of client-facing
// behaviour that need no replication or durability; it takes no WithDir. Config and
// StartCluster do not use it.
func WithoutRaft() Option { return func(s *settings) { s.withoutRaft = true } }

// WithLogs sends the server's logs to the test's output.
func WithLogs(t testing.TB) Option {
	return func(s *settings) { s.cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), nil)) }
}

// Config returns the configuration Start and StartCluster use, with opts applied, for code that
// starts servers itself (a TestMain has no testing.TB): every four-letter word, TTL nodes
// enabled, no per-IP connection limit, tickTime 200ms so sessions expire quickly (timeouts 400ms
// to 30s), and a Raft heartbeat timeout loose enough for -race on a busy machine.
func Config(opts ...Option) server.Config {
	return build(opts).cfg
}

func build(opts []Option) settings {
	cfg := server.Config{
		TickTime:             200 * time.Millisecond,
		MaxSessionTimeout:    30 * time.Second,
		FourLetterWords:      []string{"*"},
		ExtendedTypesEnabled: true,
		MaxClientConns:       -1, // tests open many connections from 127.0.0.1
	}
	cfg.Consensus.HeartbeatTimeout = 500 * time.Millisecond
	st := settings{cfg: cfg}
	for _, o := range opts {
		o(&st)
	}
	return st
}

// StartServer starts a server as Start does, WithoutRaft included, without a testing.TB (for a
// TestMain or a harness): the caller waits for it to serve and stops it.
func StartServer(opts ...Option) (*server.Server, error) {
	st := build(opts)
	if !st.withoutRaft {
		return server.Start(st.cfg)
	}
	s, err := serverhook.StartWithoutRaft(st.cfg)
	if err != nil {
		return nil, err
	}
	return s.(*server.Server), nil
}

// DropClients closes every client connection of s; their sessions live on, so the clients
// reconnect (to s or another server) and set their watches again. For tests of reconnection.
func DropClients(s *server.Server) { serverhook.DropClients(s) }

// Start starts a standalone in-memory server on 127.0.0.1:0, waits until it serves, and stops it
// when the test ends. The defaults suit tests: tickTime 200ms (so min/max session timeouts are
// 400ms and 30s), every four-letter word, TTL nodes enabled.
func Start(t testing.TB, opts ...Option) *server.Server {
	t.Helper()
	s, err := StartServer(opts...)
	if err != nil {
		t.Fatalf("zkdtest: start server: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("zkdtest: shutdown: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.WaitServing(ctx); err != nil {
		t.Fatalf("zkdtest: %v", err)
	}
	return s
}

// StartCluster starts an n-server in-memory cluster on loopback, waits until every member
// serves, and stops it when the test ends.
func StartCluster(t testing.TB, n int, opts ...Option) *server.Cluster {
	t.Helper()
	cl, err := server.StartCluster(build(opts).cfg, n)
	if err != nil {
		t.Fatalf("zkdtest: start cluster: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := cl.Shutdown(ctx); err != nil {
			t.Errorf("zkdtest: cluster shutdown: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, s := range cl.Servers {
		if err := s.WaitServing(ctx); err != nil {
			t.Fatalf("zkdtest: %v", err)
		}
	}
	return cl
}
