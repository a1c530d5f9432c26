package raft

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// OpenUnverified reads the state file as written, and skips the CRC-64 comparison that Open
// makes: a state file changed after it was written opens with it, and fails with Open.
func TestFileSnapshotOpenUnverified(t *testing.T) {
	dir := t.TempDir()
	fss, err := NewFileSnapshotStoreWithLogger(dir, 2, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	sink, err := fss.Create(SnapshotVersionMax, 10, 3, Configuration{}, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []byte("the state of the machine")
	if _, err := sink.Write(want); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	read := func(open func(string) (*SnapshotMeta, io.ReadCloser, error)) ([]byte, *SnapshotMeta, error) {
		meta, rc, err := open(sink.ID())
		if err != nil {
			return nil, nil, err
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		return b, meta, err
	}
	got, meta, err := read(fss.OpenUnverified)
	if err != nil || !bytes.Equal(got, want) || meta.Index != 10 || meta.Term != 3 {
		t.Fatalf("OpenUnverified: %q, %+v, %v", got, meta, err)
	}
	state := filepath.Join(dir, snapPath, sink.ID(), stateFilePath)
	if err := os.WriteFile(state, []byte("the state of the machinE"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := read(fss.Open); err == nil {
		t.Fatal("Open of a changed state file succeeded")
	}
	if got, _, err := read(fss.OpenUnverified); err != nil || string(got) != "the state of the machinE" {
		t.Fatalf("OpenUnverified of a changed state file: %q, %v", got, err)
	}
}
