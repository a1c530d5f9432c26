package storage

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// nonZero must find every non-zero byte, wherever it falls against its blocks of zeros: at
// either edge of a block, alone at the end, or nowhere. (TestTornTailPreallocated gives it
// several spans.)
func TestNonZero(t *testing.T) {
	const size = 3<<16 + 1000 // three whole blocks and a short one
	// naive is the byte-by-byte count nonZero replaces.
	naive := func(b []byte, from int) (count, end int) {
		end = from
		for i := from; i < len(b); i++ {
			if b[i] != 0 {
				count, end = count+1, i+1
			}
		}
		return count, end
	}
	cases := map[string][]int{
		"none":              nil,
		"first byte":        {0},
		"last byte":         {size - 1},
		"block edges":       {1<<16 - 1, 1 << 16, 2<<16 - 1, 2 << 16},
		"before from only":  {5},
		"short block start": {3 << 16},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var scattered []int
	for range 50 {
		scattered = append(scattered, rng.IntN(size))
	}
	cases["scattered"] = scattered
	for name, at := range cases {
		for _, from := range []int{0, 32, 1 << 16, size} {
			b := make([]byte, size)
			for _, i := range at {
				b[i] = byte(1 + i%255)
			}
			gotN, gotEnd := nonZero(b, [][2]int64{{int64(from), size}}, from)
			wantN, wantEnd := naive(b, from)
			if gotN != wantN || gotEnd != wantEnd {
				t.Errorf("%s, from %d: %d non-zero bytes ending at %d; want %d ending at %d", name, from, gotN, gotEnd, wantN, wantEnd)
			}
		}
	}
}

// lastCommitEnd stops at the first frame that is neither an entry, an index nor a commit, and
// never points past the bytes it was given.
func TestLastCommitEnd(t *testing.T) {
	frame := func(typ byte, payload int) []byte {
		h := make([]byte, 8+(payload+7)&^7)
		h[0] = typ
		h[4] = byte(payload)
		for i := 8; i < 8+payload; i++ {
			h[i] = 0xAA
		}
		return h
	}
	seg := make([]byte, 32)
	seg = append(seg, frame(1, 13)...) // entry
	seg = append(seg, frame(3, 0)...)  // commit
	afterFirst := len(seg)
	seg = append(seg, frame(1, 5)...)
	seg = append(seg, frame(2, 16)...) // index
	seg = append(seg, frame(3, 0)...)
	afterSecond := len(seg)
	seg = append(seg, frame(1, 9)...) // an append a crash cut before its commit
	tail := append(seg, make([]byte, 4096)...)
	for _, c := range []struct {
		name string
		b    []byte
		want int
	}{
		{"two appends and a torn one", tail, afterSecond},
		{"cut inside the torn append", seg[:afterSecond+4], afterSecond},
		{"cut inside the second append", seg[:afterSecond-3], afterFirst},
		{"header only", seg[:32], 32},
		{"shorter than a header", seg[:10], 10},
	} {
		if got := lastCommitEnd(c.b); got != c.want {
			t.Errorf("%s: last commit ends at %d; want %d", c.name, got, c.want)
		}
	}
}

// tornTail finds bytes a crash left anywhere past the last commit of a preallocated segment, also
// far past it in what is otherwise a hole (what a failed, longer append leaves behind a shorter
// one that rewrote its start), and clears exactly those.
func TestTornTailPreallocated(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "00000000000000000001-0000000000000001.wal")
	const size = 8 << 20
	head := make([]byte, 32)
	head = append(head, 1, 0, 0, 0, 5, 0, 0, 0, 'h', 'e', 'l', 'l', 'o', 0, 0, 0) // entry
	head = append(head, 3, 0, 0, 0, 0, 0, 0, 0)                                   // commit
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(int(f.Fd()), 0, 0, size); err != nil {
		t.Logf("fallocate: %v; the file is sparse instead", err)
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
	}
	junk := map[int64][]byte{
		int64(len(head)): {9, 9, 9},                    // right after the commit
		3<<20 + 5:        bytes.Repeat([]byte{7}, 100), // deep in the preallocated part
		size - 1:         {1},                          // the last byte
	}
	if _, err := f.WriteAt(head, 0); err != nil {
		t.Fatal(err)
	}
	want := 0
	for off, b := range junk {
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
		want += len(b)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, n, err := tornTail(dir, false); err != nil || n != want {
		t.Fatalf("found %d torn bytes (%v); want %d", n, err, want)
	}
	if _, n, err := tornTail(dir, true); err != nil || n != want {
		t.Fatalf("cleared %d torn bytes (%v); want %d", n, err, want)
	}
	if _, n, err := tornTail(dir, false); err != nil || n != 0 {
		t.Fatalf("%d torn bytes left after clearing (%v)", n, err)
	}
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != size || !bytes.Equal(b[:len(head)], head) {
		t.Fatal("clearing changed the committed part or the size of the segment")
	}
}
