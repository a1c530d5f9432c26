package zkfile

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash"
	"hash/adler32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/znode"
)

// writer encodes jute's binary form, keeping the Adler-32 of everything written.
type writer struct {
	w   *bufio.Writer
	sum hash.Hash32
	b   [8]byte
}

func (w *writer) write(b []byte) {
	w.w.Write(b) // bufio keeps the first error for Flush
	w.sum.Write(b)
}

func (w *writer) int32(v int32) {
	binary.BigEndian.PutUint32(w.b[:4], uint32(v))
	w.write(w.b[:4])
}

func (w *writer) int64(v int64) {
	binary.BigEndian.PutUint64(w.b[:8], uint64(v))
	w.write(w.b[:8])
}

func (w *writer) buffer(b []byte) {
	if b == nil {
		w.int32(-1)
		return
	}
	w.int32(int32(len(b)))
	w.write(b)
}

func (w *writer) string(s string) { w.buffer([]byte(s)) }

// aclKey identifies an ACL list in the snapshot's ACL table.
func aclKey(acl []jute.ACL) string {
	var b strings.Builder
	for _, a := range acl {
		b.WriteString(strconv.Itoa(int(a.Perms)))
		b.WriteByte(0)
		b.WriteString(a.ID.Scheme)
		b.WriteByte(0)
		b.WriteString(a.ID.ID)
		b.WriteByte(0)
	}
	return b.String()
}

// WriteSnapshot writes a snapshot in ZooKeeper's format (uncompressed, sealed with Adler-32, no
// digest record, which ZooKeeper reads as a snapshot from before digests): the sessions with their
// timeouts, then the ACL table and the nodes that walk yields. walk is called twice, once to
// gather the ACL table that precedes the nodes and once to write them, and must yield the same
// nodes in pre-order both times.
func WriteSnapshot(out io.Writer, sessions map[int64]int32, walk func(func(znode.RawNode) error) error) error {
	refs := map[string]int64{}
	var table [][]jute.ACL
	err := walk(func(n znode.RawNode) error {
		if k := aclKey(n.ACL); refs[k] == 0 {
			table = append(table, n.ACL)
			refs[k] = int64(len(table)) // references start at 1, as ZooKeeper's do
		}
		return nil
	})
	if err != nil {
		return err
	}
	w := &writer{w: bufio.NewWriterSize(out, 1<<16), sum: adler32.New()}
	w.int32(snapMagic)
	w.int32(version)
	w.int64(-1) // dbid, as ZooKeeper writes it
	w.int32(int32(len(sessions)))
	for id, to := range sessions {
		w.int64(id)
		w.int32(to)
	}
	w.int32(int32(len(table)))
	for i, acl := range table {
		w.int64(int64(i + 1))
		w.int32(int32(len(acl)))
		for _, a := range acl {
			w.int32(a.Perms)
			w.string(a.ID.Scheme)
			w.string(a.ID.ID)
		}
	}
	err = walk(func(n znode.RawNode) error {
		p := n.Path
		if p == "/" {
			p = ""
		}
		w.string(p)
		w.buffer(n.Data)
		w.int64(refs[aclKey(n.ACL)])
		w.int64(n.Czxid)
		w.int64(n.Mzxid)
		w.int64(n.Ctime)
		w.int64(n.Mtime)
		w.int32(n.Version)
		w.int32(n.Cversion)
		w.int32(n.Aversion)
		owner := n.Ephemeral
		switch {
		case n.Container:
			owner = containerOwner
		case n.TTL > 0:
			owner = ttlOwner(n.TTL)
		}
		w.int64(owner)
		w.int64(n.Pzxid)
		return nil
	})
	if err != nil {
		return err
	}
	w.string("/")
	w.int64(int64(w.sum.Sum32()))
	w.string("/")
	return w.w.Flush()
}

// ExportView writes v as ZooKeeper's snapshot dataDir/version-2/snapshot.<zxid>, which Apache
// ZooKeeper loads as its state. The file is written under a temporary name, synced and renamed,
// so a crash leaves no partial snapshot ZooKeeper could pick up. It returns the file's path.
func ExportView(dataDir string, v *znode.View) (string, error) {
	dir := filepath.Join(dataDir, "version-2")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	final := filepath.Join(dir, "snapshot."+strconv.FormatInt(v.Zxid(), 16))
	if _, err := os.Stat(final); err == nil {
		return "", fmt.Errorf("%s exists already", final)
	}
	tmp, err := os.CreateTemp(dir, ".export-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	sessions := map[int64]int32{}
	for _, s := range v.Sessions() {
		sessions[s.ID] = s.Timeout
	}
	err = WriteSnapshot(tmp, sessions, v.RawNodes)
	if err == nil {
		// Readable as ZooKeeper's own snapshots are: it may run as another user.
		err = tmp.Chmod(0o644)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), final)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return "", fmt.Errorf("export: %w", err)
	}
	return final, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
