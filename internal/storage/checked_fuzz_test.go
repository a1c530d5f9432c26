package storage

import (
	"bytes"
	"testing"

	"github.com/zkd-io/zkd/internal/third_party/raft"
)

// FuzzWALMetaFile: decoding the WAL metadata file never panics whatever its bytes, and what
// encodes decodes to the same document.
func FuzzWALMetaFile(f *testing.F) {
	good, _ := encodeWALMeta(walMetaDoc{Stable: map[string][]byte{"CurrentTerm": {1, 0, 0, 0, 0, 0, 0, 0}}})
	f.Add(good)
	f.Add([]byte{})
	f.Add([]byte("zkdm\x00\x00\x00\x01\x00\x00\x00\x02{}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		doc, err := decodeWALMeta(b)
		if err != nil {
			return
		}
		again, err := encodeWALMeta(doc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeWALMeta(again); err != nil {
			t.Fatalf("a re-encoded document does not decode: %v", err)
		}
	})
}

// FuzzEntryTrailer: checking an entry read back never panics whatever its extensions and data;
// a sealed entry always opens to what was sealed, and any change to one byte of it is caught.
func FuzzEntryTrailer(f *testing.F) {
	f.Add(uint64(7), uint64(2), []byte("data"), []byte{}, 3)
	f.Add(uint64(1), uint64(1), []byte{}, []byte("ext"), 0)
	f.Fuzz(func(t *testing.T, index, term uint64, data, ext []byte, flip int) {
		raw := &raft.Log{Index: index, Term: term, Type: raft.LogCommand, Data: data, Extensions: ext}
		_ = openEntry(index, &raft.Log{Index: index, Term: term, Data: data, Extensions: bytes.Clone(ext)}, false)

		sealed := *raw
		sealed.Extensions = sealEntry(raw)
		got := sealed
		if p := openEntry(index, &got, false); p != "" {
			t.Fatalf("a sealed entry does not open: %s", p)
		}
		if !bytes.Equal(got.Extensions, ext) && !(len(ext) == 0 && got.Extensions == nil) {
			t.Fatalf("extensions %x, want %x", got.Extensions, ext)
		}
		// One byte of the data or the trailer changed.
		bad := sealed
		bad.Data = bytes.Clone(data)
		bad.Extensions = bytes.Clone(sealed.Extensions)
		all := len(bad.Data) + len(bad.Extensions) - 4 // the magic is not covered: changing it reads as "no trailer"
		if all <= 0 {
			return
		}
		at := (flip%all + all) % all
		if at < len(bad.Data) {
			bad.Data[at] ^= 1
		} else {
			bad.Extensions[at-len(bad.Data)] ^= 1
		}
		if p := openEntry(index, &bad, false); p == "" {
			t.Fatalf("a changed byte at %d was not caught", at)
		}
	})
}
