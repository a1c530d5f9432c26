package wal

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/zkd-io/zkd/internal/third_party/raft"
)

// zkdEntry is entry i's data: its size varies so that neighbouring entries in one encoding
// buffer have different lengths.
func zkdEntry(i uint64) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("%d;", i)), int(i%37)+1)
}

func zkdBatch(from, n uint64, size func(uint64) []byte) []*raft.Log {
	var logs []*raft.Log
	for i := from; i < from+n; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: size(i)})
	}
	return logs
}

// StoreLogs encodes a batch into one slice: every entry of every batch reads back as written,
// through batches of many sizes and lengths, and after a reopen.
func TestZkdStoreLogsOneSlicePerBatch(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(dir, WithSegmentSize(256<<10))
	if err != nil {
		t.Fatal(err)
	}
	big := func(i uint64) []byte { return bytes.Repeat([]byte{byte(i)}, 100<<10) }
	next := uint64(1)
	store := func(n uint64, size func(uint64) []byte) {
		t.Helper()
		if err := w.StoreLogs(zkdBatch(next, n, size)); err != nil {
			t.Fatal(err)
		}
		next += n
	}
	store(1, zkdEntry)
	store(64, zkdEntry)
	store(3, big)
	store(17, zkdEntry)
	store(500, zkdEntry) // several segments rotate
	check := func(w *WAL) {
		t.Helper()
		for i := uint64(1); i < next; i++ {
			want := zkdEntry(i)
			if i >= 66 && i < 69 {
				want = big(i)
			}
			var l raft.Log
			if err := w.GetLog(i, &l); err != nil {
				t.Fatalf("entry %d: %v", i, err)
			}
			if l.Index != i || !bytes.Equal(l.Data, want) {
				t.Fatalf("entry %d read back as index %d, %d bytes; want %d bytes", i, l.Index, len(l.Data), len(want))
			}
		}
	}
	check(w)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w, err = Open(dir, WithSegmentSize(256<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	check(w)
}

// Upstream allocated a growing bytes.Buffer per entry (three allocations for a small one) and
// boxed the segment's offsets slice per entry; a batch now allocates a fixed few whatever its
// length.
func TestZkdStoreLogsAllocations(t *testing.T) {
	w, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	next := uint64(1)
	batch := make([]*raft.Log, 64)
	for i := range batch {
		batch[i] = &raft.Log{Term: 1, Type: raft.LogCommand, Data: make([]byte, 300)}
	}
	store := func() {
		for _, l := range batch {
			l.Index = next
			next++
		}
		if err := w.StoreLogs(batch); err != nil {
			t.Fatal(err)
		}
	}
	store() // the buffers grow once
	if n := testing.AllocsPerRun(20, store); n > 8 {
		t.Fatalf("%v allocations for a batch of %d entries", n, len(batch))
	}
}

func zkdCodecLogs() []*raft.Log {
	east := time.FixedZone("", 5*3600+30*60)
	return []*raft.Log{
		{},
		{Index: 1, Term: 1, Type: raft.LogCommand, Data: []byte("x"), AppendedAt: time.Unix(1700000000, 123456789).UTC()},
		{Index: 1 << 40, Term: 1 << 33, Type: raft.LogConfiguration, Data: bytes.Repeat([]byte{0xa5}, 300),
			Extensions: []byte("ext"), AppendedAt: time.Unix(1, 1).In(east)},
		{Index: ^uint64(0), Term: ^uint64(0), Type: raft.LogBarrier, Data: []byte{}, Extensions: []byte{}},
		{Index: 7, Term: 2, Type: raft.LogNoop, Data: make([]byte, 70000), AppendedAt: time.Now()},
	}
}

// appendBinaryV1 writes exactly what BinaryCodec.Encode writes, after whatever the buffer holds.
func TestZkdAppendBinaryV1(t *testing.T) {
	for i, l := range zkdCodecLogs() {
		zkdCompareCodec(t, fmt.Sprint("entry ", i), l)
	}
}

func zkdCompareCodec(t *testing.T, name string, l *raft.Log) {
	t.Helper()
	var want bytes.Buffer
	werr := (&BinaryCodec{}).Encode(l, &want)
	got, gerr := appendEncoded(&BinaryCodec{}, []byte("prefix"), l)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%s: Encode: %v, appendBinaryV1: %v", name, werr, gerr)
	}
	if werr != nil {
		return
	}
	if !bytes.Equal(got, append([]byte("prefix"), want.Bytes()...)) {
		t.Fatalf("%s: appendBinaryV1 wrote %x, Encode %x", name, got, want.Bytes())
	}
	// The split form StoreLogs hands the segment writer: head, the data itself, tail.
	split := appendBinaryV1Head(nil, l)
	split = append(split, l.Data...)
	if split, gerr = appendBinaryV1Tail(split, l); gerr != nil || !bytes.Equal(split, want.Bytes()) {
		t.Fatalf("%s: head, data and tail are %x (%v), Encode wrote %x", name, split, gerr, want.Bytes())
	}
	var back raft.Log
	if err := (&BinaryCodec{}).Decode(got[len("prefix"):], &back); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if back.Index != l.Index || back.Term != l.Term || back.Type != l.Type || !bytes.Equal(back.Data, l.Data) ||
		!bytes.Equal(back.Extensions, l.Extensions) || !back.AppendedAt.Equal(l.AppendedAt) {
		t.Fatalf("%s: decoded to %+v", name, back)
	}
}

func FuzzZkdAppendBinaryV1(f *testing.F) {
	for _, l := range zkdCodecLogs() {
		f.Add(l.Index, l.Term, uint8(l.Type), l.Data, l.Extensions, l.AppendedAt.UnixNano(), 0)
	}
	f.Fuzz(func(t *testing.T, index, term uint64, typ uint8, data, ext []byte, nanos int64, offsetMin int) {
		at := time.Unix(0, nanos).In(time.FixedZone("", (offsetMin%(24*60))*60))
		zkdCompareCodec(t, "fuzzed", &raft.Log{Index: index, Term: term, Type: raft.LogType(typ), Data: data, Extensions: ext, AppendedAt: at})
	})
}

// With BinaryCodec an entry's data is copied once, into the segment writer's buffer: a batch of
// large entries allocates nothing near its size (upstream's encoding buffer held a copy of it).
func TestZkdStoreLogsDataCopiedOnce(t *testing.T) {
	w, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	next := uint64(1)
	batch := make([]*raft.Log, 4)
	for i := range batch {
		batch[i] = &raft.Log{Term: 1, Type: raft.LogCommand, Data: bytes.Repeat([]byte{byte(i)}, 256<<10)}
	}
	store := func() {
		t.Helper()
		for _, l := range batch {
			l.Index = next
			next++
		}
		if err := w.StoreLogs(batch); err != nil {
			t.Fatal(err)
		}
	}
	store() // the writer's buffer grows once
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	store()
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
		t.Fatalf("storing %d entries of 256 KiB allocated %d bytes", len(batch), n)
	}
	for i := uint64(1); i < next; i++ {
		var l raft.Log
		if err := w.GetLog(i, &l); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(l.Data, batch[(i-1)%4].Data) {
			t.Fatalf("entry %d read back wrong", i)
		}
	}
}
