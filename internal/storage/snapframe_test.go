package storage

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/znode"
)

// FuzzSnapshotStream: reading a snapshot never panics whatever the bytes.
func FuzzSnapshotStream(f *testing.F) {
	f.Add([]byte("zkds\x02\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Add([]byte("zkds\x01"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = readSnapshotStream(bytes.NewReader(b))
	})
}

// A snapshot larger than one chunk: written in checked chunks, read back to the same tree; a
// byte flipped in its second chunk is found there, by that chunk's checksum; the unchunked
// version 1 is still read.
func TestSnapshotChunks(t *testing.T) {
	tree := znode.New()
	data := bytes.Repeat([]byte("d"), 300)
	for i := range 2000 {
		txn := &znode.Txn{Time: int64(i + 1), Op: jute.OpCreate, Req: &jute.CreateRequest{Path: fmt.Sprintf("/n%04d", i), Data: data, ACL: []jute.ACL{{Perms: jute.PermAll, ID: jute.Id{Scheme: "world", ID: "anyone"}}}}}
		if r := tree.Apply(int64(i+1), txn); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	var b bytes.Buffer
	if err := writeSnapshot(&b, tree.View()); err != nil {
		t.Fatal(err)
	}
	if b.Len() < 2*snapFrameSize {
		t.Fatalf("the snapshot is %d bytes, less than two chunks", b.Len())
	}
	back, err := readSnapshotStream(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if err := writeSnapshot(&again, back.View()); err != nil || !bytes.Equal(again.Bytes(), b.Bytes()) {
		t.Fatalf("the tree read back differs (%v)", err)
	}

	bad := bytes.Clone(b.Bytes())
	bad[5+8+snapFrameSize+100] ^= 1 // inside the second chunk
	_, err = readSnapshotStream(bytes.NewReader(bad))
	if !errors.Is(err, errSnapshotChunk) || !strings.Contains(err.Error(), "chunk 1 ") {
		t.Fatalf("a flipped byte in the second chunk: %v", err)
	}
	if _, err := readSnapshotStream(bytes.NewReader(b.Bytes()[:b.Len()-8])); err == nil {
		t.Fatal("a snapshot without its end chunk was read")
	}

	var v1 bytes.Buffer
	v1.Write(append(snapshotMagic[:], snapshotVersionV1))
	if err := tree.View().WriteSnapshot(&v1); err != nil {
		t.Fatal(err)
	}
	if _, err := readSnapshotStream(&v1); err != nil {
		t.Fatalf("version 1: %v", err)
	}
}
