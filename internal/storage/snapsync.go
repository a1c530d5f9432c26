package storage

import (
	"bufio"
	"io"
	"os"
	"path/filepath"

	"github.com/zkd-io/zkd/znode"
)

// SnapshotSyncChunk is how much of a snapshot file may be written before its pages are pushed to
// disk. raft's snapshot store fsyncs the whole file when the snapshot is closed; with hundreds of
// megabytes still dirty at that moment the device queue fills and every Raft log fsync waits
// behind it (about 80ms at 1M znodes). Written out chunk by chunk instead, the final fsync has
// little left, and a log fsync waits at most for one chunk.
const SnapshotSyncChunk = 4 << 20

// chunkSyncer passes writes through to w and calls sync for each complete chunk of the output,
// with the chunk's offset and length, once that chunk has been written.
type chunkSyncer struct {
	w     io.Writer
	chunk int64
	sync  func(off, n int64)
	off   int64 // bytes written
	done  int64 // bytes handed to sync
}

func (c *chunkSyncer) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.off += int64(n)
	for c.off-c.done >= c.chunk {
		c.sync(c.done, c.chunk)
		c.done += c.chunk
	}
	return n, err
}

// snapshotFile opens the state file raft's FileSnapshotStore is writing for the snapshot id in its
// snapshots directory root (root/<id>.tmp/state.bin), to push its pages out while it is written. It returns
// nil when there is no such file (a layout this code does not know): the snapshot is then written
// as before, only without the pacing.
func snapshotFile(root, id string) *os.File {
	f, err := os.Open(filepath.Join(root, id+".tmp", "state.bin"))
	if err != nil {
		return nil
	}
	return f
}

// PersistSnapshot writes v into sink. A sink of the snapshot store Open returns pushes its file's
// pages out chunk by chunk as it grows (summingSink); paced, if not nil, is then called for each
// chunk pushed.
func PersistSnapshot(sink io.Writer, v *znode.View, paced func()) error {
	if k, ok := sink.(*summingSink); ok {
		k.paced = paced
	}
	bw := bufio.NewWriterSize(sink, 1<<16)
	if err := writeSnapshot(bw, v); err != nil {
		return err
	}
	return bw.Flush()
}
