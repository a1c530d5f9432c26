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
	if logDir == "" {
		logDir = dataDir
	}
	snaps, _, err := files(version2(dataDir), "snapshot")
	if err != nil {
		return nil, nil, err
	}
	rep := &Report{}
	var snap *Snapshot
	for i := len(snaps) - 1; i >= 0; i-- {
		s, err := ReadSnapshotFile(snaps[i])
		if err != nil {
			rep.SkippedSnaps = append(rep.SkippedSnaps, err.Error())
			continue
		}
		snap, rep.Snapshot = s, snaps[i]
		break
	}
	logs, firsts, err := files(version2(logDir), "log")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, err
	}
	var t *tree
	if snap == nil {
		if len(snaps) > 0 {
			return nil, nil, fmt.Errorf("no snapshot in %s verifies: %s", version2(dataDir), strings.Join(rep.SkippedSnaps, "; "))
		}
		// A ZooKeeper that never took a snapshot starts from its initial tree and the logs.
		t, _ = newTree(initialSnapshot())
	} else if t, err = newTree(snap); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", rep.Snapshot, err)
	}
	// The logs to read: the last that starts at or before the snapshot's zxid, and every later
	// one (a log holds the transactions from the zxid in its name on).
	start := 0
	for i, z := range firsts {
		if z <= t.zxid {
			start = i
		}
	}
	for _, path := range logs[start:] {
		l, err := ReadLogFile(path)
		if err != nil {
			return nil, nil, err
		}
		rep.Logs = append(rep.Logs, path)
		if l.Torn {
			rep.TornLogs = append(rep.TornLogs, path)
		}
		for i := range l.Txns {
			x := &l.Txns[i]
			if x.Header.Zxid <= t.zxid {
				continue
			}
			t.apply(x)
			rep.Txns++
		}
	}
	return t.state(), rep, nil
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
