package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/zkd-io/zkd/internal/third_party/raft"
	wal "github.com/zkd-io/zkd/internal/third_party/raft-wal"
)

// Checksums on everything Raft's stores give back.
//
// Neither log store verifies what it reads: raft-wal checks a CRC only for the last append batch
// of the newest segment when it opens it, raft-boltdb none at all. CheckedStore sits between
// Raft and either of them. Every entry it stores carries a trailer in its Extensions: a CRC-32C
// of the index, term, type, data and the caller's extensions, then a magic. Every entry read back
// (at start, when a follower is sent entries, when committed entries are applied) is checked and
// the trailer stripped; a mismatch is a *DamageError, never a log. Stable-store values (the term,
// the vote) carry the same kind of trailer.
//
// A directory written before checksums existed is upgraded in place on open: its stable values
// are rewritten with trailers and the first index that must carry one is recorded
// (keyChecksumsFrom); older entries are accepted without a trailer until compaction removes
// them.
//
// A damaged frame header can make a log store stop reading a segment early and so forget
// entries it had acknowledged, which no checksum on the remaining entries shows. So the store
// also records, at most once a second and off the write path, an index that it knows was durable
// (keyDurable). A log that ends below that index, with no snapshot covering it, lost entries:
// that is damage, not a torn tail (a crash can only tear the batch being written, which is above
// any recorded index). A suffix deletion (a follower dropping entries a new leader overrides)
// lowers the record first.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Trailer magics: "zkc1" ends a checked log entry's Extensions, "zks1" a stable-store value.
var (
	entryMagic  = [4]byte{'z', 'k', 'c', '1'}
	stableMagic = [4]byte{'z', 'k', 's', '1'}
)

const trailerLen = 8 // CRC-32C (little endian), then the magic

// Keys this package adds to the stable store.
var (
	keyChecksumsFrom = []byte("zkd.checksumsFrom")
	keyDurable       = []byte("zkd.durableIndex")
)

// raft v1.7's stable keys, for the in-place upgrade.
var (
	raftUint64Keys = [][]byte{[]byte("CurrentTerm"), []byte("LastVoteTerm")}
	raftBytesKeys  = [][]byte{[]byte("LastVoteCand")}
)

// DamageError reports stored data that failed a check: a checksum mismatch, a record that does
// not decode, entries that went missing. Nothing it describes has reached the tree or a client.
type DamageError struct {
	// File is the file holding the damage (as exact as the store allows).
	File string
	// Index is the log index of a damaged entry, 0 when the damage is not one entry's.
	Index uint64
	// Problem says what is wrong.
	Problem string
}

func (e *DamageError) Error() string {
	if e.Index != 0 {
		return fmt.Sprintf("consensus: damaged data in %s: log entry %d: %s", e.File, e.Index, e.Problem)
	}
	return fmt.Sprintf("consensus: damaged data in %s: %s", e.File, e.Problem)
}

// entryCRC is the checksum an entry's trailer carries. AppendedAt is left out: it is advisory,
// and not every store keeps it exactly.
func entryCRC(l *raft.Log, ext []byte) uint32 {
	var hdr [8 + 8 + 1 + 4 + 4]byte
	binary.LittleEndian.PutUint64(hdr[0:], l.Index)
	binary.LittleEndian.PutUint64(hdr[8:], l.Term)
	hdr[16] = byte(l.Type)
	binary.LittleEndian.PutUint32(hdr[17:], uint32(len(l.Data)))
	binary.LittleEndian.PutUint32(hdr[21:], uint32(len(ext)))
	c := crc32.Update(0, castagnoli, hdr[:])
	c = crc32.Update(c, castagnoli, l.Data)
	return crc32.Update(c, castagnoli, ext)
}

// sealEntry returns the Extensions to store for l: its own, then the trailer.
func sealEntry(l *raft.Log) []byte {
	ext := make([]byte, len(l.Extensions), len(l.Extensions)+trailerLen)
	copy(ext, l.Extensions)
	ext = binary.LittleEndian.AppendUint32(ext, entryCRC(l, l.Extensions))
	return append(ext, entryMagic[:]...)
}

// openEntry checks l as read back for index and strips its trailer. legacy reports whether an
// entry without a trailer is acceptable there.
func openEntry(index uint64, l *raft.Log, legacy bool) string {
	if l.Index != index {
		return fmt.Sprintf("holds index %d where %d was asked for", l.Index, index)
	}
	ext := l.Extensions
	n := len(ext)
	if n < trailerLen || [4]byte(ext[n-4:]) != entryMagic {
		if legacy {
			return ""
		}
		return "no checksum trailer"
	}
	own := ext[:n-trailerLen]
	if want := binary.LittleEndian.Uint32(ext[n-trailerLen:]); entryCRC(l, own) != want {
		return "checksum mismatch"
	}
	if len(own) == 0 {
		own = nil
	}
	l.Extensions = own
	return ""
}

func sealStable(key, val []byte) []byte {
	out := make([]byte, len(val), len(val)+trailerLen)
	copy(out, val)
	c := crc32.Update(crc32.Checksum(key, castagnoli), castagnoli, val)
	out = binary.LittleEndian.AppendUint32(out, c)
	return append(out, stableMagic[:]...)
}

func openStable(key, raw []byte) ([]byte, bool) {
	n := len(raw)
	if n < trailerLen || [4]byte(raw[n-4:]) != stableMagic {
		return nil, false
	}
	val := raw[:n-trailerLen]
	c := crc32.Update(crc32.Checksum(key, castagnoli), castagnoli, val)
	return val, c == binary.LittleEndian.Uint32(raw[n-trailerLen:])
}

// storeBackend is what a log store provides: raft-wal's WAL and raft-boltdb's BoltStore are both.
type storeBackend interface {
	raft.LogStore
	raft.StableStore
	io.Closer
}

// CheckedStore is the log and stable store Raft is given: backend, with checksums.
type CheckedStore struct {
	inner storeBackend
	// where names the file holding a log index, or the store's metadata for index 0.
	where func(index uint64) string
	from  uint64 // entries below it may lack a trailer

	mu struct {
		sync.Mutex
		stored  uint64 // the highest index a StoreLogs made durable
		durable uint64 // the value of keyDurable
		err     error  // the last failure to record keyDurable
	}
	stop chan struct{}
	done chan struct{}
	// onError, if set, is told of every failed write (the disk guard watches for ENOSPC).
	onError func(error)
	// The disk guard's hooks (Options), set before Raft starts: full, when a write fails for
	// want of space, says whether to wait for space rather than fail (Raft then neither steps
	// down nor starts elections over its own disk); spaceOK says whether there is room again;
	// reopen replaces a backend that a failed segment rotation left unable to append; quit ends
	// a wait with stopped (ErrStopped if nil). Without them a failed write fails.
	full     func() (wait bool)
	spaceOK  func() bool
	reopen   func() (storeBackend, error)
	reopened func()
	quit     <-chan struct{}
	stopped  error
	// rw guards inner against reopen: every use holds it shared.
	rw sync.RWMutex
	// appended counts bytes appended since the guard last looked at the free space.
	appended int
}

func (c *CheckedStore) failed(err error) error {
	if err != nil && c.onError != nil {
		c.onError(err)
	}
	return err
}

// getStable reads key as the backend stored it: nil for a key never set (whatever the backend's
// way of saying so).
func getStable(b raft.StableStore, key []byte) ([]byte, error) {
	v, err := b.Get(key)
	if err != nil && err.Error() == "not found" { // raft-boltdb's ErrKeyNotFound
		return nil, nil
	}
	return v, err
}

// newCheckedStore wraps backend, upgrading a directory written before checksums in place. fresh
// says whether the directory held no data before this open (a new server); otherwise a stable
// store without keyChecksumsFrom must still hold Raft's keys, or its metadata was lost.
func newCheckedStore(backend storeBackend, where func(uint64) string, fresh bool) (*CheckedStore, error) {
	c := &CheckedStore{inner: backend, where: where, stop: make(chan struct{}), done: make(chan struct{})}
	if err := c.load(fresh); err != nil {
		return nil, err
	}
	go c.recordDurable()
	return c, nil
}

func (c *CheckedStore) damage(index uint64, problem string) *DamageError {
	return &DamageError{File: c.where(index), Index: index, Problem: problem}
}

// guard turns a panic inside a store (a damaged file can make a decoder index out of range) into
// a DamageError.
func (c *CheckedStore) guard(index uint64, err *error) {
	if r := recover(); r != nil {
		*err = c.damage(index, fmt.Sprintf("the store failed reading it: %v", r))
	}
}

func (c *CheckedStore) load(fresh bool) (err error) {
	defer c.guard(0, &err)
	raw, err := getStable(c.inner, keyChecksumsFrom)
	if err != nil {
		return c.damage(0, fmt.Sprintf("reading %s: %v", keyChecksumsFrom, err))
	}
	if raw == nil {
		return c.upgrade(fresh)
	}
	v, ok := openStable(keyChecksumsFrom, raw)
	if !ok || len(v) != 8 {
		return c.damage(0, fmt.Sprintf("stable value %s fails its checksum", keyChecksumsFrom))
	}
	c.from = binary.LittleEndian.Uint64(v)
	d, err := c.GetUint64(keyDurable)
	if err != nil {
		return err
	}
	c.mu.durable = d
	return nil
}

// upgrade adds trailers to a store that has none: a new one, or one written before checksums.
func (c *CheckedStore) upgrade(fresh bool) error {
	last, err := c.inner.LastIndex()
	if err != nil {
		return c.damage(0, fmt.Sprintf("reading the last index: %v", err))
	}
	term, err := getStable(c.inner, raftUint64Keys[0])
	if err != nil {
		return c.damage(0, fmt.Sprintf("reading CurrentTerm: %v", err))
	}
	if !fresh && term == nil {
		return c.damage(0, "the log store's metadata is missing (no term, no checksum marker) while the directory holds data")
	}
	// Raft's keys get trailers, as this store would have written them. A uint64 is read through
	// the backend's own encoding (raft-boltdb's differs from raft-wal's).
	for _, k := range append(append([][]byte{}, raftUint64Keys...), raftBytesKeys...) {
		raw, err := getStable(c.inner, k)
		if err != nil {
			return c.damage(0, fmt.Sprintf("reading %s: %v", k, err))
		}
		if raw == nil {
			continue
		}
		if _, ok := openStable(k, raw); ok {
			continue // an upgrade that stopped half way already rewrote it
		}
		if slices.ContainsFunc(raftUint64Keys, func(u []byte) bool { return bytes.Equal(u, k) }) {
			v, err := c.inner.GetUint64(k)
			if err != nil {
				return c.damage(0, fmt.Sprintf("reading %s: %v", k, err))
			}
			raw = binary.LittleEndian.AppendUint64(nil, v)
		}
		if err := c.Set(k, raw); err != nil {
			return err
		}
	}
	c.from = last + 1
	if fresh {
		c.from = 0
	}
	// The marker goes last: until it is written, the next open redoes the upgrade.
	return c.inner.Set(keyChecksumsFrom, sealStable(keyChecksumsFrom, binary.LittleEndian.AppendUint64(nil, c.from)))
}

// recordDurable writes keyDurable once a second while appends move it.
func (c *CheckedStore) recordDurable() {
	defer close(c.done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			c.mu.Lock()
			if c.mu.stored > c.mu.durable {
				c.writeDurable(c.mu.stored)
			}
			c.mu.Unlock()
		}
	}
}

// writeDurable records v; c.mu is held.
func (c *CheckedStore) writeDurable(v uint64) {
	if err := c.SetUint64(keyDurable, v); err != nil {
		c.mu.err = err
		return
	}
	c.mu.durable, c.mu.err = v, nil
}

// Durable returns the recorded durable index.
func (c *CheckedStore) Durable() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.durable
}

// Close stops the recorder, records the durable index and closes the backend.
func (c *CheckedStore) Close() error {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	<-c.done
	// A clean stop records everything stored.
	c.mu.Lock()
	if c.mu.stored > c.mu.durable {
		c.writeDurable(c.mu.stored)
	}
	c.mu.Unlock()
	c.rw.Lock()
	defer c.rw.Unlock()
	return c.inner.Close()
}

// FirstIndex implements raft.LogStore.
func (c *CheckedStore) FirstIndex() (i uint64, err error) {
	defer c.guard(0, &err)
	c.rw.RLock()
	defer c.rw.RUnlock()
	return c.inner.FirstIndex()
}

// LastIndex implements raft.LogStore.
func (c *CheckedStore) LastIndex() (i uint64, err error) {
	defer c.guard(0, &err)
	c.rw.RLock()
	defer c.rw.RUnlock()
	return c.inner.LastIndex()
}

// GetLog implements raft.LogStore: the entry, verified, without its trailer.
func (c *CheckedStore) GetLog(index uint64, l *raft.Log) (err error) {
	defer c.guard(index, &err)
	c.rw.RLock()
	err = c.inner.GetLog(index, l)
	c.rw.RUnlock()
	if err != nil {
		return err
	}
	if p := openEntry(index, l, index < c.from); p != "" {
		return c.damage(index, p)
	}
	return nil
}

// StoreLog implements raft.LogStore.
func (c *CheckedStore) StoreLog(l *raft.Log) error { return c.StoreLogs([]*raft.Log{l}) }

// StoreLogs implements raft.LogStore: copies of logs with trailers go to the backend (Raft keeps
// the originals in its cache and in flight).
func (c *CheckedStore) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	sealed := make([]raft.Log, len(logs))
	ptrs := make([]*raft.Log, len(logs))
	for i, l := range logs {
		sealed[i] = *l
		sealed[i].Extensions = sealEntry(l)
		ptrs[i] = &sealed[i]
	}
	for {
		c.rw.RLock()
		err := c.inner.StoreLogs(ptrs)
		c.rw.RUnlock()
		if err == nil {
			break
		}
		c.failed(err)
		wedged := errors.Is(err, wal.ErrSealed)
		if !(IsStorageFault(err) || wedged) || c.full == nil || !c.full() {
			return err
		}
		if werr := c.awaitSpace(wedged); werr != nil {
			return fmt.Errorf("%w (then: %w)", err, werr)
		}
	}
	if c.spaceOK != nil {
		for _, l := range ptrs {
			c.appended += len(l.Data) + len(l.Extensions)
		}
		// Look at the free space every eighth of a segment, so that a burst cannot fill the disk
		// between two looks of the guard's ticker.
		if c.appended >= DiskCheckBytes {
			c.appended = 0
			c.spaceOK()
		}
	}
	c.mu.Lock()
	if last := logs[len(logs)-1].Index; last > c.mu.stored {
		c.mu.stored = last
	}
	c.mu.Unlock()
	return nil
}

// awaitSpace waits until the disk has room again, reopening a backend that a failed rotation left
// unable to append (raft-wal never retries one), or until quit.
func (c *CheckedStore) awaitSpace(wedged bool) error {
	t := time.NewTicker(DiskPoll)
	defer t.Stop()
	for {
		select {
		case <-c.quit:
			if c.stopped != nil {
				return c.stopped
			}
			return ErrStopped
		case <-t.C:
		}
		if !c.spaceOK() {
			continue
		}
		if !wedged || c.reopen == nil {
			return nil
		}
		c.rw.Lock()
		err := c.inner.Close()
		var fresh storeBackend
		if err == nil {
			fresh, err = c.reopen()
		}
		if err == nil {
			c.inner = fresh
		}
		c.rw.Unlock()
		if err == nil {
			if c.reopened != nil {
				c.reopened()
			}
			return nil
		}
		if c.onError != nil {
			c.onError(fmt.Errorf("reopening the log store: %w", err))
		}
	}
}

// DeleteRange implements raft.LogStore. Deleting entries at or below the recorded durable index
// lowers the record first, so that a later start does not take the deletion for lost entries.
func (c *CheckedStore) DeleteRange(lo, hi uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if lo <= c.mu.durable && hi >= c.mu.durable {
		if err := c.SetUint64(keyDurable, lo-1); err != nil {
			return err
		}
		c.mu.durable = lo - 1
	}
	if lo <= c.mu.stored && hi >= c.mu.stored {
		c.mu.stored = lo - 1
	}
	c.rw.RLock()
	defer c.rw.RUnlock()
	return c.inner.DeleteRange(lo, hi)
}

// Set implements raft.StableStore.
func (c *CheckedStore) Set(key, val []byte) error {
	c.rw.RLock()
	defer c.rw.RUnlock()
	return c.failed(c.inner.Set(key, sealStable(key, val)))
}

// Get implements raft.StableStore: a key never set reads as the backend says; a value that fails
// its checksum is damage.
func (c *CheckedStore) Get(key []byte) (v []byte, err error) {
	defer c.guard(0, &err)
	c.rw.RLock()
	raw, err := c.inner.Get(key)
	c.rw.RUnlock()
	if err != nil || len(raw) == 0 {
		return raw, err
	}
	v, ok := openStable(key, raw)
	if !ok {
		return nil, c.damage(0, fmt.Sprintf("stable value %s fails its checksum", key))
	}
	return v, nil
}

// SetUint64 implements raft.StableStore.
func (c *CheckedStore) SetUint64(key []byte, v uint64) error {
	return c.Set(key, binary.LittleEndian.AppendUint64(nil, v))
}

// GetUint64 implements raft.StableStore; a key never set reads as 0 (raft-wal) or the
// backend's not-found error (raft-boltdb), as before.
func (c *CheckedStore) GetUint64(key []byte) (uint64, error) {
	v, err := c.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) == 0 {
		return 0, nil
	}
	if len(v) != 8 {
		return 0, c.damage(0, fmt.Sprintf("stable value %s has %d bytes, not 8", key, len(v)))
	}
	return binary.LittleEndian.Uint64(v), nil
}

// verifyAll checks every entry (at open, before Raft sees the store): a WAL by scanning its
// segment files (scanSegments), which must then hold exactly the store's first to last entry;
// another store by reading every entry back (verify).
func (c *CheckedStore) verifyAll(dir string) (first, last uint64, err error) {
	walDir := filepath.Join(dir, walDirName)
	if !exists(walDir) {
		return c.Verify()
	}
	if first, err = c.FirstIndex(); err != nil {
		return 0, 0, c.AsDamage(0, err)
	}
	if last, err = c.LastIndex(); err != nil {
		return 0, 0, c.AsDamage(0, err)
	}
	scan, err := scanSegments(walDir, c.from)
	if err != nil {
		return first, last, err
	}
	if last != 0 && (scan.first != first || scan.last != last) {
		return first, last, c.damage(last, fmt.Sprintf("the log store holds entries %d to %d, its segments %d to %d", first, last, scan.first, scan.last))
	}
	return first, last, nil
}

// Verify reads every entry back and checks that terms never decrease. It returns the first
// damage.
func (c *CheckedStore) Verify() (first, last uint64, err error) {
	if first, err = c.FirstIndex(); err != nil {
		return 0, 0, c.AsDamage(0, err)
	}
	if last, err = c.LastIndex(); err != nil {
		return 0, 0, c.AsDamage(0, err)
	}
	if last == 0 {
		return first, last, nil
	}
	var prevTerm uint64
	var l raft.Log
	for i := first; i <= last; i++ {
		if err := c.GetLog(i, &l); err != nil {
			return first, last, c.AsDamage(i, err)
		}
		if l.Term < prevTerm {
			return first, last, c.damage(i, fmt.Sprintf("term %d after term %d", l.Term, prevTerm))
		}
		prevTerm = l.Term
	}
	return first, last, nil
}

func (c *CheckedStore) AsDamage(index uint64, err error) error {
	var d *DamageError
	if errors.As(err, &d) {
		return err
	}
	return c.damage(index, err.Error())
}
