package consensus

import (
	"os"
	"path/filepath"
	"slices"
)

// The on-disk names the tests look for, spelled out: they are a format older versions wrote and
// newer ones must keep reading, so a rename in internal/storage should fail these tests.
const (
	walDirName       = "wal"            // raft-wal's directory under dataDir/raft
	walMetaFileName  = "wal-meta.zkd"   // its metadata file
	walMetaName      = "wal-meta.db"    // raft-wal's own metadata file, before migration
	migratedExt      = ".migrated"      // what a migrated store's old files are renamed with
	metaSumName      = "meta.sum"       // a snapshot's checksum of its metadata
	spareSuffix      = ".spare"         // a segment file kept for reuse
	diskReserveName  = "reserve"        // the disk guard's reserve file in the wal directory
	boltName         = "raft.db"        // the bbolt log store of earlier versions
	snapshotsDirName = "snapshots"      // raft's snapshot store
	reapDirName      = "snapshots.reap" // snapshots being deleted
)

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// lastSegment returns the newest segment file of the raft-wal log in walDir ("" when none):
// segment names start with their first index, zero-padded.
func lastSegment(walDir string) string {
	segs, _ := filepath.Glob(filepath.Join(walDir, "*.wal"))
	if len(segs) == 0 {
		return ""
	}
	slices.Sort(segs)
	return segs[len(segs)-1]
}
