package recipes

import (
	"crypto/rand"
	"encoding/hex"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Protocol selects how contender nodes are named and ordered under a lock path. Every
// participant on one path must compute the same winner from the same children, so a Go process
// that shares a path with Curator or kazoo clients must use that library's protocol.
type Protocol int

const (
	// Native is the default protocol. Nodes are named like Curator's
	// (_c_<uuid>-lock-<seq>, _c_<uuid>-__WRIT__<seq>, _c_<uuid>-__READ__<seq>), children that do not
	// have that shape are ignored, and sequence numbers are compared with 32-bit serial-number
	// arithmetic, so the order stays right when the parent's counter wraps past 2^31-1. Serial
	// arithmetic is exact while the live contenders on one path span fewer than 2^31 sequence
	// numbers.
	Native Protocol = iota
	// Curator is Apache Curator's protocol (InterProcessMutex, LeaderSelector and
	// InterProcessReadWriteLock): every child is a contender, ordered byte-wise by the text after
	// the last lock marker (or the whole name when it has none). Readers wait for the first writer
	// ahead of them. Like Curator itself it misorders sequence numbers after the 32-bit wrap.
	Curator
	// Kazoo is the Python kazoo library's protocol (Lock, ReadLock, WriteLock): nodes are
	// <32 hex>__lock__<seq> or <32 hex>__rlock__<seq>, contenders are the children whose name ends
	// in a marker of the role's set and a ten-character sequence, compared as strings. A kazoo Lock
	// ignores __rlock__ readers; only a WriteLock honours them.
	Kazoo
	// CuratorLatch is Curator's LeaderLatch protocol, for an Election that shares a path with
	// LeaderLatch participants: it is the Curator protocol with the marker latch- instead of lock-
	// (nodes _c_<uuid>-latch-<seq>, ordered by the text after the last latch-). A LeaderLatch
	// participant's id is its node's data, so give each Go candidate its id with WithData.
	CuratorLatch
)

// String returns the protocol's name.
func (p Protocol) String() string {
	switch p {
	case Native:
		return "native"
	case Curator:
		return "curator"
	case Kazoo:
		return "kazoo"
	case CuratorLatch:
		return "curator-latch"
	default:
		return "Protocol(" + strconv.Itoa(int(p)) + ")"
	}
}

// role is what a contender node asks for.
type role int

const (
	roleExclusive role = iota // a Mutex, an election candidate, a semaphore lease
	roleWrite                 // an RWMutex writer
	roleRead                  // an RWMutex reader
)

// Markers that precede the sequence number in a node name.
const (
	markLock      = "lock-"
	markLatch     = "latch-"
	markCurRead   = "__READ__"
	markCurWrite  = "__WRIT__"
	markKazooLock = "__lock__"
	markKazooRead = "__rlock__"
	protectPrefix = "_c_"
)

// newUUID returns a random version-4 UUID in canonical lower-case form (36 characters).
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// newHex32 returns 16 random bytes as 32 lower-case hex characters, kazoo's uuid4().hex.
func newHex32() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return hex.EncodeToString(b[:])
}

// marker returns the text that the protocol puts before the sequence number for a role.
func (p Protocol) marker(r role) string {
	switch p {
	case Kazoo:
		if r == roleRead {
			return markKazooRead
		}
		return markKazooLock
	case CuratorLatch:
		if r == roleExclusive {
			return markLatch
		}
		return Curator.marker(r)
	default:
		switch r {
		case roleRead:
			return markCurRead
		case roleWrite:
			return markCurWrite
		default:
			return markLock
		}
	}
}

// newPrefix returns a fresh, unique name prefix for one create attempt: the node is created as
// prefix+<seq>, and after a lost reply it is found again by that prefix.
func (p Protocol) newPrefix(r role) string {
	if p == Kazoo {
		return newHex32() + p.marker(r)
	}
	return protectPrefix + newUUID() + "-" + p.marker(r)
}

// nativeName matches a native contender: _c_<id>-<marker><seq>.
var nativeName = regexp.MustCompile(`^_c_[0-9a-zA-Z-]+-(lock-|__READ__|__WRIT__)(-?[0-9]{1,10})$`)

// parseNative returns the role and sequence number of a native contender name.
func parseNative(name string) (role, int32, bool) {
	m := nativeName.FindStringSubmatch(name)
	if m == nil {
		return 0, 0, false
	}
	seq, err := strconv.ParseInt(m[2], 10, 32)
	if err != nil {
		return 0, 0, false
	}
	r := roleExclusive
	switch m[1] {
	case markCurRead:
		r = roleRead
	case markCurWrite:
		r = roleWrite
	}
	return r, int32(seq), true
}

// seqBefore reports whether sequence a was issued before b, by serial-number arithmetic on the
// parent's signed 32-bit counter.
func seqBefore(a, b int32) bool { return int32(uint32(b)-uint32(a)) > 0 }

// decision is the outcome of examining the children of a lock path.
type decision struct {
	held  bool   // our node is granted
	watch string // the child to watch (getData) when not held
	found bool   // our own node is among the children
}

// decide computes whether own (a child name with role r) holds the lock among children, and
// which single child to watch otherwise. It is pure, so every protocol's ordering is unit-tested
// without a server.
func (p Protocol) decide(children []string, own string, r role) decision {
	if !slices.Contains(children, own) {
		return decision{}
	}
	switch p {
	case Curator, CuratorLatch:
		return curatorDecide(children, own, r, p.marker(roleExclusive))
	case Kazoo:
		return kazooDecide(children, own, r)
	default:
		return nativeDecide(children, own, r)
	}
}

// blocks reports whether a lower contender of role other blocks a contender of role r.
func blocks(r, other role) bool {
	if r == roleRead {
		return other != roleRead
	}
	return true
}

func nativeDecide(children []string, own string, r role) decision {
	_, ownSeq, ok := parseNative(own)
	if !ok {
		return decision{found: true, held: false, watch: ""}
	}
	d := decision{found: true}
	var best int32
	for _, c := range children {
		if c == own {
			continue
		}
		cr, cs, ok := parseNative(c)
		if !ok || !blocks(r, cr) {
			continue
		}
		if !seqBefore(cs, ownSeq) && !(cs == ownSeq && c < own) {
			continue
		}
		dist := int32(uint32(ownSeq) - uint32(cs))
		if d.watch == "" || dist < best || (dist == best && c > d.watch) {
			d.watch, best = c, dist
		}
	}
	d.held = d.watch == ""
	return d
}

// curatorKey is Curator's sort key: the text after the last marker (lock, the exclusive one:
// lock- or latch-), or the whole name.
func curatorKey(name string, r role, lock string) string {
	if r == roleExclusive {
		if i := strings.LastIndex(name, lock); i >= 0 {
			return name[i+len(lock):]
		}
		return name
	}
	key := name
	if i := strings.LastIndex(key, markCurRead); i >= 0 {
		key = key[i+len(markCurRead):]
	}
	if i := strings.LastIndex(key, markCurWrite); i >= 0 {
		key = key[i+len(markCurWrite):]
	}
	return key
}

func curatorDecide(children []string, own string, r role, lock string) decision {
	sorted := slices.Clone(children)
	slices.SortStableFunc(sorted, func(a, b string) int {
		return strings.Compare(curatorKey(a, r, lock), curatorKey(b, r, lock))
	})
	idx := slices.Index(sorted, own)
	d := decision{found: true}
	if r != roleRead {
		if idx > 0 {
			d.watch = sorted[idx-1]
		}
		d.held = d.watch == ""
		return d
	}
	for _, c := range sorted[:idx] {
		if strings.Contains(c, markCurWrite) {
			d.watch = c
			break
		}
	}
	d.held = d.watch == ""
	return d
}

// kazooPattern is kazoo's contender expression for a set of markers.
func kazooPattern(markers ...string) *regexp.Regexp {
	quoted := make([]string, len(markers))
	for i, m := range markers {
		quoted[i] = regexp.QuoteMeta(m)
	}
	return regexp.MustCompile(`(?:` + strings.Join(quoted, "|") + `)(-?\d{10})$`)
}

var (
	kazooLockOnly  = kazooPattern(markKazooLock)
	kazooLockRead  = kazooPattern(markKazooLock, markKazooRead)
	kazooOwnSuffix = regexp.MustCompile(`(-?\d{10})$`)
)

func kazooDecide(children []string, own string, r role) decision {
	re := kazooLockOnly
	if r == roleWrite {
		re = kazooLockRead
	}
	d := decision{found: true}
	var ownSeq string
	if om := kazooOwnSuffix.FindStringSubmatch(own); om != nil {
		ownSeq = om[1]
	} else if i := strings.LastIndex(own, "__"); i >= 0 {
		ownSeq = own[i+2:] // a wrapped small negative such as -000000005: kazoo's own regex misses it
	}
	bestSeq := ""
	for _, c := range children {
		if c == own {
			continue
		}
		m := re.FindStringSubmatch(c)
		if m == nil || m[1] >= ownSeq {
			continue
		}
		if d.watch == "" || m[1] > bestSeq || (m[1] == bestSeq && c > d.watch) {
			d.watch, bestSeq = c, m[1]
		}
	}
	d.held = d.watch == ""
	return d
}

// seqSuffix returns the sequence text that ZooKeeper appended to a node created from prefix.
func seqSuffix(name, prefix string) string {
	return strings.TrimPrefix(name, prefix)
}
