package chaos

import (
	"bytes"
	"cmp"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/zkd-io/zkd/jute"
)

// The checks, as named in reports.
const (
	CheckRegisters   = "registers"   // linearizable setData (porcupine) and the final values
	CheckReads       = "reads"       // per-session monotonic reads
	CheckFIFO        = "fifo"        // per-connection prefix and order, nothing lost or doubled
	CheckSessionEnd  = "session-end" // nothing a session wrote carries a zxid after its close
	CheckEphemerals  = "ephemerals"  // no ephemeral of an ended session remains
	CheckFencing     = "fencing"     // tokens never decrease as the resource's version grows
	CheckConvergence = "convergence" // every server has the same zxid and tree
	CheckServe       = "serve"       // every server serves again after a heal (within a bound)
	CheckRace        = "race"        // no data race report in a server's log
)

// Checks lists the checks in report order.
var Checks = []string{CheckRegisters, CheckReads, CheckFIFO, CheckSessionEnd, CheckEphemerals,
	CheckFencing, CheckConvergence, CheckServe, CheckRace}

// Violation is one broken guarantee.
type Violation struct {
	Check  string
	Detail string
}

func (v Violation) String() string { return v.Check + ": " + v.Detail }

// hex formats a zxid or session id as ZooKeeper logs do.
func hex(v int64) string { return "0x" + strconv.FormatInt(v, 16) }

// parseFIFOData parses a FIFO write's data "<epoch>:<n>".
func parseFIFOData(b []byte) (epoch, n int, ok bool) {
	e, rest, found := bytes.Cut(b, []byte{':'})
	if !found {
		return 0, 0, false
	}
	epoch, err1 := strconv.Atoi(string(e))
	n, err2 := strconv.Atoi(string(rest))
	return epoch, n, err1 == nil && err2 == nil && n >= 0
}

// checkFIFO checks one FIFO session against the tree: every node under its directory is one of
// its writes, applied once; every acknowledged write is there at the path its reply named; no
// write that failed is there; within each epoch the applied writes (leaving out those that
// failed) are a prefix of those sent; and czxids increase in send order, across epochs too.
func checkFIFO(s *FIFOSession, d Dump) []Violation {
	var out []Violation
	bad := func(format string, args ...any) {
		out = append(out, Violation{CheckFIFO, fmt.Sprintf("session %s: ", s.Name) + fmt.Sprintf(format, args...)})
	}
	for _, p := range s.Protocol {
		bad("%s", p)
	}
	applied := map[int]Node{}
	for _, p := range d.Children(s.Dir) {
		nd := d[p]
		epoch, n, ok := parseFIFOData(nd.Data)
		if !ok || n >= len(s.Writes) {
			bad("node %s (czxid %s) holds %q, which the session never sent", p, hex(nd.Stat.Czxid), nd.Data)
			continue
		}
		if prev, dup := applied[n]; dup {
			bad("write %d (epoch %d) applied twice: %s (czxid %s) and %s (czxid %s)",
				n, epoch, prev.Path, hex(prev.Stat.Czxid), p, hex(nd.Stat.Czxid))
			continue
		}
		if w := s.Writes[n]; w.Epoch != epoch {
			bad("node %s holds epoch %d for write %d, which was sent in epoch %d", p, epoch, n, w.Epoch)
		}
		applied[n] = nd
	}
	for n, w := range s.Writes {
		nd, ok := applied[n]
		switch w.Outcome {
		case OK:
			if !ok {
				bad("acknowledged write lost: write %d of epoch %d (to server %d) was created as %s at zxid %s but is not in the tree",
					n, w.Epoch, w.Server+1, w.Path, hex(w.Zxid))
			} else if nd.Path != w.Path {
				bad("write %d of epoch %d was acknowledged as %s but applied as %s (czxid %s)",
					n, w.Epoch, w.Path, nd.Path, hex(nd.Stat.Czxid))
			}
		case Failed:
			if ok {
				bad("write %d of epoch %d failed with %v (zxid %s) yet is applied as %s (czxid %s)",
					n, w.Epoch, w.Code, hex(w.Zxid), nd.Path, hex(nd.Stat.Czxid))
			}
		}
	}
	// Prefix: per epoch, in send order, among writes that did not fail. Each hole (a run of
	// writes never applied, followed by an applied write of the same epoch) is one violation.
	for i := 0; i < len(s.Writes); {
		w := s.Writes[i]
		if _, ok := applied[i]; ok || w.Outcome == Failed {
			i++
			continue
		}
		// A run of missing writes of one epoch, failed ones skipped.
		j, missing := i, 0
		outcomes := map[Outcome]int{}
		for j < len(s.Writes) && s.Writes[j].Epoch == w.Epoch {
			if _, ok := applied[j]; ok {
				break
			}
			if s.Writes[j].Outcome != Failed {
				missing++
				outcomes[s.Writes[j].Outcome]++
			}
			j++
		}
		if _, ok := applied[j]; ok && j < len(s.Writes) && s.Writes[j].Epoch == w.Epoch {
			nd := applied[j]
			bad("gap in epoch %d (server %d): writes %d..%d (%d never applied: %d without a reply, %d acknowledged) are missing, yet write %d sent after them on the same connection was applied (%s, czxid %s)",
				w.Epoch, w.Server+1, i, j-1, missing, outcomes[Unknown], outcomes[OK], j, nd.Path, hex(nd.Stat.Czxid))
		}
		i = j
	}
	// Order: czxid grows with the send order.
	prev := -1
	for n := range s.Writes {
		nd, ok := applied[n]
		if !ok {
			continue
		}
		if prev >= 0 && nd.Stat.Czxid <= applied[prev].Stat.Czxid {
			pn := applied[prev]
			bad("write %d (epoch %d, %s, czxid %s) was applied before write %d sent earlier (epoch %d, %s, czxid %s)",
				n, s.Writes[n].Epoch, nd.Path, hex(nd.Stat.Czxid), prev, s.Writes[prev].Epoch, pn.Path, hex(pn.Stat.Czxid))
		}
		prev = n
	}
	return out
}

// checkSessionEnd checks, for every session whose marker is gone, that nothing it wrote carries a
// zxid after its close: the marker parent's pzxid. The nodes of its Owns subtrees must have been
// created (and modified) before, its acknowledged writes replied before, and every attributed
// node whose data names it as last writer ("<session>:…") modified before. When the test saw the
// closeSession reply, its zxid must be that pzxid.
func checkSessionEnd(sessions []*SessionRecord, d Dump, attributed []string) []Violation {
	var out []Violation
	closed := map[string]int64{}
	byName := map[string]*SessionRecord{}
	for _, s := range sessions {
		byName[s.Name] = s
		if s.Marker == "" {
			continue
		}
		if _, alive := d[s.Marker]; alive {
			continue
		}
		bad := func(format string, args ...any) {
			out = append(out, Violation{CheckSessionEnd, fmt.Sprintf("session %s (%s, %s, %s): ", s.Name, hex(s.ID), s.Kind, s.End) + fmt.Sprintf(format, args...)})
		}
		parent, ok := d[path.Dir(s.Marker)]
		if !ok {
			bad("the marker's parent %s is missing", path.Dir(s.Marker))
			continue
		}
		end := parent.Stat.Pzxid
		closed[s.Name] = end
		if s.CloseZxid != 0 && s.CloseZxid != end {
			bad("closeSession was answered at zxid %s but the marker was deleted at zxid %s (pzxid of %s)",
				hex(s.CloseZxid), hex(end), parent.Path)
		}
		for _, root := range s.Owns {
			for _, p := range d.Under(root) {
				nd := d[p]
				if nd.Stat.Czxid > end || nd.Stat.Mzxid > end {
					bad("it ended at zxid %s but %s has czxid %s, mzxid %s (data %q)",
						hex(end), p, hex(nd.Stat.Czxid), hex(nd.Stat.Mzxid), nd.Data)
				}
			}
		}
		for _, a := range s.Acked {
			if a.Zxid > end {
				bad("it ended at zxid %s but its write %s was acknowledged at zxid %s", hex(end), a.What, hex(a.Zxid))
			}
		}
	}
	for _, p := range attributed {
		nd, ok := d[p]
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(string(nd.Data), ":")
		end, ok := closed[name]
		if !ok || nd.Stat.Mzxid <= end {
			continue
		}
		s := byName[name]
		out = append(out, Violation{CheckSessionEnd, fmt.Sprintf("session %s (%s, %s, %s) ended at zxid %s but %s was last set by it at mzxid %s (data %q)",
			name, hex(s.ID), s.Kind, s.End, hex(end), p, hex(nd.Stat.Mzxid), nd.Data)})
	}
	return out
}

// checkEphemerals reports every ephemeral owned by a session that has ended (dead maps the
// session id to a description).
func checkEphemerals(dead map[int64]string, d Dump) []Violation {
	var out []Violation
	paths := make([]string, 0, len(d))
	for p := range d {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		nd := d[p]
		if who, ok := dead[nd.Stat.EphemeralOwner]; ok && nd.Stat.EphemeralOwner != 0 {
			out = append(out, Violation{CheckEphemerals, fmt.Sprintf("%s (czxid %s) is still owned by session %s (%s), which ended",
				p, hex(nd.Stat.Czxid), hex(nd.Stat.EphemeralOwner), who)})
		}
	}
	return out
}

// checkFencing checks the lock holders' acknowledged guarded writes: ordered by the version they
// produced, no version appears twice and tokens never decrease.
func checkFencing(ws []GuardedWrite) []Violation {
	ws = slices.Clone(ws)
	slices.SortStableFunc(ws, func(a, b GuardedWrite) int { return cmp.Compare(a.Version, b.Version) })
	var out []Violation
	for i := 1; i < len(ws); i++ {
		a, b := ws[i-1], ws[i]
		switch {
		case a.Version == b.Version:
			out = append(out, Violation{CheckFencing, fmt.Sprintf("two guarded writes produced version %d: %s with token %s (mzxid %s) and %s with token %s (mzxid %s)",
				a.Version, a.Session, hex(a.Token), hex(a.Mzxid), b.Session, hex(b.Token), hex(b.Mzxid))})
		case b.Token < a.Token:
			out = append(out, Violation{CheckFencing, fmt.Sprintf("token went down: version %d was written by %s with token %s (mzxid %s), then version %d by %s with the older token %s (mzxid %s)",
				a.Version, a.Session, hex(a.Token), hex(a.Mzxid), b.Version, b.Session, hex(b.Token), hex(b.Mzxid))})
		}
	}
	return out
}

// checkReads checks that no session reads a register at an older version than one it read or
// wrote before.
func checkReads(obs map[string][]RegObs) []Violation {
	var out []Violation
	names := make([]string, 0, len(obs))
	for n := range obs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		seen := map[string]RegObs{}
		for _, o := range obs[name] {
			prev, ok := seen[o.Key]
			if ok && o.Read && o.Version < prev.Version {
				how := "read"
				if !prev.Read {
					how = "wrote"
				}
				out = append(out, Violation{CheckReads, fmt.Sprintf("session %s read %s at version %d (mzxid %s) after it %s version %d (mzxid %s)",
					name, o.Key, o.Version, hex(o.Mzxid), how, prev.Version, hex(prev.Mzxid))})
			}
			if !ok || o.Version > prev.Version {
				seen[o.Key] = o
			}
		}
	}
	return out
}

// regModel is the sequential specification of a register's version under setData: a set whose
// expected version matches (or is -1) increments it, any other fails with BadVersion. Plain
// reads are not part of it (ZooKeeper reads are not linearizable).
var regModel = porcupine.NondeterministicModel{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range h {
			k := op.Input.(RegOp).Key
			if _, ok := by[k]; !ok {
				keys = append(keys, k)
			}
			by[k] = append(by[k], op)
		}
		slices.Sort(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, by[k])
		}
		return out
	},
	Init: func() []any { return []any{int32(0)} },
	Step: func(state, input, output any) []any {
		v, in, res := state.(int32), input.(RegOp), output.(RegOp)
		matches := in.Version == -1 || in.Version == v
		switch res.Outcome {
		case Unknown:
			if matches {
				return []any{v, v + 1}
			}
			return []any{v}
		case OK:
			if matches && res.NewVersion == v+1 {
				return []any{v + 1}
			}
		case Failed:
			if !matches && res.Code == jute.CodeBadVersion {
				return []any{v}
			}
		}
		return nil
	},
	Equal: func(a, b any) bool { return a.(int32) == b.(int32) },
	DescribeOperation: func(input, output any) string {
		in, res := input.(RegOp), output.(RegOp)
		return fmt.Sprintf("set %s v%d %q -> %v v%d %v", in.Key, in.Version, in.Data, res.Outcome, res.NewVersion, res.Code)
	},
}

// checkRegisters checks the setData history for linearizability with porcupine (each register
// created at version 0 before the run), and the registers' final values in the tree: written by
// a set that did not fail, at the version that set reported. inconclusive is set when porcupine
// ran out of time.
func checkRegisters(ops []RegOp, d Dump, keys []string, timeout time.Duration) (out []Violation, inconclusive bool) {
	var maxRet int64
	for _, op := range ops {
		maxRet = max(maxRet, op.Return, op.Call)
	}
	hist := make([]porcupine.Operation, 0, len(ops))
	for _, op := range ops {
		ret := op.Return
		if op.Outcome == Unknown || ret < 0 {
			ret = maxRet + int64(time.Hour)
		}
		hist = append(hist, porcupine.Operation{ClientId: op.Client, Input: op, Call: op.Call, Output: op, Return: ret})
	}
	res, info := porcupine.CheckOperationsVerbose(regModel.ToModel(), hist, timeout)
	switch res {
	case porcupine.Illegal:
		out = append(out, Violation{CheckRegisters, "setData history is not linearizable: " + describeIllegal(info, ops)})
	case porcupine.Unknown:
		inconclusive = true
	}
	byData := map[string]RegOp{}
	for _, op := range ops {
		byData[op.Data] = op
	}
	for _, k := range keys {
		nd, ok := d[k]
		if !ok {
			out = append(out, Violation{CheckRegisters, fmt.Sprintf("register %s is missing from the tree", k)})
			continue
		}
		if nd.Stat.Version == 0 {
			continue // never written
		}
		op, ok := byData[string(nd.Data)]
		switch {
		case !ok:
			out = append(out, Violation{CheckRegisters, fmt.Sprintf("register %s holds %q at version %d, which no client wrote", k, nd.Data, nd.Stat.Version)})
		case op.Outcome == Failed:
			out = append(out, Violation{CheckRegisters, fmt.Sprintf("register %s holds %q at version %d, written by a set that failed with %v", k, nd.Data, nd.Stat.Version, op.Code)})
		case op.Outcome == OK && op.NewVersion != nd.Stat.Version:
			out = append(out, Violation{CheckRegisters, fmt.Sprintf("register %s holds %q at version %d, but that set was acknowledged with version %d and nothing overwrote it", k, nd.Data, nd.Stat.Version, op.NewVersion)})
		}
	}
	return out, inconclusive
}

// describeIllegal names the register and the longest linearizable prefix porcupine found.
func describeIllegal(info porcupine.LinearizationInfo, ops []RegOp) string {
	partial := info.PartialLinearizationsOperations()
	var b strings.Builder
	for i, part := range partial {
		if len(part) == 0 {
			continue
		}
		longest := part[0]
		for _, p := range part {
			if len(p) > len(longest) {
				longest = p
			}
		}
		fmt.Fprintf(&b, "partition %d: longest linearizable prefix has %d ops; its last ones:", i, len(longest))
		for _, op := range longest[max(0, len(longest)-5):] {
			in := op.Input.(RegOp)
			res := op.Output.(RegOp)
			fmt.Fprintf(&b, " [client %d set %s v%d %q -> %v v%d %v]", in.Client, in.Key, in.Version, in.Data, res.Outcome, res.NewVersion, res.Code)
		}
		b.WriteString("; ")
	}
	if b.Len() == 0 {
		return fmt.Sprintf("%d operations", len(ops))
	}
	return b.String()
}

// localConfigNode is not replicated state: each ZooKeeper server synthesises it when it loads its
// configuration, with its own mtime. Its data is compared, its Stat is not.
const localConfigNode = "/zookeeper/config"

// diffDumps describes up to limit differences between two servers' trees.
func diffDumps(a, b Dump, an, bn string, limit int) []string {
	var out []string
	paths := map[string]bool{}
	for p := range a {
		paths[p] = true
	}
	for p := range b {
		paths[p] = true
	}
	sorted := make([]string, 0, len(paths))
	for p := range paths {
		sorted = append(sorted, p)
	}
	slices.Sort(sorted)
	n := 0
	for _, p := range sorted {
		x, inA := a[p]
		y, inB := b[p]
		var diff string
		switch {
		case !inA:
			diff = fmt.Sprintf("%s only on %s (czxid %s, data %q)", p, bn, hex(y.Stat.Czxid), y.Data)
		case !inB:
			diff = fmt.Sprintf("%s only on %s (czxid %s, data %q)", p, an, hex(x.Stat.Czxid), x.Data)
		case !bytes.Equal(x.Data, y.Data) || (x.Stat != y.Stat && p != localConfigNode):
			diff = fmt.Sprintf("%s differs: %s has %q %+v, %s has %q %+v", p, an, x.Data, x.Stat, bn, y.Data, y.Stat)
		default:
			continue
		}
		n++
		if n <= limit {
			out = append(out, diff)
		}
	}
	if n > limit {
		out = append(out, fmt.Sprintf("%d more differences", n-limit))
	}
	return out
}
