package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/zkd-io/zkd/consensus"
	"github.com/zkd-io/zkd/znode"
)

// The snapshot admin command (ZooKeeper 3.9's): GET /commands/snapshot?streaming=true answers
// with the whole tree as a backup (consensus.WriteBackup: every znode with its Stat, the sessions
// and the zxid, checksummed), taken from one published view, so it is consistent at one zxid
// without stopping writes. Like ZooKeeper, it needs ALL permission on / for the caller, who
// authenticates with an "Authorization: digest user:password" header (or by address, with the
// ip scheme), and it runs at most once per Config.AdminSnapshotInterval. zkd backup uses it.

// serveSnapshot answers the snapshot command; it reports false when the answer is JSON (an error)
// that serveCommand writes.
func (s *Server) serveSnapshot(w http.ResponseWriter, r *http.Request, out map[string]any) bool {
	switch {
	case s.cfg.AdminSnapshotDisabled:
		out["error"] = "snapshot command is disabled (admin.snapshot.enabled=false)"
		return false
	case r.URL.Query().Get("streaming") != "true":
		out["error"] = "the snapshot command streams its answer: ask with streaming=true"
		return false
	case !s.cons.Serving():
		out["error"] = strings.TrimSuffix(notServing, "\n")
		return false
	}
	v := s.view()
	if !s.adminAllowed(r, v) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_ = json.NewEncoder(w).Encode(map[string]any{"command": "snapshot",
			"error": "the snapshot command needs ALL permission on / (Authorization: digest user:password)"})
		return true
	}
	if wait := s.snapshotWait(); wait > 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_ = json.NewEncoder(w).Encode(map[string]any{"command": "snapshot",
			"error": fmt.Sprintf("a snapshot was taken less than %v ago (admin.snapshot.intervalInMS); try again in %v",
				s.cfg.AdminSnapshotInterval, wait.Round(time.Second))})
		return true
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("last_zxid", fmt.Sprintf("0x%x", v.Zxid()))
	if err := consensus.WriteBackup(w, v); err != nil {
		s.log.Warn("admin snapshot: writing the answer failed", "remote", r.RemoteAddr, "err", err)
	}
	s.log.Info("admin snapshot taken", "remote", r.RemoteAddr, "zxid", v.Zxid(), "znodes", v.NodeCount())
	return true
}

// adminAllowed reports whether the caller of an admin command has ALL permission on / by the
// credentials it sent (adminIDs).
func (s *Server) adminAllowed(r *http.Request, v *znode.View) bool {
	return adminHasAll(v, s.adminIDs(r))
}

// snapshotWait returns how long until the next snapshot may be taken, or 0 and records this one.
func (s *Server) snapshotWait() time.Duration {
	s.lastSnapshot.Lock()
	defer s.lastSnapshot.Unlock()
	if at := s.lastSnapshot.at; !at.IsZero() && s.cfg.AdminSnapshotInterval > 0 {
		if wait := s.cfg.AdminSnapshotInterval - time.Since(at); wait > 0 {
			return wait
		}
	}
	s.lastSnapshot.at = time.Now()
	return 0
}
