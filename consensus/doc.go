// Package consensus is zkd's replicated, durable znode state machine: hashicorp/raft over a
// znode.Tree. A standalone server is a one-voter cluster, so there is one code path for all.
//
// # What it owns, and what it must not do
//
// It owns Raft (hashicorp/raft v1.7.3, raft-boltdb/v2 on bbolt), the FSM over znode, the log
// entry encoding, proposing and waiting for the local apply, forwarding writes from followers to
// the leader, the read index behind sync, session liveness and expiry on the leader, reaping of
// TTL nodes and containers on the leader, membership changes, snapshots and recovery. It knows
// nothing about client connections or the client wire protocol beyond the request bytes it carries.
//
// # Using a Node (the server's side)
//
//   - Start: New(Config). With no Raft state in Config.Dir (or Dir == "", in-memory stores for
//     tests and embedding) it bootstraps a single voter, or the static cluster in Config.Peers
//     (every member bootstraps with the same list). With state on disk it restarts from it.
//     Config.NoBootstrap starts a member-to-be that an existing cluster adds with AddVoter.
//     Shutdown stops everything it started and closes the stores.
//   - Peer networking: one listener (Config.Listener, or Config.Network.Listen(Config.Addr)). The
//     first byte of every peer connection is 0x01 (Raft's NetworkTransport) or 0x02 (the cluster
//     RPC: forwarded writes, read index, touches, session validation, membership). Config.Network
//     dials peers; tests plug internal/raftnet in to cut and slow links under both. With
//     Config.TLS (PeerTLS) every connection is mutual TLS above Network: a first byte of 0x16
//     starts the handshake and the type byte follows inside it; plaintext is refused unless
//     PeerTLS.AcceptPlaintext (a rolling upgrade). Accepted peers must present a certificate the
//     trust store accepts, come from a configured member's host and be named for it (peertls.go).
//   - Writes: Propose(ctx, Proposal{Session, Auth, Attach, Seq, Op, Body}) with the request body
//     exactly as the client sent it. Start marshals the log entry once (copying the body); the
//     leader only writes its wall-clock time into it, and a follower forwards the entry's bytes
//     to the leader over the cluster RPC. The body is decoded once, when the entry is applied: a
//     body that does not decode is a failed write (MarshallingError), as in ZooKeeper. Propose
//     returns the znode.Result (Result.Err carries ZooKeeper's error code for a failed write,
//     which still got a zxid) only after THIS node's FSM applied the entry, so the session reads
//     its own write and watch events, queued by the apply hook, precede the reply. To pipeline one
//     session's writes call Start in request order and Pending.Wait afterwards: consecutive
//     Starts of one session get increasing zxids.
//   - One record per write: the Pending that Start returns is registered before the entry is
//     submitted and completed exactly once (finish) by whichever learns the outcome first: this
//     node's FSM applying it (deliver), the leader's reply to a forward (a callback on the RPC
//     client's reader), the raft future of a write proposed here and not applied within 100ms
//     (runWatcher), a snapshot install that skipped it, or Shutdown. The leader answers a
//     forwarded write from its FSM too: the answers of one applied batch leave on each peer
//     connection in one write (forwards.go).
//   - Errors: ErrNoLeader (nothing was proposed; no leader within HoldTimeout), ErrBadRequest
//     (not a write, or too large; nothing proposed), ErrUnknownOutcome (proposed; it may or may
//     not commit: the server reports connection loss), ErrSessionMoved, ErrShutdown. Start retries,
//     with jitter, only while nothing can have been proposed. At most Config.MaxOutstanding
//     proposals per node are outstanding; Start blocks beyond that.
//   - Acting through the leader: writes, read index, session validation and membership changes
//     all go through onLeader (run here when leading, else a typed cluster-RPC message to the
//     leader; retried with one jitter source while nothing was done).
//   - Apply hook: Config.OnApply(zxid, *znode.Result, *znode.View) runs on every node, for every
//     transaction, in zxid order, on the FSM goroutine, before the proposer's Propose returns;
//     an applied batch is published at once, so the view comes with the batch's last transaction
//     (nil before it) and holds them all; Result.Closed lists the sessions it closed. It
//     must not block for long (it delays every later apply); queue, do not deliver, there.
//     Config.OnRestore tells the server that a snapshot replaced the tree (close client
//     connections: their watches may have missed events).
//   - Memory is Node's in-memory twin (as raft.InmemTransport is the network transport's): the
//     same entries, FSM, hooks and session rules without Raft, network or disk, each write applied
//     inside Start. Its session deadlines run on time.Now and tickers, so tests in a
//     testing/synctest bubble control them.
//   - Reads: View() is the current immutable znode.View (O(1)); take the reply zxid from the same
//     view. LastZxid() is the last applied zxid. Sync(ctx) is ZooKeeper's sync: a read index from
//     the leader (note its commit index, confirm leadership with a heartbeat round, round down to
//     the newest command entry) and then a wait until this node applied it. WaitApplied(ctx, zxid)
//     waits for a zxid, e.g. for a client that has seen a newer zxid than this node.
//   - Sessions: CreateSession(ctx, timeoutMs) (the leader picks the id: a server byte then a
//     time-based counter, positive, never 0x8000000000000000; a random 16-byte password; and the
//     token of the attachment the session starts on). Touch(ids...) records client pings;
//     touches go to the leader in batches every TickTime/2 and are never logged.
//     ValidateSession(ctx, id) asks the leader whenever a client reattaches; the leader records
//     this server as the session's owner (a write that still arrives through the old server fails
//     with ErrSessionMoved, nothing proposed, so that server closes the stale connection, as
//     ZooKeeper does) and returns a new attachment token. Closing a session is a Propose with Op
//     closeSession.
//   - Session rules, enforced in Apply on every replica (znode.Txn): a client write of a session
//     that is gone is refused with SessionExpired; a write carrying an attachment token and its
//     position there (Proposal.Attach, Proposal.Seq) is applied only right after its predecessor
//     on that attachment, or as the first write of a later attachment, and is otherwise refused
//     with SessionMoved. Tokens are the leader's term and a count within it, so they grow across
//     leaders without being stored. Start resubmits a write that was not proposed only when it is
//     its session's one unsettled proposal here. Only the leader holds
//     deadlines; it proposes expiry as one transaction closing the sessions and deleting their
//     ephemerals; a new leader gives every session a full timeout once its FSM caught up.
//   - Housekeeping on the leader: every Config.ReapInterval it asks View.ReapCandidates for
//     expired TTL nodes and empty containers and proposes one reap transaction.
//   - Membership: AddVoter, RemoveServer, TransferLeadership (forwarded to the leader), Members.
//     A removed server may never receive the entry that removes it (the leader stops replicating
//     to it at once), so a member without a leader asks its peers for their configuration
//     (rpcMembers) and logs that it was removed when one that follows a leader leaves it out.
//     Snapshot takes a snapshot now. IsLeader reports an established leader (its FSM caught up
//     in its current term); Leader returns the leader's id and peer address.
//   - Serving signal: Serving() and Config.OnServing. True on a leader once it has taken over, and
//     on a follower that hears from its leader and completed a read index since it last stopped
//     serving. A server closes its clients and refuses new ones while it is false.
//   - Stats() returns counters for four-letter words and metrics; Metrics() the measurements made
//     where the work happens (log appends and fsyncs, applies, commits, elections, snapshots).
//
// # zxid = Raft log index
//
// A transaction's zxid is the Raft index of its entry. Every replica sees the same index for the
// same entry, and indexes only grow: across terms (a new leader continues the log), restarts and
// snapshot installs (the applied index restarts at the snapshot's). Failed writes consume an
// index, as failed writes consume a zxid in ZooKeeper. Raft's own no-op, configuration and
// barrier entries leave gaps, which clients do not mind: they only need zxids to grow. A separate
// counter would have to be persisted and restored in step with the log for no gain. The epoch
// (zxid>>32) stays 0 until 2^32 entries; it is cosmetic. The FSM tracks its own last applied
// zxid (Raft's AppliedIndex counts entries handed to the FSM, including non-commands), and
// snapshots carry it.
//
// # Log entries
//
// One client transaction per entry (a multi is one transaction): a type byte whose 0x80 bit says
// "an older server may skip this", a format version, the leader's time, the session, the
// proposer's tag and sequence number (to route the result to the waiting Propose), the op, the
// caller's auth ids and the jute request body. Validation happens at apply time, in znode,
// deterministically. An entry a server cannot decode, of a type without the ignorable bit, stops
// that server (panic): continuing would let replicas diverge.
//
// # Storage and timing
//
// Dir/raft/wal holds the log and stable store (hashicorp/raft-wal: segment files, one fsync per
// append batch; its metadata in a small bbolt file), behind a 512-entry log cache; every append
// is fsynced before anything is acknowledged. Dir/raft/LOCK is flocked while a Node runs.
// LogStoreBolt selects raft-boltdb/v2 in Dir/raft/raft.db instead (NoFreelistSync and the map
// freelist: the defaults made appends about 10x slower after a burst was truncated); a directory
// holding only raft.db is migrated to the WAL by default. Dir/raft/snapshots holds
// FileSnapshotStore snapshots (2 kept).
// A snapshot is taken every SnapshotThreshold operations (100k by default, ZooKeeper's snapCount,
// not Raft's 8192; each operation of a multi counts, so a bulk load by multis does not leave a
// long replay) or SnapshotBytes of entries (by default 256 MiB or twice the tree's data size,
// whichever is larger: a snapshot rewrites the whole tree, and with large values a small fixed
// size spent a fifth of the CPU on it), whichever comes first, from an O(1) znode.View and
// written in the background while applies continue.
// hashicorp/raft is the fork in internal/third_party/raft (v1.7.3 with the changes its ZKD.md
// lists: a byte-bounded log cache, in-process delivery for the commit relay, and the sole
// voter's immediate election).
// It is based on v1.7.3 because v1.8.0 does not build with raft-boltdb/v2 v2.3.1
// (raft 1.8 needs go-metrics v0.7, which dropped the compat package raft-boltdb imports); 1.8's
// only addition, restoring committed logs at start, needs a log store raft-boltdb does not provide.
// A node bootstrapped alone (standalone) is its configuration's only voter: the fork has it stand
// for election at once instead of after a heartbeat timeout (a start to its first acknowledged
// write, in memory, went from 0.7s with zkdtest's 500ms timeout to 6ms; BenchmarkStart in
// server/zkdtest). It defaults to a 40ms HeartbeatTimeout, and it meets its lease by itself, so
// its lease is the whole 40ms and its serving signal is polled every 100ms (idle CPU 2.2% -> 0.7%).
// Otherwise LAN timings by default: HeartbeatTimeout = ElectionTimeout = 300ms, LeaderLeaseTimeout 150ms,
// CommitTimeout 50ms, raft's default (followers learn commits from the leader's announcements,
// relay.go; at 2ms, needed before them, the idle AppendEntries cost an idle 3-node cluster's
// leader 15% of a core and each follower 5%, against 4% and 1.4% now), and a buffered apply channel (BatchApplyCh) so forwarded writes join the
// leader's group commits: writes resume about a second after a leader dies. Raft's AppendEntries
// pipelining is off (MaxRPCsInFlight 1): on a LAN it gains little, and v1.7.3's pipeline can
// wedge replication when its connection fails mid-stream. Measured on the project's 2-core test
// machine (3 nodes, zkbench create, 32 clients): with 4 in flight, and even with the follower
// storing the requests queued on its connection together (1.2 per fsync), the leader's time from
// appending an entry to applying it stayed at 1.4-1.6 ms, as without. What bounds it there is
// the time a message takes to wake its receiver while four processes share two cores: a
// heartbeat, which a follower answers without its Raft loop, took 1.3 ms there and back, against
// 0.36 ms for a follower to handle an AppendEntries, fsync included. With one write at a time,
// waking and parking threads is a large part of what a write costs: per write (zkbench set, 1
// client, perf stat on each server) the leader and a follower each switched context about 11
// times and made 3-4 nanosleeps (threads spinning for work), 3-4 futex calls and about 4 epoll
// waits beside the reads and writes of their messages; in CPU profiles the scheduler and its
// futex wake-ups are 13-20% of each server's CPU, the fsync 17-25%. The lock workload hands a lock
// on with two writes one after the other and costs close to two such writes per lock. At 32
// clients, raft's msgpack encoding and decoding of AppendEntries and their answers was 8-9% of each
// server's CPU in profiles (a binary encoding for them did not pay in an A/B:
// docs/performance.md).
//
// What the same machine allows a 3-node write: zkbench's replicated floor
// (cmd/zkbench/floorrepl.go; node 1 logs each batch, sends it to the other two and answers once
// one of them has it durable, with no Raft, tree or clients on the others) made 29k creates or
// setData a second with 32 clients, 4.5× and 4.0× ZooKeeper, at 31-34 µs of CPU per write for the
// three processes; zkd made 12.4k and 14.3k at 111 and 89 µs (docs/benchmarks.md of 2026-11-27).
// Each node of either fsyncs some 1.1-2k times a second, but a floor batch carries about 16 writes
// where zkd's leader stores about 7 per fsync and its followers 13 (perf stat -e
// syscalls:sys_enter_fsync, setData at 32 clients, about 14k/s): the leader stores what its apply
// channel holds each time its previous fsync returns. An fsync costs this virtual machine about 70
// µs of CPU, so the three nodes' fsyncs cost zkd about 21 µs of its 92 per write and the floor 13
// of its 31: most of the difference is not in syncing but in the work zkd does per message and per
// write. With every client on the leader (CLUSTER_PROFILE_LEADER_ONLY=1
// scripts/bench/cluster-profile.sh) zkd made 13.9-17.8k setData a second (median 16.0k) against
// 12.7-14.2k (median 13.9k) with them spread: forwarding through followers costs about an eighth,
// and the rest of the gap to the floor is Raft's and zkd's own work per message and per batch.
// Applying is part of it: every zkd server applies every write, where the floor's other nodes
// only log. The FSM applies each committed batch as one znode.Batch, so a batch's writes under one
// parent copy the parent and its ancestors once; that took the FSM's CPU per setData from 6.2 to
// 3.8 µs on the leader and from 5.0 to 3.5 µs on a follower (cluster-profile, every client on the
// leader, 32 clients, about 13.5k/s).
//
// # Concurrency and locks
//
// Node methods are safe for concurrent use. The FSM runs on Raft's single FSM goroutine; the tree
// is read through atomic views. Locks: Node.mu guards the proposal table, RPC clients and touch
// batch and is never held while calling Raft or the network; order: rpcClient.mu → Node.mu
// (a client starts its reader through goTracked while dialling), never the reverse;
// sessionTracker.mu and applyWait.mu are leaves. Every goroutine is started by
// Node.goTracked (or New) and waited for by Shutdown, with one exception: hashicorp/raft v1.7.3
// leaves some futures unanswered when it shuts down (apply futures still in the buffered apply
// channel, verify futures), so waits on raft futures go through Node.waitFuture, whose helper
// goroutine may stay parked on such a dead future after Shutdown (it holds nothing).
//
// Writes proposed here as leader complete when the FSM applies them; one goroutine, runWatcher,
// sees them go by, instead of a goroutine per write waiting on its raft future (that cost about a
// fifth of the server's CPU on a standalone write load). A write still unapplied after 100ms gets,
// with those queued behind it, a goroutine of its own that reads its future.
package consensus
