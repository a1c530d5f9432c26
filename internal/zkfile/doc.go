// Package zkfile reads Apache ZooKeeper's data files: the snapshots (dataDir/version-2/snapshot.*)
// and transaction logs (dataLogDir/version-2/log.*) of ZooKeeper 3.4 to 3.9, and rebuilds from
// them the state ZooKeeper itself would load: every znode with its data, ACL and persisted stat,
// the sessions with their timeouts, and the ephemerals they own.
//
// The package is pure: it reads files and builds values, and knows nothing of zkd's own storage.
// Every checksum ZooKeeper writes is verified (Adler-32 over each snapshot and each log entry).
// Damage is an error naming the file and the offset, except where ZooKeeper itself treats it as
// the end of the data: a log whose last entry was cut short by a crash, or the zero padding
// ZooKeeper preallocates at the end of a log.
package zkfile
