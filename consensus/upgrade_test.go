package consensus

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zkd-io/zkd/internal/storage"
	"github.com/zkd-io/zkd/jute"
)

// untar extracts a gzipped tar of a data directory into a new temporary directory.
func untar(t *testing.T, name string) string {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return dir
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.Clean(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o750)
		case tar.TypeReg:
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(p, b, 0o600)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestDirectoryBeforeChecksumsUpgrades opens a data directory the release before checksums
// wrote (testdata: a standalone server with a snapshot at index 144 and entries after it, raft-wal
// metadata in bbolt, entries without trailers): it serves the same tree, moves its metadata into
// the checksummed file, takes new writes with checksums, and verifies clean across a restart.
func TestDirectoryBeforeChecksumsUpgrades(t *testing.T) {
	synctest.Test(t, testDirectoryBeforeChecksumsUpgrades)
}

func testDirectoryBeforeChecksumsUpgrades(t *testing.T) {
	dir := untar(t, "testdata/datadir-before-checksums.tar.gz")
	check := func(n *Node) {
		t.Helper()
		eventually(t, 10*time.Second, "leadership", n.IsLeader)
		if err := n.Sync(ctxT(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		for path, want := range map[string]string{"/old": "root", "/old/n001": "v1", "/old/n007": "changed", "/old/n118": "v118", "/old/n119": "changed", "/old/n112": "changed"} {
			got, _, ok := getData(t, n, path)
			if !ok || string(got) != want {
				t.Fatalf("%s = %q (exists %v), want %q", path, got, ok, want)
			}
		}
	}
	// The directory was written by "zkd" standalone, whose server id is 1.
	cfg := func() Config { c := memStandaloneConfig(t, dir); c.ID = "1"; return c }
	n, err := New(cfg())
	if err != nil {
		t.Fatal(err)
	}
	check(n)
	if _, err := n.Propose(ctxT(t, 10*time.Second), createReq("/new", []byte("after"), jute.ModePersistent)); err != nil {
		t.Fatal(err)
	}
	n.Shutdown()
	wal := filepath.Join(dir, "raft", walDirName)
	if !exists(filepath.Join(wal, walMetaFileName)) || !exists(filepath.Join(wal, walMetaName+migratedExt)) || exists(filepath.Join(wal, walMetaName)) {
		t.Fatal("the bbolt metadata was not migrated to the checksummed file")
	}
	rep, err := storage.VerifyDir(dir)
	if err != nil {
		t.Fatalf("verify after the upgrade: %v", err)
	}
	if rep.LastIndex < 146 || len(rep.Snapshots) != 1 {
		t.Fatalf("verify report %+v", rep)
	}
	n, err = New(cfg())
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	check(n)
	if got, _, ok := getData(t, n, "/new"); !ok || string(got) != "after" {
		t.Fatal("the write after the upgrade is gone")
	}
}

// TestDirectoryBeforeChecksumsDamageFound: the entries of a directory from before checksums carry
// no trailer, but raft-wal's checksum of each append batch covers them: a byte flipped in one
// is refused at start.
func TestDirectoryBeforeChecksumsDamageFound(t *testing.T) {
	dir := untar(t, "testdata/datadir-before-checksums.tar.gz")
	segs, _ := filepath.Glob(filepath.Join(dir, "raft", walDirName, "*.wal"))
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(b, []byte("v42"))
	if at < 0 {
		t.Fatal("no /old/n042 data in the segment")
	}
	b[at+1] ^= 0x01
	if err := os.WriteFile(segs[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := standaloneConfig(t, dir)
	cfg.ID = "1"
	_, err = New(cfg)
	var d *DamageError
	if !errors.As(err, &d) || d.File != segs[0] {
		t.Fatalf("a damaged entry from before checksums: %v", err)
	}
}
