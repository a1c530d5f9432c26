package storage

import (
	"os"
	"path/filepath"
)

// DiskUsage returns the bytes of the Raft log (everything under dir, a data directory's raft
// directory, but the snapshots) and of the snapshots, counting those being deleted.
func DiskUsage(dir string) (logBytes, snapshotBytes int64) {
	under := func(p, name string) bool {
		rel, err := filepath.Rel(filepath.Join(dir, name), p)
		return err == nil && filepath.IsLocal(rel)
	}
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		if under(p, snapshotsDirName) || under(p, reapDirName) { // the latter being deleted (reap.go)
			snapshotBytes += fi.Size()
		} else {
			logBytes += fi.Size()
		}
		return nil
	})
	return logBytes, snapshotBytes
}
