package consensus

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// rebuildAfterDamage is Config.RebuildOnDamage: the damaged raft directory is set aside whole
// (for the operator to inspect), a new one carries over the term and the vote if the damaged
// metadata still verifies them (so that this member cannot vote twice in a term), and the node
// opens again as a member-to-be that the leader fills by snapshot and log.
//
// The risk it takes, which is why it is not the default: this member may have held entries that
// a majority needed; until it has caught up it counts in elections without them.
func (n *Node) rebuildAfterDamage(d *DamageError) error {
	if n.store != nil {
		n.store.Close()
		n.store = nil
	}
	dir := filepath.Join(n.cfg.Dir, "raft")
	aside := fmt.Sprintf("%s.damaged-%d", dir, time.Now().Unix())
	carried := carryStable(filepath.Join(dir, walDirName, walMetaFileName))
	if err := os.Rename(dir, aside); err != nil {
		return fmt.Errorf("consensus: set the damaged directory aside: %w (the damage: %w)", err, d)
	}
	n.log.Error("the data directory is damaged; set it aside and rebuilding from the leader (RebuildOnDamage)",
		"damage", d.Error(), "set_aside", aside, "term_and_vote_kept", len(carried) > 0)
	if len(carried) > 0 {
		walDir := filepath.Join(dir, walDirName)
		if err := os.MkdirAll(walDir, 0o750); err != nil {
			return fmt.Errorf("consensus: %w", err)
		}
		m := &walMetaFile{path: filepath.Join(walDir, walMetaFileName), doc: walMetaDoc{Stable: carried}}
		if err := m.write(); err != nil {
			return err
		}
	}
	n.cfg.NoBootstrap = true
	n.cfg.Listener = n.ln // already listening
	return n.open()
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
