// Package clientmatrix holds the client × condition matrix: a test (matrix_test.go) that drives
// each real ZooKeeper client installed here — the Java client, Curator, kazoo, go-zookeeper,
// node-zookeeper-client and the C client through its shell cli_mt — through each condition zkd
// can put a client in (a full disk, a request or reply over jute.maxbuffer, a moved session,
// failed auth, a quota, no quorum, a read-only-allowing client, a server shutting down,
// reconfig disabled),
// against zkd and against real Apache ZooKeeper 3.8, and records per cell what the application
// saw, whether the client stayed usable, and whether it hung. On zkd a hang, a dead I/O thread
// or a non-idempotent write applied twice fails the test; on ZooKeeper (the reference) whatever
// happens is recorded.
//
// The result is the "Clients under adverse conditions" section of docs/compatibility.md,
// rewritten by `make client-matrix` and checked by `make client-matrix-check` (a step of its own
// in CI, .ci/run). It runs only then (or with CLIENTMATRIX=1): a few minutes of real clients
// whose cells depend on timing, so not among every package under the race detector in `make
// test`. Clients that are not installed skip; the doc is only written or checked when all are.
//
// # Drivers
//
// The C client is driven by cliDriver (climt_test.go), which turns the commands below into
// cli_mt lines and reads their return codes. Every other client but go-zookeeper runs as one
// long-lived driver process (testdata/Driver.java,
// driver.py, driver.js) that reads one command a line on stdin and
// answers one line, "ok [detail]" or "err <Name>" with the client's own name for what it saw:
//
//	connect <addrs> <timeoutMs> <readOnly 0|1>  ok <sessionIdHex> <passwdHex>
//	create <path> <bytes> <p|s|e>             ok <created path>
//	get <path>                                ok <data length>
//	children <path>                           ok <count>
//	addauth <scheme> <credentials>            ok
//	reconfig                                  ok (asks to remove server 99)
//	probe <path>                              ok: exists with a watch, create ephemeral, the
//	                                          watch delivered, delete
//	burst <dir> <n>                           ok <answered> <failed> <pending> <error names|->:
//	                                          n asynchronous sequential creates <dir>/n<i>-,
//	                                          waited for up to 8 s in all, then classified
//	                                          (pending: not completed, e.g. held by the client
//	                                          until it reconnects); kazoo adds <not issued>,
//	                                          calls still blocked in create_async
//	state                                     ok <state> <last event> [iothread=... | crashed=...]
//	close                                     ok
//
// A command that gets no answer within its deadline is a hang: the driver is killed and a fresh
// one serves the next condition.
package clientmatrix
