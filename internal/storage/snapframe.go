package storage

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"runtime"

	"github.com/zkd-io/zkd/znode"
)

// The snapshot format: "zkds", a version byte, then znode's snapshot (which ends in a CRC-32C of
// all of it). Version 2 carries znode's bytes in chunks, each checked on its own as it is read,
// so that damage (on disk, or in a snapshot a follower is sent) is found at the chunk it hits:
//
//	chunk    uint32 length (big-endian, at most snapFrameMax), the bytes, uint32 CRC-32C of them
//	end      a chunk of length 0 (and the CRC-32C of nothing, 0)
//
// Version 1, unchunked, is still read.

// snapshotMagic starts every snapshot this package writes, followed by a format version byte.
var snapshotMagic = [4]byte{'z', 'k', 'd', 's'}

const (
	snapshotVersion   byte = 2
	snapshotVersionV1 byte = 1
	snapFrameSize          = 256 << 10
	snapFrameMax           = 16 << 20
)

// writeSnapshot writes v in the package's snapshot format.
func writeSnapshot(w io.Writer, v *znode.View) error {
	if _, err := w.Write(append(snapshotMagic[:], snapshotVersion)); err != nil {
		return err
	}
	fw := &frameWriter{w: w, buf: make([]byte, 4, 4+snapFrameSize+4)}
	if err := v.WriteSnapshot(fw); err != nil {
		return err
	}
	return fw.close()
}

// readSnapshotStream reads a snapshot in the package's format (either version) into a tree. A
// chunk that fails its checksum is an error naming it; nothing of the tree is returned then.
func readSnapshotStream(r io.Reader) (*znode.Tree, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	body, err := snapshotBody(br)
	if err != nil {
		return nil, err
	}
	t, err := znode.ReadSnapshot(body)
	if err != nil {
		return nil, err
	}
	if fr, ok := body.(*frameReader); ok {
		if err := fr.finish(); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// snapshotBody reads the header and returns a reader of znode's bytes.
func snapshotBody(br *bufio.Reader) (io.Reader, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return nil, fmt.Errorf("not a zkd snapshot: header: %w", err)
	}
	if [4]byte(hdr[:4]) != snapshotMagic {
		return nil, fmt.Errorf("not a zkd snapshot (header %x)", hdr)
	}
	switch hdr[4] {
	case snapshotVersion:
		return &frameReader{r: br}, nil
	case snapshotVersionV1:
		return br, nil
	}
	return nil, fmt.Errorf("zkd snapshot format version %d is not known to this build", hdr[4])
}

// snapYieldBytes is how much of a snapshot is written between two yields of the processor.
const snapYieldBytes = 64 << 10

// frameWriter cuts what is written into checksummed chunks.
//
// Writing a snapshot is a long run of work that never blocks (the tree is in memory, the file
// writes land in the page cache), and Go only preempts a goroutine after 10ms on its processor.
// With one processor (cmd/zkd runs on one while the server is lightly loaded) every request
// that became ready meanwhile waited for that preemption. So the writer yields the processor
// every snapYieldBytes: a request waits at most the time it takes to serialize that much.
type frameWriter struct {
	w       io.Writer
	buf     []byte // 4 bytes of room for the length, then the chunk's bytes
	unyield int    // bytes taken since the last yield
}

func (f *frameWriter) Write(p []byte) (int, error) {
	n := len(p)
	if f.unyield += n; f.unyield >= snapYieldBytes {
		f.unyield = 0
		runtime.Gosched()
	}
	for len(p) > 0 {
		k := min(len(p), 4+snapFrameSize-len(f.buf))
		f.buf = append(f.buf, p[:k]...)
		p = p[k:]
		if len(f.buf) == 4+snapFrameSize {
			if err := f.emit(); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

func (f *frameWriter) emit() error {
	data := f.buf[4:]
	binary.BigEndian.PutUint32(f.buf[:4], uint32(len(data)))
	f.buf = binary.BigEndian.AppendUint32(f.buf, crc32.Checksum(data, castagnoli))
	_, err := f.w.Write(f.buf)
	f.buf = f.buf[:4]
	return err
}

func (f *frameWriter) close() error {
	if len(f.buf) > 4 {
		if err := f.emit(); err != nil {
			return err
		}
	}
	return f.emit() // the empty end chunk
}

// frameReader yields the bytes of checked chunks.
type frameReader struct {
	r      io.Reader
	chunk  []byte
	pos    int
	n      int   // chunks read
	offset int64 // of the current chunk in the body
	done   bool
}

var errSnapshotChunk = errors.New("snapshot chunk fails its checksum")

func (f *frameReader) Read(p []byte) (int, error) {
	for f.pos == len(f.chunk) {
		if f.done {
			return 0, io.EOF
		}
		if err := f.next(); err != nil {
			return 0, err
		}
	}
	k := copy(p, f.chunk[f.pos:])
	f.pos += k
	return k, nil
}

func (f *frameReader) next() error {
	var hdr [4]byte
	if _, err := io.ReadFull(f.r, hdr[:]); err != nil {
		return fmt.Errorf("snapshot chunk %d (offset %d): %w", f.n, f.offset, io.ErrUnexpectedEOF)
	}
	size := binary.BigEndian.Uint32(hdr[:])
	if size > snapFrameMax {
		return fmt.Errorf("snapshot chunk %d (offset %d): length %d: %w", f.n, f.offset, size, errSnapshotChunk)
	}
	buf := make([]byte, size+4)
	if _, err := io.ReadFull(f.r, buf); err != nil {
		return fmt.Errorf("snapshot chunk %d (offset %d): %w", f.n, f.offset, io.ErrUnexpectedEOF)
	}
	data := buf[:size]
	if crc32.Checksum(data, castagnoli) != binary.BigEndian.Uint32(buf[size:]) {
		return fmt.Errorf("snapshot chunk %d (offset %d): %w", f.n, f.offset, errSnapshotChunk)
	}
	f.offset += int64(size) + 8
	f.n++
	f.chunk, f.pos = data, 0
	f.done = size == 0
	return nil
}

// finish reads up to the end chunk: a snapshot whose znode part ended early but whose chunks go
// on is not the snapshot that was written.
func (f *frameReader) finish() error {
	for !f.done {
		if f.pos != len(f.chunk) {
			return fmt.Errorf("snapshot: bytes after the tree in chunk %d", f.n-1)
		}
		if err := f.next(); err != nil {
			return err
		}
		if len(f.chunk) > 0 {
			return fmt.Errorf("snapshot: bytes after the tree in chunk %d", f.n-1)
		}
	}
	return nil
}
