package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// SetAside renames the damaged state of a data directory (dataDir/raft) to
// dataDir/raft.damaged-<unix time>, for a cluster member that rebuilds from its leader, and
// starts a new one that keeps Raft's term and vote when those still verify (kept). The new
// directory holds no log and no snapshot.
func SetAside(dataDir string) (aside string, kept bool, err error) {
	dir := filepath.Join(dataDir, "raft")
	aside = fmt.Sprintf("%s.damaged-%d", dir, time.Now().Unix())
	carried := carryStable(filepath.Join(dir, walDirName, walMetaFileName))
	if err := os.Rename(dir, aside); err != nil {
		return "", false, fmt.Errorf("consensus: set the damaged directory aside: %w", err)
	}
	if len(carried) == 0 {
		return aside, false, nil
	}
	walDir := filepath.Join(dir, walDirName)
	if err := os.MkdirAll(walDir, 0o750); err != nil {
		return aside, false, fmt.Errorf("consensus: %w", err)
	}
	m := &walMetaFile{path: filepath.Join(walDir, walMetaFileName), doc: walMetaDoc{Stable: carried}}
	if err := m.write(); err != nil {
		return aside, false, err
	}
	return aside, true, nil
}

// carryStable returns Raft's term and vote from a WAL metadata file, as stored (with their
// checksum trailers), when the file and each value verify; nil otherwise.
func carryStable(path string) map[string][]byte {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	doc, err := decodeWALMeta(b)
	if err != nil {
		return nil
	}
	out := map[string][]byte{}
	for _, k := range append(append([][]byte{}, raftUint64Keys...), raftBytesKeys...) {
		raw, ok := doc.Stable[string(k)]
		if !ok {
			continue
		}
		if _, valid := openStable(k, raw); !valid {
			return nil
		}
		out[string(k)] = raw
	}
	return out
}
