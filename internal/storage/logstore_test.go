package storage

import (
	"bytes"
	"fmt"
	"testing"
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
