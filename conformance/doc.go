// Package conformance is a server-agnostic ZooKeeper conformance suite. Its checks talk to a server
// only over the network: through the standard Go client (github.com/go-zookeeper/zk) and, for what
// that client cannot send, through Raw, a small frame-by-frame client built on the jute package.
//
// A check that fails on real Apache ZooKeeper is a wrong check: every check is proven against
// ZooKeeper 3.8 (and accepts 3.9's behaviour where the two differ, logging which one it saw).
//
// # Targets
//
// The suite runs against every Target in the list the tests build:
//
//   - CONFORMANCE_ADDR=host:port[,host:port...] runs it against any running server;
//     CONFORMANCE_CAPS=ttl,reconfig,4lw,fastreap,super=user:password declares the server-side
//     switches it has on (fastreap: empty containers and expired TTL nodes are reaped within seconds).
//   - otherwise a real standalone ZooKeeper is started on loopback (internal/testkit/zktest) when one is
//     installed, and with CONFORMANCE_ZK_ENSEMBLE=1 a real 3-server ensemble as well;
//   - the in-process zkd targets (standalone and a 3-node cluster) plug into inProcessTargets
//     in targets_test.go.
//
// # Interop and cluster checks
//
// TestKazooRecipes runs testdata/kazoo_recipes.py (Debian's python3-kazoo) against every target: two
// kazoo clients contend for Lock, ReadLock/WriteLock, Semaphore and Election; it skips when no
// python3 imports kazoo. TestClusterFailover starts a 3-node zkd cluster of its own and closes its
// leader in the middle of a session's work; it runs only in the zkd-cluster row. TestReaping needs
// the fastreap capability (the in-process zkd targets reap every reapInterval).
//
// # Naming
//
// Test names have the shape Test<Area>/<target>/<check>, for example
// TestWatches/zookeeper/exists_watch_on_missing_node_fires_NodeCreated. A compatibility matrix is
// built from `go test -json` output: the row is <Area>/<check>, the column is <target>, the cell is
// the test's pass, fail or skip action. The matrix command (conformance/matrix) renders it:
//
//	go test -json ./conformance/... | go run ./conformance/matrix > docs/compatibility.md
//
// # Differential mode
//
// TestDifferential sends the same scripts (diffScripts) to the reference ZooKeeper and to every
// other target, normalises the replies (zxids by order of appearance, times, session ids and each
// run's base path) with RunScript, and fails with a field-by-field Diff. With the reference alone
// it runs every script twice on it, which proves the normalisation. Accepted differences are listed
// with their reason in knownDifferences. Its test names are TestDifferential/<target>/<script>.
//
// # Environment
//
//   - CONFORMANCE_ADDR, CONFORMANCE_CAPS: run against a given server (see Targets).
//   - CONFORMANCE_REFERENCE=1: the CONFORMANCE_ADDR server is a real ZooKeeper to compare with.
//   - CONFORMANCE_ZK_ENSEMBLE=1: also start a real 3-server ZooKeeper ensemble.
//   - CONFORMANCE_KEEP_DIR=1: keep the started ZooKeeper's files (logs) for inspection.
//
// Raw is safe for use by one goroutine at a time.
package conformance
