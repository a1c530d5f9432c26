package consensus

import (
	"fmt"

	"github.com/zkd-io/zkd/internal/storage"
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
	aside, kept, err := storage.SetAside(n.cfg.Dir)
	if err != nil {
		return fmt.Errorf("%w (the damage: %w)", err, d)
	}
	n.log.Error("the data directory is damaged; set it aside and rebuilding from the leader (RebuildOnDamage)",
		"damage", d.Error(), "set_aside", aside, "term_and_vote_kept", kept)
	n.cfg.NoBootstrap = true
	n.cfg.Listener = n.ln // already listening
	return n.open()
}
