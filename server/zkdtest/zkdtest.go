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

	"github.com/zkd-io/zkd/server"
)

// Option adjusts the server configuration before the server starts.
type Option func(*server.Config)

// WithConfig applies fn to the configuration.
func WithConfig(fn func(*server.Config)) Option { return Option(fn) }

// WithDir makes the server durable in dir instead of in memory.
func WithDir(dir string) Option { return func(c *server.Config) { c.Dir = dir } }

// WithoutRaft runs the server on the in-memory twin of the consensus node (server.Config
// WithoutRaft): no Raft, so it starts at once and its writes apply as they arrive. For tests of
// client-facing behaviour that do not need replication or durability.
func WithoutRaft() Option { return func(c *server.Config) { c.WithoutRaft = true } }

// WithLogs sends the server's logs to the test's output.
func WithLogs(t testing.TB) Option {
	return func(c *server.Config) { c.Logger = slog.New(slog.NewTextHandler(t.Output(), nil)) }
}

// Config returns the configuration Start and StartCluster use, with opts applied, for code that
// starts servers itself (a TestMain has no testing.TB): every four-letter word, TTL nodes
// enabled, no per-IP connection limit, tickTime 200ms so sessions expire quickly (timeouts 400ms
// to 30s), and a Raft heartbeat timeout loose enough for -race on a busy machine.
func Config(opts ...Option) server.Config {
	return config(opts)
}

func config(opts []Option) server.Config {
	cfg := server.Config{
		TickTime:             200 * time.Millisecond,
		MaxSessionTimeout:    30 * time.Second,
		FourLetterWords:      []string{"*"},
		ExtendedTypesEnabled: true,
		MaxClientConns:       -1, // tests open many connections from 127.0.0.1
	}
	cfg.Consensus.HeartbeatTimeout = 500 * time.Millisecond
	for _, o := range opts {
		o(&cfg)
	}
	return cfg
}

// Start starts a standalone in-memory server on 127.0.0.1:0, waits until it serves, and stops it
// when the test ends. The defaults suit tests: tickTime 200ms (so min/max session timeouts are
// 400ms and 30s), every four-letter word, TTL nodes enabled.
func Start(t testing.TB, opts ...Option) *server.Server {
	t.Helper()
	s, err := server.Start(config(opts))
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
	cl, err := server.StartCluster(config(opts), n)
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
