package storage

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sync"

	"github.com/zkd-io/zkd/internal/third_party/raft"
	wal "github.com/zkd-io/zkd/internal/third_party/raft-wal"
	"github.com/zkd-io/zkd/internal/third_party/raft-wal/metadb"
	"github.com/zkd-io/zkd/internal/third_party/raft-wal/types"
)

// walMetaFile replaces raft-wal's bbolt metadata store (wal-meta.db) with one small file,
// rewritten whole and atomically (temporary file, fsync, rename, fsync of the directory) on every
// change, and checked whole on every open: magic, format version, length, the JSON state, and a
// CRC-32C of everything before it. It changes only when a segment is sealed or created and when
// Raft's term or vote changes, so its cost does not matter; what matters is that a damaged file
// is refused with a clear error, where a damaged bbolt file could fault the process (a truncated
// one made bbolt read past its mapping: SIGBUS), and raft-wal, given a segment list that lost
// entries, deletes the segment files it no longer lists.
//
// A directory that still has wal-meta.db is migrated on open: its state and Raft's stable keys
// are copied into the new file, and the old one is renamed wal-meta.db.migrated.
type walMetaFile struct {
	path string
	mu   sync.Mutex
	doc  walMetaDoc
}

// walMetaDoc is the file's JSON payload.
type walMetaDoc struct {
	State  types.PersistentState
	Stable map[string][]byte
}

const (
	walMetaFileName = "wal-meta.zkd"
	walMetaVersion  = 1
)

var walMetaMagic = [4]byte{'z', 'k', 'd', 'm'}

// Load implements types.MetaStore.
func (m *walMetaFile) Load(dir string) (types.PersistentState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.path = filepath.Join(dir, walMetaFileName)
	b, err := os.ReadFile(m.path)
	switch {
	case err == nil:
		doc, err := decodeWALMeta(b)
		if err != nil {
			return types.PersistentState{}, &DamageError{File: m.path, Problem: err.Error()}
		}
		m.doc = doc
		return doc.State, nil
	case !errors.Is(err, os.ErrNotExist):
		return types.PersistentState{}, fmt.Errorf("consensus: %w", err)
	}
	old := filepath.Join(dir, walMetaName)
	if exists(old) {
		if err := m.migrate(old); err != nil {
			return types.PersistentState{}, err
		}
		return m.doc.State, nil
	}
	m.doc = walMetaDoc{Stable: map[string][]byte{}}
	return m.doc.State, m.write()
}

// migrate reads raft-wal's bbolt metadata into m and renames the old file once the new one is
// durable.
func (m *walMetaFile) migrate(old string) error {
	if err := checkBoltFile(old); err != nil {
		return err
	}
	var bolt metadb.BoltMetaDB
	st, err := bolt.Load(filepath.Dir(old))
	if err != nil {
		return &DamageError{File: old, Problem: err.Error()}
	}
	doc := walMetaDoc{State: st, Stable: map[string][]byte{}}
	keys := append(append(append([][]byte{}, raftUint64Keys...), raftBytesKeys...), keyChecksumsFrom, keyDurable)
	for _, k := range keys {
		v, err := bolt.GetStable(k)
		if err != nil {
			bolt.Close()
			return &DamageError{File: old, Problem: fmt.Sprintf("reading %s: %v", k, err)}
		}
		if v != nil {
			doc.Stable[string(k)] = bytes.Clone(v)
		}
	}
	if err := bolt.Close(); err != nil {
		return fmt.Errorf("consensus: %w", err)
	}
	m.doc = doc
	if err := m.write(); err != nil {
		return err
	}
	if err := os.Rename(old, old+migratedExt); err != nil {
		return fmt.Errorf("consensus: %w", err)
	}
	return syncDir(filepath.Dir(old))
}

// checkBoltFile reads a bbolt file's two meta pages and refuses a file in which neither is valid
// or whose size is below what the valid one says it holds: bbolt maps the file and would fault
// reading past its end.
func checkBoltFile(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("consensus: %w", err)
	}
	const hdr = 16 // page header: id, flags, count, overflow
	ok := false
	for _, pageSize := range []int{4096, os.Getpagesize(), 16384, 65536} {
		for p := range 2 {
			off := p * pageSize
			if off+hdr+64 > len(b) {
				continue
			}
			meta := b[off+hdr : off+hdr+64]
			if binary.LittleEndian.Uint32(meta[0:]) != 0xED0CDAED || int(binary.LittleEndian.Uint32(meta[8:])) != pageSize {
				continue
			}
			// The checksum (FNV-1a 64) covers the meta fields before it.
			if fnv64a(meta[:56]) != binary.LittleEndian.Uint64(meta[56:]) {
				continue
			}
			pages := binary.LittleEndian.Uint64(meta[40:])
			if pages*uint64(pageSize) > uint64(len(b)) {
				return &DamageError{File: path, Problem: fmt.Sprintf("%d bytes, but its metadata says %d pages of %d", len(b), pages, pageSize)}
			}
			ok = true
		}
	}
	if !ok {
		return &DamageError{File: path, Problem: "no valid bbolt meta page"}
	}
	return nil
}

func fnv64a(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

func decodeWALMeta(b []byte) (walMetaDoc, error) {
	const head = 4 + 4 + 4
	if len(b) < head+4 {
		return walMetaDoc{}, fmt.Errorf("%d bytes, too short", len(b))
	}
	if [4]byte(b[:4]) != walMetaMagic {
		return walMetaDoc{}, fmt.Errorf("not a zkd WAL metadata file (magic %x)", b[:4])
	}
	if v := binary.BigEndian.Uint32(b[4:]); v != walMetaVersion {
		return walMetaDoc{}, fmt.Errorf("format version %d, want %d", v, walMetaVersion)
	}
	n := binary.BigEndian.Uint32(b[8:])
	if uint64(n)+head+4 != uint64(len(b)) {
		return walMetaDoc{}, fmt.Errorf("%d bytes, but the header says %d", len(b), uint64(n)+head+4)
	}
	body := b[:head+n]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(b[head+n:]) {
		return walMetaDoc{}, errors.New("checksum mismatch")
	}
	var doc walMetaDoc
	if err := json.Unmarshal(b[head:head+n], &doc); err != nil {
		return walMetaDoc{}, fmt.Errorf("does not decode: %v", err)
	}
	if doc.Stable == nil {
		doc.Stable = map[string][]byte{}
	}
	return doc, nil
}

func encodeWALMeta(doc walMetaDoc) ([]byte, error) {
	js, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	b := append([]byte{}, walMetaMagic[:]...)
	b = binary.BigEndian.AppendUint32(b, walMetaVersion)
	b = binary.BigEndian.AppendUint32(b, uint32(len(js)))
	b = append(b, js...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

// write replaces the file with m.doc durably; m.mu is held.
func (m *walMetaFile) write() error {
	b, err := encodeWALMeta(m.doc)
	if err != nil {
		return fmt.Errorf("consensus: wal metadata: %w", err)
	}
	err = writeFileAtomic(m.path, b)
	if IsNoSpace(err) && ReleaseReserve(filepath.Dir(m.path)) {
		// The reserve exists for this: a term or a vote must be recorded even on a full disk.
		err = writeFileAtomic(m.path, b)
	}
	return err
}

// writeFileAtomic replaces path with b: a temporary file beside it, fsynced, renamed over it, and
// the directory fsynced.
func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("consensus: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("consensus: write %s: %w", path, err)
	}
	return syncDir(filepath.Dir(path))
}

// CommitState implements types.MetaStore.
func (m *walMetaFile) CommitState(st types.PersistentState) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	prev := m.doc.State
	m.doc.State = st
	if err := m.write(); err != nil {
		m.doc.State = prev
		return err
	}
	return nil
}

// GetStable implements types.MetaStore: nil for a key never set.
func (m *walMetaFile) GetStable(key []byte) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return bytes.Clone(m.doc.Stable[string(key)]), nil
}

// SetStable implements types.MetaStore.
func (m *walMetaFile) SetStable(key, value []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	prev, had := m.doc.Stable[string(key)]
	if value == nil {
		delete(m.doc.Stable, string(key))
	} else {
		m.doc.Stable[string(key)] = bytes.Clone(value)
	}
	if err := m.write(); err != nil {
		if had {
			m.doc.Stable[string(key)] = prev
		} else {
			delete(m.doc.Stable, string(key))
		}
		return err
	}
	return nil
}

// Close implements types.MetaStore.
func (m *walMetaFile) Close() error { return nil }

// The layout of a raft-wal segment file, as the start-up checks read it: a 32-byte header, then
// frames of an 8-byte header (type, then the payload's length at offset 4) and a payload padded to
// 8 bytes. A commit frame ends each append.
const (
	segFileHeader  = 32
	segFrameHeader = 8

	segEntryFrame  = 1
	segIndexFrame  = 2
	segCommitFrame = 3
)

// tornTail reads the newest segment file under walDir the way raft-wal lays it out (a 32-byte
// header, then frames of an 8-byte header and a payload padded to 8 bytes; a commit frame ends
// each append) and returns how many non-zero bytes follow the last commit frame: what a crash
// in the middle of an append left behind, which raft-wal ignores and overwrites.
//
// It runs at every start, on a segment that is 64 MiB on a large volume and mostly zeros: the
// file is mapped rather than read into the heap (readSegment), only the parts that may hold data
// are looked at (dataSpans), and those a block of zeros at a time (nonZero). Reading the whole
// file into the heap and testing it byte by byte was three quarters of the CPU a start on an
// empty data directory took, and left the process 64 MiB larger.
func tornTail(walDir string, fix bool) (file string, torn int, err error) {
	file = walSegmentOf(walDir, ^uint64(0))
	if filepath.Ext(file) != ".wal" {
		return "", 0, nil
	}
	b, release, err := readSegment(file)
	if err != nil {
		return file, 0, err
	}
	commitEnd := lastCommitEnd(b)
	spans, err := dataSpans(file, int64(commitEnd), int64(len(b)))
	if err != nil {
		release()
		return file, 0, err
	}
	torn, end := nonZero(b, spans, commitEnd)
	release()
	if torn == 0 || !fix {
		return file, torn, nil
	}
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		return file, torn, err
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, end-commitEnd), int64(commitEnd)); err != nil {
		return file, torn, err
	}
	return file, torn, f.Sync()
}

// lastCommitEnd returns the offset just past the last commit frame of a segment's bytes, or past
// its header when it has none.
func lastCommitEnd(b []byte) int {
	off, commitEnd := int64(segFileHeader), int64(segFileHeader)
	for off+segFrameHeader <= int64(len(b)) {
		typ, n := b[off], int64(binary.LittleEndian.Uint32(b[off+4:]))
		if typ == segEntryFrame || typ == segIndexFrame {
			off += segFrameHeader + (n+7)&^7
			continue
		}
		if typ == segCommitFrame {
			off += segFrameHeader
			commitEnd = off
			continue
		}
		break
	}
	return int(min(commitEnd, int64(len(b))))
}

// nonZero counts the non-zero bytes of b within spans (sorted ranges of offsets), and returns the
// offset just past the last of them, or from when there are none. Blocks of zeros, nearly all of
// a segment's tail, are recognised with one comparison each.
func nonZero(b []byte, spans [][2]int64, from int) (count, end int) {
	const block = 64 << 10
	zeros := make([]byte, block)
	end = from
	for _, s := range spans {
		for off := int(s[0]); off < int(s[1]); off += block {
			chunk := b[off:min(off+block, int(s[1]))]
			if bytes.Equal(chunk, zeros[:len(chunk)]) {
				continue
			}
			for i, c := range chunk {
				if c != 0 {
					count++
					end = off + i + 1
				}
			}
		}
	}
	return count, end
}

// unsealTail undoes a seal that raft-wal wrote to the tail segment but could not follow with a
// new segment (no space for the file or for the metadata): its metadata still lists the segment
// as the unsealed tail, so on reopening raft-wal recovers it as sealed and refuses every append
// without ever trying the rotation again. A seal is an index frame written between an append's
// entries and its commit frame. unsealTail rewrites that append's end as if it had not sealed:
// a commit frame right after the entries, whose CRC-32C covers what the commit covers (from the
// end of the previous commit frame, or the file's start), then zeroes what is left of the index
// and the old commit. The entries stay committed; the next append seals and rotates again. The
// new commit frame is written and synced before anything is cleared, so a crash in between
// leaves a segment raft-wal recovers to the same entries. It reports whether it undid a seal.
func unsealTail(walDir string) (bool, error) {
	b, err := os.ReadFile(filepath.Join(walDir, walMetaFileName))
	if err != nil {
		return false, err
	}
	doc, err := decodeWALMeta(b)
	if err != nil || len(doc.State.Segments) == 0 {
		return false, err
	}
	tail := doc.State.Segments[len(doc.State.Segments)-1]
	if !tail.SealTime.IsZero() {
		return false, nil
	}
	name := filepath.Join(walDir, fmt.Sprintf("%020d-%016x.wal", tail.BaseIndex, tail.ID))
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return false, err
	}
	defer f.Close()
	var hdr [segFrameHeader]byte
	off := int64(segFileHeader)
	crcStart := int64(0) // the first commit covers the file header too
	indexAt, sealEnd, sealCRCStart := int64(-1), int64(-1), int64(0)
scan:
	for {
		if _, err := f.ReadAt(hdr[:], off); err != nil {
			break
		}
		typ, n := hdr[0], int64(binary.LittleEndian.Uint32(hdr[4:]))
		switch typ {
		case segEntryFrame:
			off += segFrameHeader + (n+7)&^7
		case segIndexFrame:
			indexAt = off
			off += segFrameHeader + (n+7)&^7
		case segCommitFrame:
			if indexAt >= 0 {
				sealEnd, sealCRCStart = off+segFrameHeader, crcStart
				break scan
			}
			off += segFrameHeader
			crcStart = off
		default:
			break scan
		}
	}
	if indexAt < 0 || sealEnd < 0 {
		return false, nil
	}
	covered := make([]byte, indexAt-sealCRCStart)
	if _, err := f.ReadAt(covered, sealCRCStart); err != nil {
		return false, err
	}
	var commit [segFrameHeader]byte
	commit[0] = segCommitFrame
	binary.LittleEndian.PutUint32(commit[4:], crc32.Checksum(covered, castagnoli))
	if _, err := f.WriteAt(commit[:], indexAt); err != nil {
		return false, err
	}
	if err := f.Sync(); err != nil {
		return false, err
	}
	if _, err := f.WriteAt(make([]byte, sealEnd-indexAt-segFrameHeader), indexAt+segFrameHeader); err != nil {
		return false, err
	}
	return true, f.Sync()
}

// segmentScan is what scanSegments found: the live entries it verified, in order.
type segmentScan struct {
	first, last uint64 // 0, 0 when there were none
	count       uint64
}

// scanSegments reads every segment the WAL metadata lists, as raft-wal lays it out (a 32-byte
// header, then frames of an 8-byte header and a payload padded to 8 bytes; a commit frame ends
// each append batch and carries the CRC-32C of the batch), and checks, for the batches that hold
// live entries (a truncation leaves dropped entries' bytes behind):
//   - the batch's CRC (which covers entries written before this package added its own checksums
//     too; raft-wal checks only the newest batch, when it opens its tail);
//   - each live entry of the batch, decoded as raft-wal decodes it: its index, its trailer
//     (openEntry; legacy, below from, may have none), terms that never decrease.
//
// The last batch of the tail segment may fail its CRC as a torn append; raft-wal drops it, and so
// does the scan. One sequential read per segment: much cheaper than reading the entries back one
// by one through the store.
func scanSegments(walDir string, from uint64) (segmentScan, error) {
	var out segmentScan
	mb, err := os.ReadFile(filepath.Join(walDir, walMetaFileName))
	if err != nil {
		return out, nil // nothing to check yet (a new store)
	}
	doc, err := decodeWALMeta(mb)
	if err != nil {
		return out, &DamageError{File: filepath.Join(walDir, walMetaFileName), Problem: err.Error()}
	}
	var prevTerm uint64
	for i, si := range doc.State.Segments {
		seg := filepath.Join(walDir, fmt.Sprintf("%020d-%016x.wal", si.BaseIndex, si.ID))
		isTail := i == len(doc.State.Segments)-1
		b, release, err := readSegment(seg)
		if errors.Is(err, os.ErrNotExist) && isTail {
			continue // raft-wal creates a listed tail that a crash kept from being made
		}
		if err != nil {
			return out, &DamageError{File: seg, Problem: err.Error()}
		}
		torn, damage := scanSegment(seg, b, si, from, &prevTerm, &out)
		release()
		if damage != nil {
			return out, damage
		}
		if torn != nil && !isTail {
			return out, torn
		}
	}
	return out, nil
}

// scanSegment checks the bytes b of one segment (see scanSegments) and adds its live entries to
// out. A last batch that fails its checksum (torn by a crash) is returned apart from the errors:
// it is damage only in a segment other than the tail.
func scanSegment(seg string, b []byte, si types.SegmentInfo, from uint64, prevTerm *uint64, out *segmentScan) (torn, damage *DamageError) {
	var codec wal.BinaryCodec
	isLive := func(idx uint64) bool { return idx >= si.MinIndex && (si.MaxIndex == 0 || idx <= si.MaxIndex) }
	off, crcStart := int64(segFileHeader), int64(0)
	next := si.BaseIndex // index of the next entry frame
	var batch [][2]int64 // payload offset and length of the batch's entries
	for off+segFrameHeader <= int64(len(b)) {
		typ, n := b[off], int64(binary.LittleEndian.Uint32(b[off+4:]))
		if typ == segEntryFrame || typ == segIndexFrame {
			end := off + segFrameHeader + (n+7)&^7
			if end > int64(len(b)) || n < 0 {
				break
			}
			if typ == segEntryFrame {
				batch = append(batch, [2]int64{off + segFrameHeader, n})
			}
			off = end
			continue
		}
		if typ != 3 { // not a commit: the end of what was written
			break
		}
		if torn != nil {
			return nil, torn // a batch before the last failed: only the last may be torn
		}
		batchFirst := next
		next += uint64(len(batch))
		live := len(batch) > 0 && isLive(batchFirst) || len(batch) > 0 && isLive(next-1)
		if live && crc32.Checksum(b[crcStart:off], castagnoli) != uint32(n) {
			torn = &DamageError{File: seg, Index: batchFirst,
				Problem: fmt.Sprintf("the append batch at offset %d (entries from %d) fails its checksum", crcStart, batchFirst)}
		} else {
			for k, e := range batch {
				idx := batchFirst + uint64(k)
				if !isLive(idx) {
					continue
				}
				var l raft.Log
				if err := codec.Decode(b[e[0]:e[0]+e[1]], &l); err != nil {
					return nil, &DamageError{File: seg, Index: idx, Problem: fmt.Sprintf("does not decode: %v", err)}
				}
				if p := openEntry(idx, &l, idx < from); p != "" {
					return nil, &DamageError{File: seg, Index: idx, Problem: p}
				}
				if l.Term < *prevTerm {
					return nil, &DamageError{File: seg, Index: idx, Problem: fmt.Sprintf("term %d after term %d", l.Term, *prevTerm)}
				}
				*prevTerm = l.Term
				if out.count > 0 && idx != out.last+1 {
					return nil, &DamageError{File: seg, Index: idx, Problem: fmt.Sprintf("follows entry %d", out.last)}
				}
				if out.count == 0 {
					out.first = idx
				}
				out.last = idx
				out.count++
			}
		}
		batch = batch[:0]
		off += segFrameHeader
		crcStart = off
	}
	return torn, nil
}
