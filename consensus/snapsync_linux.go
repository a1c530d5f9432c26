package consensus

import (
	"os"
	"syscall"
)

// sync_file_range flags (linux/fs.h).
const (
	syncFileRangeWaitBefore = 1
	syncFileRangeWrite      = 2
	syncFileRangeWaitAfter  = 4
)

// writeOut starts writeback of the file range and waits for it, without the metadata commit an
// fsync would add; the snapshot store's final fsync still makes the file durable.
func writeOut(f *os.File, off, n int64) {
	_ = syscall.SyncFileRange(int(f.Fd()), off, n, syncFileRangeWaitBefore|syncFileRangeWrite|syncFileRangeWaitAfter)
}
