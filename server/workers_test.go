package server

import (
	"bytes"
	"context"
	"log/slog"
	"runtime"
	"sync"
	"testing"
)

// A worker that finished waits for the next function and runs it; at most maxIdleWorkers wait;
// all of them end with the context.
func TestWorkers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	w := newWorkers(ctx, &wg)

	// One at a time: the second function runs on the goroutine that ran the first.
	ids := make(chan uint64, 2)
	for range 2 {
		done := make(chan struct{})
		w.Go(func() { ids <- goid(); close(done) })
		<-done
		waitIdle(t, w, 1)
	}
	if a, b := <-ids, <-ids; a != b {
		t.Fatalf("the second function ran on goroutine %d, not on the idle worker %d", b, a)
	}

	// Many at once: no more than maxIdleWorkers stay.
	release := make(chan struct{})
	var started sync.WaitGroup
	for range maxIdleWorkers + 40 {
		started.Add(1)
		w.Go(func() { started.Done(); <-release })
	}
	started.Wait()
	close(release)
	waitIdle(t, w, maxIdleWorkers)

	cancel()
	wg.Wait() // every worker ended
	if n := w.n.Load(); n != 0 {
		t.Fatalf("%d workers still counted idle after the context ended", n)
	}
}

// waitIdle waits until n workers wait for work.
func waitIdle(t *testing.T, w *workers, n int32) {
	t.Helper()
	for w.n.Load() != n {
		runtime.Gosched()
	}
}

// goid is the calling goroutine's id, from its stack trace's first line.
func goid() uint64 {
	var b [64]byte
	s := b[:runtime.Stack(b[:], false)]
	s = bytes.TrimPrefix(s, []byte("goroutine "))
	var id uint64
	for _, c := range s {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}

// A logger over lazyAttrs writes exactly what one over the handler itself writes, groups and
// all, and formats nothing for records it does not handle.
func TestLazyAttrs(t *testing.T) {
	var eager, lazy bytes.Buffer
	opts := &slog.HandlerOptions{Level: slog.LevelInfo, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}
	loggers := []*slog.Logger{slog.New(slog.NewTextHandler(&eager, opts)), slog.New(&lazyAttrs{h: slog.NewTextHandler(&lazy, opts)})}
	for _, l := range loggers {
		l = l.With("remote", "127.0.0.1:1").With("session", "0x1")
		l.Debug("not written", "k", 1)
		l.Info("established", "timeout", 30)
		l.WithGroup("g").With("a", 1).Info("grouped", "b", 2)
	}
	if eager.String() != lazy.String() {
		t.Fatalf("lazy attributes wrote\n%s\nthe handler itself\n%s", lazy.String(), eager.String())
	}
	if !bytes.Contains(lazy.Bytes(), []byte("remote=127.0.0.1:1 session=0x1 g.a=1 g.b=2")) {
		t.Fatalf("unexpected output:\n%s", lazy.String())
	}
}
