// Package consensus is zkd's replicated znode state machine: hashicorp/raft (the fork in
// internal/third_party/raft) over a znode.Tree. A standalone server is a one-voter cluster, so
// there is one code path for all. It owns the FSM, the log entry encoding, proposing and waiting
// for the local apply, forwarding writes from followers, the read index behind sync, session
// liveness and expiry on the leader, reaping TTL nodes and containers, membership, snapshots
// and recovery. Files on disk belong to internal/storage; it knows nothing of client
// connections or the wire protocol beyond the request bytes it carries.
//
// Use (the server's side):
//   - New(Config) starts a node: it bootstraps a single voter or the static cluster in
//     Config.Peers when Config.Dir holds no state (Dir "" keeps everything in memory), restarts
//     from the state otherwise, or, with NoBootstrap, waits for a cluster to add it. Shutdown
//     stops everything it started. Memory is the in-memory twin for tests: the same entries,
//     FSM, hooks and session rules without Raft, network or disk.
//   - Peers share one listener; a connection's first byte picks Raft's transport (0x01) or the
//     cluster RPC (0x02), and with Config.TLS every peer connection is mutual TLS (internal/peernet).
//   - Writes: Propose, or Start then Pending.Wait to pipeline a session's writes in order. The
//     request body goes in as the client sent it and is decoded once, when applied; a write
//     returns only after this node applied it, so the session reads its own write and the
//     watch events queued by Config.OnApply precede the reply. Each write has one Pending,
//     completed exactly once by whoever learns the outcome first.
//   - Errors: ErrNoLeader and ErrBadRequest (nothing proposed), ErrUnknownOutcome (proposed; it
//     may commit), ErrSessionMoved, ErrDiskFull, ErrShutdown. Start retries, with jitter, only
//     while nothing can have been proposed. At most Config.MaxOutstanding proposals are
//     outstanding; Start blocks beyond that.
//   - Hooks: Config.OnApply runs on every node for every transaction in zxid order on the FSM
//     goroutine, the batch's last with the published view; Config.OnRestore after a snapshot
//     replaced the tree; Config.OnServing when the serving signal (Serving) changes. None may
//     block for long.
//   - Reads: View() is the current immutable view; Sync is ZooKeeper's sync (a read index from
//     the leader, then a wait for the local apply); WaitApplied waits for a zxid.
//   - Sessions: CreateSession (the leader picks id, password and attachment token), Touch (pings,
//     batched to the leader, never logged), ValidateSession on every reattach (the leader records
//     the owner; a write through a stale server fails with ErrSessionMoved). The session rules are
//     enforced in znode's Apply on every replica; only the leader holds deadlines and proposes
//     expiry.
//   - Membership: AddVoter, RemoveServer, TransferLeadership, Members, Leader, IsLeader.
//     Snapshot, Stats and Metrics for operators.
//
// Decisions (docs/architecture.md has the reasons): a transaction's zxid is its Raft log index,
// so zxids grow across leaders, restarts and snapshots with nothing else stored; an entry whose
// type a server cannot decode and is not marked ignorable stops that server rather than let
// replicas diverge; snapshots are taken every SnapshotThreshold operations or SnapshotBytes of
// entries, from an O(1) view, while applies go on.
//
// Shape: Node is the public face and owns the lifecycle; each concern is a component with a
// back-pointer to it: proposals (propose.go: the writes on their way), leadership (the serving
// signal, membership check, read index), sessionKeeper (keeper.go: touches, attachment tokens,
// expiry and reaping), forwards (peers' writes to a leader), relay and announcement (commits
// passed on), diskGuard and metrics.
//
// Concurrency: Node's methods are safe for concurrent use. The FSM runs on Raft's one FSM
// goroutine and tells the node what it did through one fsmObserver (observer.go); the tree is
// read through atomic views. Node.mu guards the RPC clients and peer connections, proposals.mu
// the proposal table; neither is held while calling Raft or the network; lock order rpcClient.mu
// then Node.mu; sessionTracker.mu and applyWait.mu are leaves. Every goroutine is started by New
// or Node.goTracked and waited for by Shutdown, except waitFuture's helper, which may stay parked
// on a future raft v1.7.3 never answers after shutdown (it holds nothing).
package consensus
