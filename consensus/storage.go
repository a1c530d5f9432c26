package consensus

import "github.com/zkd-io/zkd/internal/storage"

// The on-disk state belongs to internal/storage; these are its names that the node's
// configuration and errors carry.

// LogStore names the on-disk format of Raft's log and stable store.
type LogStore = storage.LogStore

// The log store formats.
const (
	LogStoreWAL  = storage.LogStoreWAL
	LogStoreBolt = storage.LogStoreBolt
)

// DamageError reports data that failed its checks: a checksum, a structure, or an entry the
// store recorded as durable that is missing. It names the file and what is wrong.
type DamageError = storage.DamageError
