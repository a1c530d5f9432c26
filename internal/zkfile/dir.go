package zkfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/zkd-io/zkd/jute"
)

// Report says what Load read.
type Report struct {
	Snapshot     string   // the snapshot file the state starts from
	SkippedSnaps []string // newer snapshots that did not verify, each with its error
	Logs         []string // the log files replayed
	TornLogs     []string // logs that ended in a partly written entry (a crash; not an error)
	Txns         int      // transactions applied after the snapshot
	// DigestChecked reports that the rebuilt tree's digest was compared with the one ZooKeeper
	// logged after the last transaction (3.6 and later log one) and matched.
	DigestChecked bool
	// DigestMismatch describes a digest that did not match, when Options.IgnoreDigest let the
	// load go on.
	DigestMismatch string
}

// Options adjust Load.
type Options struct {
	// IgnoreDigest reports a tree digest that differs from ZooKeeper's logged one in
	// Report.DigestMismatch instead of failing. ZooKeeper itself only logs such a mismatch; zkd
	// refuses by default, since the tree would not be the one ZooKeeper had.
	IgnoreDigest bool
}

// version2 returns dir/version-2 when it exists, else dir itself (the caller may name either).
func version2(dir string) string {
	v := filepath.Join(dir, "version-2")
	if fi, err := os.Stat(v); err == nil && fi.IsDir() {
		return v
	}
	return dir
}

// files lists dir's files named prefix.<hex zxid>[.suffix], sorted by zxid.
func files(dir, prefix string) ([]string, []int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	type f struct {
		name string
		zxid int64
	}
	var fs []f
	for _, e := range ents {
		if z, ok := ZxidFromName(e.Name(), prefix); ok && e.Type().IsRegular() {
			fs = append(fs, f{e.Name(), z})
		}
	}
	slices.SortFunc(fs, func(a, b f) int {
		if a.zxid != b.zxid {
			return int(sign(a.zxid - b.zxid))
		}
		return strings.Compare(a.name, b.name)
	})
	var names []string
	var zxids []int64
	for _, x := range fs {
		names = append(names, filepath.Join(dir, x.name))
		zxids = append(zxids, x.zxid)
	}
	return names, zxids, nil
}

func sign(x int64) int64 {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}

// Load rebuilds the state ZooKeeper would load from its data directory (snapshots) and its log
// directory (transaction logs; the same as dataDir unless ZooKeeper's dataLogDir was set).
// Either may name the directory that holds version-2/ or version-2/ itself.
//
// As ZooKeeper does, it takes the newest snapshot that verifies, then applies every logged
// transaction after it. A damaged log entry is an error: ZooKeeper refuses to start on one too.
func Load(dataDir, logDir string) (*State, *Report, error) {
	return LoadWith(dataDir, logDir, Options{})
}

// LoadWith is Load with options.
func LoadWith(dataDir, logDir string, opts Options) (*State, *Report, error) {
	if logDir == "" {
		logDir = dataDir
	}
	snaps, _, err := files(version2(dataDir), "snapshot")
	if err != nil {
		return nil, nil, err
	}
	logs, firsts, err := files(version2(logDir), "log")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, err
	}
	rep := &Report{}
	var (
		t     *tree
		later []*Log // the logs read for the snapshot t was built from
	)
	// The tree is built as the snapshot is read; one that does not verify is dropped whole. The
	// logs after the snapshot (its zxid is in its name) are read first: the transactions they
	// hold say how many nodes the tree's map must take and whether the digest will be checked.
	for i := len(snaps) - 1; i >= 0 && t == nil; i-- {
		zxid, ok := ZxidFromName(filepath.Base(snaps[i]), "snapshot")
		if !ok {
			rep.SkippedSnaps = append(rep.SkippedSnaps, snaps[i]+": not a snapshot name")
			continue
		}
		if later, err = readLogsAfter(logs, firsts, zxid); err != nil {
			return nil, nil, err
		}
		creates, digested := scan(later, zxid)
		b := newBuilder(nodesHint(snaps[i])+creates, digested)
		s, err := readSnapshotFile(snaps[i], b.add)
		if err != nil {
			rep.SkippedSnaps = append(rep.SkippedSnaps, err.Error())
			continue
		}
		rep.Snapshot = snaps[i]
		if t, err = b.finish(s); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", rep.Snapshot, err)
		}
	}
	if t == nil {
		if len(snaps) > 0 {
			return nil, nil, fmt.Errorf("no snapshot in %s verifies: %s", version2(dataDir), strings.Join(rep.SkippedSnaps, "; "))
		}
		// A ZooKeeper that never took a snapshot starts from its initial tree and the logs.
		t, _ = newTree(initialSnapshot())
		if later, err = readLogsAfter(logs, firsts, t.zxid); err != nil {
			return nil, nil, err
		}
	}
	var last *Txn // the last transaction applied
	for _, l := range later {
		rep.Logs = append(rep.Logs, l.Path)
		if l.Torn {
			rep.TornLogs = append(rep.TornLogs, l.Path)
		}
		for i := range l.Txns {
			x := &l.Txns[i]
			if x.Header.Zxid <= t.zxid {
				continue
			}
			t.apply(x)
			rep.Txns++
			last = x
		}
	}
	t.quotaStats()
	// ZooKeeper logs the tree's digest after each transaction: the rebuilt tree must have it.
	if last != nil && last.Digest != nil && last.Digest.Version == digestVersion {
		if got := t.digest(); got != last.Digest.Value {
			err := fmt.Errorf("%w: after zxid %#x ZooKeeper logged %#x, the rebuilt tree gives %#x", ErrDigest, last.Header.Zxid, uint64(last.Digest.Value), uint64(got))
			if !opts.IgnoreDigest {
				return nil, nil, err
			}
			rep.DigestMismatch = err.Error()
		} else {
			rep.DigestChecked = true
		}
	}
	return t.takeState(), rep, nil
}

// readLogsAfter reads the logs that can hold transactions after zxid: the last that starts at or
// before it, and every later one (a log holds the transactions from the zxid in its name on).
func readLogsAfter(logs []string, firsts []int64, zxid int64) ([]*Log, error) {
	start := 0
	for i, z := range firsts {
		if z <= zxid {
			start = i
		}
	}
	var out []*Log
	for _, path := range logs[start:] {
		l, err := ReadLogFileAfter(path, zxid)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// scan returns how many nodes the logged transactions after zxid create, at most, and whether
// the last of them carries a digest of the tree this package checks.
func scan(logs []*Log, zxid int64) (creates int, digested bool) {
	var count func(op *Op)
	count = func(op *Op) {
		switch op.Type {
		case jute.OpCreate, jute.OpCreate2, jute.OpCreateTTL, jute.OpCreateContainer:
			creates++
		case jute.OpMulti:
			for i := range op.Multi {
				count(&op.Multi[i])
			}
		}
	}
	var last *Txn
	for _, l := range logs {
		for i := range l.Txns {
			if x := &l.Txns[i]; x.Header.Zxid > zxid {
				count(&x.Op)
				last = x
			}
		}
	}
	return creates, last != nil && last.Digest != nil && last.Digest.Version == digestVersion
}

// nodesHint guesses the number of nodes in a snapshot file from its size, for the tree's map:
// growing a map of 11 M paths one doubling at a time took 10 s of a 10 M-node import. A node of
// the ClickHouse-shaped trees ZooKeeper holds takes about 200 bytes of an uncompressed snapshot;
// a guess too high costs some memory, one too low a doubling.
func nodesHint(path string) int {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	size := fi.Size()
	if strings.HasSuffix(path, ".gz") || strings.HasSuffix(path, ".snappy") {
		size *= 3
	}
	return int(min(size/200, 1<<30))
}

// initialSnapshot is the tree a new ZooKeeper starts with: the root, /zookeeper,
// /zookeeper/quota and /zookeeper/config (readable by anyone, its aversion -1), other stats zero.
func initialSnapshot() *Snapshot {
	return &Snapshot{
		Sessions: map[int64]int32{},
		ACLs:     map[int64][]jute.ACL{1: {{Perms: 1, ID: jute.Id{Scheme: "world", ID: "anyone"}}}},
		Nodes: []SnapNode{
			{Path: "", ACL: OpenACL},
			{Path: "/zookeeper", ACL: OpenACL},
			{Path: "/zookeeper/quota", ACL: OpenACL},
			{Path: "/zookeeper/config", ACL: 1, Data: []byte{}, Stat: Stat{Aversion: -1}},
		},
	}
}

// quotaStats sets the data of every quota's zookeeper_stats node to the count and bytes of the
// subtree it covers. ZooKeeper keeps those figures in memory only (they change with no logged
// transaction) and computes them again when it loads, so that is what a load must do too.
func (t *tree) quotaStats() {
	const quotaRoot = "/zookeeper/quota"
	var visit func(q *Node)
	visit = func(q *Node) { // q is under quotaRoot: look for zookeeper_stats below it
		for _, c := range q.Children {
			visit(c)
		}
		rest, ok := strings.CutPrefix(q.path, quotaRoot+"/")
		if !ok || !strings.HasSuffix(rest, "/zookeeper_stats") {
			return
		}
		target := "/" + strings.TrimSuffix(rest, "/zookeeper_stats")
		if t.nodes[quotaRoot+target+"/zookeeper_limits"] == nil || t.nodes[target] == nil {
			return
		}
		count, bytes := subtree(t.nodes[target])
		t.changing(q)
		q.Data = fmt.Appendf(nil, "count=%d,bytes=%d", count, bytes)
	}
	if q := t.nodes[quotaRoot]; q != nil {
		visit(q)
	}
}

// subtree returns the number of nodes under n, itself included, and their data bytes.
func subtree(n *Node) (count, bytes int64) {
	count, bytes = 1, int64(len(n.Data))
	for _, c := range n.Children {
		cc, cb := subtree(c)
		count += cc
		bytes += cb
	}
	return count, bytes
}
