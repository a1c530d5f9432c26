// Package server is zkd's client-facing ZooKeeper server: the TCP protocol existing ZooKeeper
// clients speak, on top of a consensus node that replicates the znode tree with Raft.
//
// A Server owns one client listener. Each connection has a reader, which performs the handshake
// and then admits requests in arrival order (handling auth on arrival and handing writes to
// consensus at once, so one connection can have many writes in flight); an executor, which
// completes the admitted requests in the same order (waiting for each write's result, executing
// reads only after every earlier write was applied here); and a writer. Only the reader lives as
// long as the connection: the executor and the writer run while they have work, so an idle
// connection holds one goroutine. A
// write is started only after the reads admitted before it have executed, so a read never sees a
// later write of its own session. Replies, ping replies and watch notifications are encoded into
// one ordered per-connection buffer; whoever takes it writes it in one write, one goroutine at a
// time: the writer, or the reader for a read it answered itself (a non-blocking write; what the
// socket does not take goes back to the writer). Every connection
// ends with one logged and counted reason (closereason.go). So replies leave in request order, a session's reads
// never overtake its writes, and a notification for a change is queued before any reply that
// reflects it: writes complete only once this server applied them, and the consensus apply hook
// queues watch events before it publishes the view reads are served from.
//
// Reads are served from immutable znode views, in parallel with apply. Watches belong to
// connections, never to the replicated state; they are dropped when their connection closes and
// re-registered by clients with setWatches. Sessions and ephemerals are replicated; liveness is
// kept by the consensus leader.
//
// A standalone server is a one-voter Raft cluster: Start with no Peers. StartCluster starts an
// N-server cluster in one process (tests, embedding). Config documents every knob; the zkd
// binary maps zoo.cfg onto it.
//
// Operations surface: four-letter words on the client port (Config.FourLetterWords), and an
// optional admin HTTP server (Config.AdminAddr) with Prometheus /metrics, /ready and
// /commands/<name> JSON like ZooKeeper's AdminServer. mntr and /metrics are two views of the
// same measurements (metrics.go): the server's own and consensus' (backend.Metrics), served
// from a registry of this server's (Server.Gatherer), never a global one.
//
// Lock order: Server.mu, then watchManager.mu, then outQueue.mu. The apply hook takes only
// watchManager.mu and outQueue.mu and never blocks on a client.
package server
