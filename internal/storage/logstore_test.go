package storage

import (
	"bytes"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/zkd-io/zkd/internal/third_party/raft"
)

func TestChunkSyncer(t *testing.T) {
	var out bytes.Buffer
	var calls [][2]int64
	w := &chunkSyncer{w: &out, chunk: 10, sync: func(off, n int64) { calls = append(calls, [2]int64{off, n}) }}
	for _, n := range []int{3, 9, 25, 2} {
		if _, err := w.Write(bytes.Repeat([]byte("x"), n)); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(calls) != "[[0 10] [10 10] [20 10]]" || out.Len() != 39 {
		t.Errorf("sync calls %v after 39 bytes (%d written); want the three complete chunks", calls, out.Len())
	}
}

// fullDisk is an in-memory backend whose appends always fail for want of space.
type fullDisk struct{ *raft.InmemStore }

func (fullDisk) StoreLogs([]*raft.Log) error { return syscall.ENOSPC }
func (fullDisk) Close() error                { return nil }

// A write waiting for space when the quit channel closes fails with Options.Stopped (the node's
// own shutdown error), or ErrStopped without one, and still says the disk was full.
func TestWaitForSpaceEndsWithStopped(t *testing.T) {
	nodeStopped := errors.New("node stopped")
	for _, stopped := range []error{nodeStopped, nil} {
		c, err := newCheckedStore(fullDisk{raft.NewInmemStore()}, func(uint64) string { return "mem" }, true)
		if err != nil {
			t.Fatal(err)
		}
		quit := make(chan struct{})
		close(quit)
		c.full = func() bool { return true }
		c.spaceOK = func() bool { return false }
		c.quit, c.stopped = quit, stopped
		err = c.StoreLogs([]*raft.Log{{Index: 1, Term: 1, Type: raft.LogCommand, Data: []byte("x")}})
		want := stopped
		if want == nil {
			want = ErrStopped
		}
		if !errors.Is(err, want) || !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("Stopped %v: StoreLogs = %v; want %v wrapping ENOSPC", stopped, err, want)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
