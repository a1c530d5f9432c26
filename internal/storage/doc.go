// Package storage owns everything a node keeps on disk under its data directory (dataDir/raft):
// Raft's log and stable store (raft-wal segment files; a bbolt file of earlier versions is
// migrated on open unless LogStoreBolt keeps that format), the snapshot store, and the snapshot format (the znode tree, in frames
// under CRC-32Cs). Every entry, stable value and snapshot carries a checksum, and nothing that
// fails one is handed out: it is a *DamageError naming the file and what is wrong.
//
// Use:
//   - Open opens (or creates) a directory for a node and returns the Stores Raft runs on, after
//     verifying every log entry and the newest snapshot. Options carry the node's disk-guard
//     hooks: a write that fails for want of space waits for room instead of failing Raft.
//   - PersistSnapshot, ReadSnapshot and WriteSnapshot are the snapshot format, for the FSM and
//     for backups; Replay and Seed read and seed a stopped server's directory.
//   - VerifyDir, DumpSnapshot and TruncateLog are the operator's tools for a stopped server
//     (zkd verify, dump, repair); SetAside moves a damaged directory aside for a rebuild.
//   - DiskFree, DiskNeed, IsNoSpace, IsStorageFault, MakeReserve and ReleaseReserve are what a
//     disk guard needs to decide when the disk is full.
//
// Formats on disk carry their own version numbers, and every change keeps reading what earlier
// versions wrote.
//
// Concurrency: the Stores are safe for the concurrent use Raft makes of them; Open holds the
// directory's lock until Close, and the tools take it too, so no tool runs beside a server on the
// same directory. The log store's background goroutines (recording what is durable, zeroing
// segments ahead, deleting old ones) belong to the Stores and end with Close.
package storage
