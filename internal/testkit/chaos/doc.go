// Package chaos is a black-box fault test for ZooKeeper ensembles: three server processes (zkd,
// or real Apache ZooKeeper 3.8 as the oracle) each in its own Linux network namespace, clients
// in the test's namespace, a seeded nemesis that kills, pauses, partitions, isolates and
// throttles servers and stops, kills and cuts off lock holders, and checks of the guarantees
// ZooKeeper documents on the recorded history and on full tree dumps read from every server.
//
// # Topology
//
// Per run: a bridge in the root namespace holding 10.a.b.254/24 (a private /24 nobody else uses
// on this machine), and per server i a namespace holding 10.a.b.i, joined to the bridge by a veth
// pair. Every name (bridge, namespace, veth) embeds the test process's PID, so that a later run
// finds and deletes what a dead run left behind (Sweep). Faults are made with ip and tc only:
// blackhole routes (a partition between servers that clients do not see), a veth set down
// (complete isolation), a tbf qdisc (a slow link), SIGKILL, SIGSTOP and SIGCONT by PID.
//
// # Workloads and checks
//
//   - registers: CAS and unconditional setData on a few znodes, checked for linearizability with
//     porcupine (writes only: ZooKeeper reads are sequentially consistent, not linearizable),
//     and reads checked for per-session monotonicity.
//   - FIFO: raw clients pipeline sequential creates and reattach their session elsewhere after a
//     connection loss (a new epoch). Per epoch the applied writes are a prefix of those sent,
//     czxids follow the send order across epochs, no acknowledged write is lost, none is applied
//     twice.
//   - session end: every session owns an ephemeral marker alone under its own parent; once the
//     marker is gone, the parent's pzxid is the session's close zxid, and nothing the session
//     wrote may carry a later zxid.
//   - ephemerals: once every session is closed or expired, none of their ephemerals remain.
//   - fencing: holders of the recipes lock write their token with a guarded multi; tokens never
//     decrease as the resource's version grows. Holders also write to an external resource (in
//     the test) that refuses a token lower than one it took, and some pause mid-section past
//     their session's timeout (their client stopped, as SIGSTOP or a long GC pause stops a
//     process) and write on when they resume: the report counts the critical sections that
//     overlapped in time (what a resource without fencing would have let through) and the writes
//     the fence refused. Two more contenders run in processes of their own (the test binary again,
//     lockproc.go), reaching the servers through proxies of the test: the nemesis stops the one
//     holding the lock with SIGSTOP past its session timeout, kills it with SIGKILL (a new process
//     takes its place), or cuts it off from every server on its own, and their sections and
//     writes count in the same checks.
//   - convergence: every server ends with the same zxid and an identical full tree dump.
//   - time to serve: after each heal, how long each server takes to serve a fresh client.
//
// # Running
//
// TestFaults needs root (it skips, loudly, without working network namespaces). `make test`
// runs one short mix against zkd (about 100s of faults, 2-3 minutes in all); `make chaos` runs a
// long mix against zkd and, when Debian's zookeeper package is installed, real ZooKeeper.
// Environment: CHAOS_TARGET (zkd, zookeeper or both comma-separated), CHAOS_DURATION (faults
// per run), CHAOS_RUNS (runs per target), CHAOS_SEED (replay: the seed is the test's first log
// line), CHAOS_ZKD_BIN (a prebuilt zkd instead of building cmd/zkd). A failing run keeps its
// directory (server logs and data, clients.log) and logs its path.
//
// This is test machinery: only tests use it, never production code (internal/lint).
//
// # Concurrency
//
// A Run owns every goroutine it starts (workload clients, their connection readers, probes)
// and waits for all of them before it returns. Records are guarded by their owner's mutex
// and only read by the checks once the run's goroutines have finished.
package chaos
