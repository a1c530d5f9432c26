package zkdtest_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/zkd-io/zkd/conformance"
	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/server"
	"github.com/zkd-io/zkd/server/zkdtest"
)

// firstWrite starts a server with cfg, as Start does, and returns how long it took from the call
// to the first write a client had acknowledged; the server is stopped after.
func firstWrite(b *testing.B, cfg server.Config) time.Duration {
	b.Helper()
	began := time.Now()
	s, err := server.Start(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.WaitServing(ctx); err != nil {
		b.Fatal(err)
	}
	r, err := conformance.DialRaw(s.Addr(), 10*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	if err := r.NewSession(30000); err != nil {
		b.Fatal(err)
	}
	var resp jute.CreateResponse
	if h, err := r.Do(jute.OpCreate, &jute.CreateRequest{Path: "/first", Data: []byte("v"), ACL: []jute.ACL{{Perms: jute.PermAll, ID: jute.Id{Scheme: "world", ID: "anyone"}}}}, &resp); err != nil || h.Err != jute.CodeOK {
		b.Fatalf("create: %v, %v", h.Err, err)
	}
	took := time.Since(began)
	r.Close()
	if err := s.Shutdown(ctx); err != nil {
		b.Fatal(err)
	}
	return took
}

// benchmarkStart reports the median time from starting a server to its first acknowledged write
// (ms/first-write); the mean (ns/op) includes stopping it.
func benchmarkStart(b *testing.B, opts ...zkdtest.Option) {
	cfg := zkdtest.Config(opts...)
	var took []time.Duration
	for b.Loop() {
		took = append(took, firstWrite(b, cfg))
	}
	b.ReportMetric(float64(median(took).Microseconds())/1000, "ms/first-write")
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkStart is zkdtest.Start's server: Raft on, in memory.
func BenchmarkStart(b *testing.B) { benchmarkStart(b) }

// BenchmarkStartWithoutRaft is zkdtest.Start's server on the in-memory twin of consensus.
func BenchmarkStartWithoutRaft(b *testing.B) { benchmarkStart(b, zkdtest.WithoutRaft()) }
