package zkfile

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// seeds adds the files in testdata/<kind> as fuzz seeds (none there is fine).
func seeds(f *testing.F, kind string) {
	names, _ := filepath.Glob(filepath.Join("testdata", kind, "*"))
	for _, n := range names {
		if b, err := os.ReadFile(n); err == nil {
			f.Add(b)
		}
	}
}

// Any bytes as a snapshot: an error or a snapshot, never a panic or a hang.
func FuzzReadSnapshot(f *testing.F) {
	seeds(f, "snapshot")
	f.Add([]byte("ZKSN\x00\x00\x00\x02"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ReadSnapshot(bytes.NewReader(b))
		if err == nil {
			_, _ = FromSnapshot(s)
		}
	})
}

// Any bytes as a transaction log: an error or a log whose transactions replay, never a panic.
func FuzzReadLog(f *testing.F) {
	seeds(f, "log")
	f.Add([]byte("ZKLG\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := ReadLog(bytes.NewReader(b))
		if err != nil {
			return
		}
		tr, _ := newTree(initialSnapshot())
		for i := range l.Txns {
			tr.apply(&l.Txns[i])
		}
	})
}
