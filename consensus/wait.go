package consensus

import (
	"container/heap"
	"sync"
)

// applyWait hands out channels that close once the FSM's last applied zxid reaches an index, like
// etcd's applyWait. Trigger is called from the FSM goroutine after every applied transaction.
type applyWait struct {
	mu struct {
		sync.Mutex
		last    int64
		waiters waitHeap
		closed  bool
	}
}

type waiter struct {
	index int64
	ch    chan struct{}
}

type waitHeap []waiter

func (h waitHeap) Len() int           { return len(h) }
func (h waitHeap) Less(i, j int) bool { return h[i].index < h[j].index }
func (h waitHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *waitHeap) Push(x any)        { *h = append(*h, x.(waiter)) }
func (h *waitHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	*h = old[:len(old)-1]
	return w
}

var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// wait returns a channel that is closed once index has been applied or the waiter shuts down.
func (w *applyWait) wait(index int64) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if index <= w.mu.last || w.mu.closed {
		return closedCh
	}
	ch := make(chan struct{})
	heap.Push(&w.mu.waiters, waiter{index: index, ch: ch})
	return ch
}

// trigger records that index has been applied and wakes the waiters at or below it. A lower index
// than before (a restore to an older snapshot cannot happen in Raft, but be safe) is recorded as is.
func (w *applyWait) trigger(index int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mu.last = index
	for len(w.mu.waiters) > 0 && w.mu.waiters[0].index <= index {
		close(heap.Pop(&w.mu.waiters).(waiter).ch)
	}
}

// close wakes every waiter; later waits return at once.
func (w *applyWait) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mu.closed = true
	for _, wt := range w.mu.waiters {
		close(wt.ch)
	}
	w.mu.waiters = nil
}
