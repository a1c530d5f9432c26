package raft

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
)

// OpenUnverified is Open without the pass over the whole state file that compares it with the
// CRC-64 in its metadata: for a caller whose snapshot format checks itself as it is read, that
// pass reads and hashes the file once more before it can be used (zkd's fork; see ZKD.md).
func (f *FileSnapshotStore) OpenUnverified(id string) (*SnapshotMeta, io.ReadCloser, error) {
	meta, err := f.readMeta(id)
	if err != nil {
		f.logger.Error("failed to get meta data to open snapshot", "error", err)
		return nil, nil, err
	}
	fh, err := os.Open(filepath.Join(f.path, id, stateFilePath))
	if err != nil {
		f.logger.Error("failed to open state file", "error", err)
		return nil, nil, err
	}
	return &meta.SnapshotMeta, &bufferedFile{bh: bufio.NewReader(fh), fh: fh}, nil
}
