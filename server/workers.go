package server

import (
	"context"
	"sync"
	"sync/atomic"
)

// workers runs connections' goroutines (a connection's serve, writer and executor) on goroutines
// that outlive one connection. A new goroutine starts with a small stack and grows it, copying
// the whole stack each time, as its calls go deeper; a connection's reader and executor go deep
// (the handshake proposes the session; a write waits on consensus), and under session churn that
// growth was about 7% of the server's CPU. A goroutine that has served one connection keeps its
// stack for the next.
//
// The server owns the workers: they count in its WaitGroup and end with its context. At most
// maxIdleWorkers wait for work at a time; a worker that finishes when that many are waiting
// ends, so a burst of connections leaves no more than that behind.
type workers struct {
	ctx  context.Context
	wg   *sync.WaitGroup
	idle chan func() // unbuffered: a send succeeds only if a worker is waiting
	n    atomic.Int32
}

const maxIdleWorkers = 256

func newWorkers(ctx context.Context, wg *sync.WaitGroup) *workers {
	return &workers{ctx: ctx, wg: wg, idle: make(chan func())}
}

// Go runs f on an idle worker, or on a new one if none is waiting.
func (w *workers) Go(f func()) {
	select {
	case w.idle <- f:
		return
	default:
	}
	w.wg.Go(func() { w.run(f) })
}

func (w *workers) run(f func()) {
	for {
		f()
		if w.n.Add(1) > maxIdleWorkers {
			w.n.Add(-1)
			return
		}
		select {
		case f = <-w.idle:
			w.n.Add(-1)
		case <-w.ctx.Done():
			w.n.Add(-1)
			return
		}
	}
}
