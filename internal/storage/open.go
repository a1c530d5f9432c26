package storage

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"

	"github.com/zkd-io/zkd/internal/third_party/raft"
)

// The log cache keeps the newest entries in memory for the replicators and for followers'
// applies. It is bounded by entries and by bytes: by entries alone, 512 entries of 1 MiB values
// would pin 512 MiB. A miss reads the log store.
const (
	logCacheEntries = 512
	logCacheBytes   = 4 << 20
)

// Options configure Open. The zero value opens a raft-wal store with segments sized for the
// volume and keeps every snapshot Raft does not need.
type Options struct {
	// Kind is the log store's format; "" means LogStoreWAL.
	Kind LogStore
	// SegmentSize is the log's segment size in bytes; 0 sizes it for the volume.
	SegmentSize int
	// SnapshotRetain is how many snapshots the reaper keeps besides those in use.
	SnapshotRetain int
	// Log receives the store's own messages, HCLog those of raft-wal and raft's snapshot store.
	Log   *slog.Logger
	HCLog hclog.Logger

	// The disk guard's hooks (all optional). OnError is told of every failed write. Full is
	// called when a write fails for want of space: true makes the write wait (SpaceOK says when
	// there is room again), false fails it. Quit ends every wait with Stopped, or ErrStopped if
	// Stopped is nil; Raft hands that error to the writes it was storing.
	OnError func(error)
	Full    func() (wait bool)
	SpaceOK func() bool
	Quit    <-chan struct{}
	Stopped error
}

// Stores are the stores Raft runs on, opened by Open over one data directory.
type Stores struct {
	// Dir is the directory they live in (dataDir/raft).
	Dir string
	// Log is the log store behind a bounded cache, Stable the stable store (term, vote), Snapshots
	// the snapshot store. Every entry and the newest snapshot were verified before Open returned.
	Log       raft.LogStore
	Stable    raft.StableStore
	Snapshots raft.SnapshotStore
	// SegmentSize is the segment size in use.
	SegmentSize int
	// Fresh is set when the directory held no state before.
	Fresh bool
	// TornFile and TornBytes name the append a crash interrupted (never acknowledged), which
	// Open dropped; TornBytes is 0 when there was none.
	TornFile  string
	TornBytes int

	closer io.Closer
}

// Close closes the stores and releases the directory's lock.
func (s *Stores) Close() error { return s.closer.Close() }

// Open opens, or creates, the stores under dataDir/raft, holding the directory's lock until
// Close. It verifies every log entry and the newest snapshot first: damage is a *DamageError,
// and nothing is opened.
func Open(dataDir string, o Options) (st *Stores, err error) {
	if o.Kind == "" {
		o.Kind = LogStoreWAL
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.HCLog == nil {
		o.HCLog = hclog.NewNullLogger()
	}
	dir := filepath.Join(dataDir, "raft")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("consensus: data dir: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	fresh := !exists(filepath.Join(dir, walDirName)) && !exists(filepath.Join(dir, boltName)) && !hasSnapshots(dir)
	segSize := o.SegmentSize
	if segSize == 0 {
		segSize = segmentSizeFor(dir)
	}
	store, err := openLogStore(dir, o.Kind, segSize, fresh, o.HCLog)
	if err != nil {
		lock.Close()
		return nil, err
	}
	closer := storeCloser{store: store, lock: lock}
	defer func() {
		if err != nil {
			closer.Close()
		}
	}()
	store.onError, store.full, store.spaceOK, store.quit, store.stopped = o.OnError, o.Full, o.SpaceOK, o.Quit, o.Stopped
	if o.Kind != LogStoreBolt {
		walDir := filepath.Join(dir, walDirName)
		store.reopen = func() (storeBackend, error) {
			if _, err := unsealTail(walDir); err != nil {
				return nil, fmt.Errorf("consensus: undo a failed rotation: %w", err)
			}
			return openWAL(walDir, segSize, o.HCLog)
		}
		store.reopened = func() {
			o.Log.Info("reopened the log store after a segment could not be created for want of space", "dir", walDir)
		}
	}
	MakeReserve(filepath.Join(dir, walDirName))
	fss, err := raft.NewFileSnapshotStoreWithLogger(dir, retainAllSnapshots, o.HCLog.Named("snapshots"))
	if err != nil {
		return nil, fmt.Errorf("consensus: snapshot store: %w", err)
	}
	snaps := checkedSnapshots{FileSnapshotStore: fss, root: filepath.Join(dir, snapshotsDirName),
		reaper: &snapshotReaper{store: fss, dir: dir, retain: o.SnapshotRetain, log: o.Log}}
	// Nothing reaches Raft before every entry and the newest snapshot verify.
	if err := checkState(dir, store, fss, false); err != nil {
		return nil, err
	}
	st = &Stores{Dir: dir, Stable: store, Snapshots: snaps, SegmentSize: segSize, Fresh: fresh, closer: closer}
	if file, torn, err := tornTail(filepath.Join(dir, walDirName), true); err == nil && torn > 0 {
		st.TornFile, st.TornBytes = file, torn
	}
	cache, err := raft.NewLogCache(logCacheEntries, store)
	if err != nil {
		return nil, fmt.Errorf("consensus: log cache: %w", err)
	}
	cache.SetMaxBytes(logCacheBytes)
	st.Log = cache
	return st, nil
}
