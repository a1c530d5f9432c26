//go:build !linux

package storage

import (
	"errors"
	"os"
)

// writeOut is a no-op where sync_file_range does not exist: the snapshot store's final fsync
// writes the whole file.
func writeOut(*os.File, int64, int64) {}

// renameNoReplace is not offered where renameat2 does not exist; the segment pool that needs it
// is used on Linux only.
func renameNoReplace(from, to string) error {
	return &os.LinkError{Op: "rename", Old: from, New: to, Err: errors.ErrUnsupported}
}
