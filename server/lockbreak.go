package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/zkd-io/zkd/consensus"
	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/znode"
)

// lockBreakTimeout bounds the write a lock_break command proposes.
const lockBreakTimeout = 10 * time.Second

// serveLockBreak answers the lock_break admin command, an operator's way out of a stuck lock:
//
//	POST /commands/lock_break?node=PATH            deletes the contender node PATH
//	POST /commands/lock_break?node=PATH&expire=true closes the session that owns PATH
//
// PATH is a contender node as the locks command lists it (ephemeral: owned by a session). Deleting
// it hands the lock to the next contender while the holder's session lives on; the holder's lock
// library sees its node deleted (recipes: Lease.Done, with Err wrapping ErrLockLost). Closing the
// session deletes every ephemeral node it owns and closes its connection, as an expiry does: the
// holder sees its node deleted or its session expired, whichever reaches it first (recipes:
// ErrLockLost or ErrSessionExpired). The caller needs ALL permission on
// / (as for snapshot: its address, or "Authorization: digest user:password"); the delete is made
// with the caller's identities, so the node's parent's ACL applies too. Every break is logged. It
// reports whether it wrote the answer itself (refusals with an HTTP status).
func (s *Server) serveLockBreak(w http.ResponseWriter, r *http.Request, out map[string]any) bool {
	refuse := func(status int, msg string) bool {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"command": "lock_break", "error": msg})
		return true
	}
	if r.Method != http.MethodPost {
		return refuse(http.StatusMethodNotAllowed, "lock_break changes the tree: send it as a POST")
	}
	if !s.cons.Serving() {
		out["error"] = strings.TrimSuffix(notServing, "\n")
		return false
	}
	q := r.URL.Query()
	node := q.Get("node")
	expire := q.Get("expire") == "true"
	v := s.view()
	ids := s.adminIDs(r)
	if !adminHasAll(v, ids) {
		return refuse(http.StatusForbidden, "the lock_break command needs ALL permission on / (Authorization: digest user:password)")
	}
	if err := znode.ValidatePath(node); err != nil {
		out["error"] = fmt.Sprintf("lock_break: node %q: %v", node, err)
		return false
	}
	st, ok := v.Stat(node)
	if !ok {
		out["error"] = "lock_break: no node " + node
		return false
	}
	if st.EphemeralOwner == 0 {
		out["error"] = "lock_break: " + node + " is not a lock contender (not an ephemeral node)"
		return false
	}
	sid := st.EphemeralOwner
	ctx, cancel := context.WithTimeout(r.Context(), lockBreakTimeout)
	defer cancel()
	p := consensus.Proposal{Auth: ids, Op: jute.OpDelete, Body: jute.Marshal(nil, &jute.DeleteRequest{Path: node, Version: -1})}
	how := "deleted the node"
	if expire {
		p = consensus.Proposal{Session: sid, Op: jute.OpCloseSession}
		how = "closed its session"
	}
	pd, err := s.cons.Start(ctx, p)
	if err == nil {
		var res znode.Result
		res, err = pd.Wait(ctx)
		if err == nil && res.Err != nil {
			err = res.Err
		}
		if err == nil {
			out["zxid"] = res.Zxid
		}
	}
	if err != nil {
		if codeFor(err) == jute.CodeNoNode {
			out["error"] = "lock_break: no node " + node
		} else {
			out["error"] = fmt.Sprintf("lock_break: %s: %v", node, err)
		}
		return false
	}
	s.log.Warn("admin broke a lock", "remote", r.RemoteAddr, "node", node, "session", fmt.Sprintf("0x%x", sid), "action", how)
	out["node"], out["session_id"], out["action"] = node, sid, how
	return false
}

// adminIDs are the identities the caller of an admin command presents: its address (ip scheme)
// and, from an "Authorization: digest user:password" header, a digest id (and super when it
// matches the super digest).
func (s *Server) adminIDs(r *http.Request) []jute.Id {
	var ids []jute.Id
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		ids = append(ids, jute.Id{Scheme: "ip", ID: host})
	}
	if scheme, cred, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && scheme == "digest" {
		if user, pass, ok := strings.Cut(cred, ":"); ok {
			id := znode.DigestID(user, pass)
			ids = append(ids, jute.Id{Scheme: "digest", ID: id})
			if s.cfg.SuperDigest != "" && id == s.cfg.SuperDigest {
				ids = append(ids, jute.Id{Scheme: "super"})
			}
		}
	}
	return ids
}

// adminHasAll reports whether ids have ALL permission on / in v.
func adminHasAll(v *znode.View, ids []jute.Id) bool {
	acl, ok := v.ACL("/")
	if !ok {
		return false
	}
	// Each permission on its own: an ACL check passes when any asked bit is granted, and ALL
	// means every one (ZooKeeper 3.9.4 fixed the same mistake, CVE-2025-58457).
	for _, perm := range []int32{jute.PermRead, jute.PermWrite, jute.PermCreate, jute.PermDelete, jute.PermAdmin} {
		if !znode.CheckACL(acl, ids, perm) {
			return false
		}
	}
	return true
}
