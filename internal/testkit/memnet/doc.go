// Package memnet is an in-memory network for in-process cluster tests: a consensus.Network
// (Listen, Dial) whose connections are buffered full-duplex byte streams in memory, so a whole
// cluster of consensus.Node can run inside a testing/synctest bubble on the bubble's fake clock.
//
// Contract, as TCP would have it:
//   - Listen("host:0") picks a free port; Listen of an address in use fails. Addresses are
//     "host:port" strings of network "memnet"; nothing is bound on the machine.
//   - Dial of an address nobody listens on, or whose listener closed, fails at once with
//     ECONNREFUSED (errors.Is(err, syscall.ECONNREFUSED)). A dial never waits for Accept.
//   - Each direction of a connection buffers up to BufferSize bytes; Write blocks only while
//     the buffer is full, so pipelined protocols do not lock step as on net.Pipe.
//   - Close of one end: the other end reads the bytes already written and then io.EOF, and its
//     writes fail (EPIPE). The closed end's own Read and Write fail with net.ErrClosed, and
//     calls blocked in them return.
//   - SetDeadline, SetReadDeadline and SetWriteDeadline work as on net.Conn: a call past its
//     deadline fails with an error that is os.ErrDeadlineExceeded and a net.Error whose
//     Timeout() is true.
//   - Listener.Close unblocks Accept (net.ErrClosed) and resets the connections still queued.
//   - Faults between named nodes (Node(name) returns a node's Network): Cut, CutOneWay,
//     Partition and Isolate refuse new dials over the cut links with ErrUnreachable and break
//     the connections that carry them, on both ends; Delay makes the bytes between two nodes
//     arrive later;
//     Heal restores every link.
//
// Every blocking call waits on channels only (never on a mutex held across a wait, never on a
// real socket or timer outside the caller's clock), so testing/synctest counts a goroutine
// blocked in Read, Write or Accept as durably blocked. Create a Net inside the bubble that uses
// it: the channels it makes belong to the bubble that made them.
//
// In a bubble the fake clock moves only while every goroutine of the bubble is durably blocked.
// A goroutine that waits on a sync.Mutex, on real I/O (a real socket's accept loop: use memnet
// listeners throughout), or never waits at all (a load generator without pauses) keeps the
// clock still, and with it every timer: elections, retries, deadlines. That is why a Delay
// delays delivery instead of making Write sleep: writers often write under a lock.
//
// It is test-only machinery; no production package imports it.
package memnet
