package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/zkd-io/zkd/consensus"
	"github.com/zkd-io/zkd/internal/zkfile"
	"github.com/zkd-io/zkd/znode"
)

// importCmd seeds a new zkd data directory from a stopped Apache ZooKeeper's files: the newest
// snapshot that verifies and every logged transaction after it, as ZooKeeper itself would load
// them. zxids go on from ZooKeeper's last one, and its sessions keep their ids, timeouts and
// passwords, so clients that talked to ZooKeeper reattach to zkd.
func importCmd(args []string, stdout, stderr io.Writer) int {
	fs := toolFlags("import", stderr, "zkd import -from DIR [-from-log DIR] ... -data DIR [-config zoo.cfg]")
	var froms, fromLogs listFlag
	fs.Var(&froms, "from", "ZooKeeper's dataDir (holding version-2/snapshot.*); repeat it for each member of an ensemble, and the one with the highest zxid is imported")
	fs.Var(&fromLogs, "from-log", "ZooKeeper's dataLogDir when it is not dataDir (holding version-2/log.*); repeated in the order of -from")
	data := fs.String("data", "", "the new zkd server's data directory (must hold no zkd data)")
	configPath := fs.String("config", "", "the new server's zoo.cfg: its myid and the cluster's members (default: standalone); seed every member from the same files")
	ignoreDigest := fs.Bool("ignore-digest", false, "import even when the rebuilt tree's digest differs from the one ZooKeeper logged (ZooKeeper only logs that; zkd refuses by default)")
	if fs.Parse(args) != nil || fs.NArg() != 0 || len(froms) == 0 || *data == "" || (len(fromLogs) != 0 && len(fromLogs) != len(froms)) {
		fs.Usage()
		return 2
	}
	if os.Getenv("GOGC") == "" {
		// An import only builds: nearly everything it allocates stays live until it ends, so
		// each collection mostly marks what the last one marked. At the default GOGC=100 that
		// marking took 18 s of a 10 M-node import's 55 s of CPU; at 400 the import takes 10 s
		// less CPU, for a peak RSS 1.6 GB higher (8.2 GB at 10 M; the import before it peaked
		// at 11 GB).
		// GOGC and GOMEMLIMIT in the environment still rule; the setting is restored on return.
		defer debug.SetGCPercent(debug.SetGCPercent(importGCPercent))
	}
	id, peers, err := membersFromConfig(*configPath)
	if err != nil {
		fmt.Fprintf(stderr, "zkd import: %v\n", err)
		return 1
	}
	var (
		st  *zkfile.State
		rep *zkfile.Report
	)
	for i, from := range froms {
		logDir := ""
		if len(fromLogs) > 0 {
			logDir = fromLogs[i]
		}
		s, r, err := zkfile.LoadWith(from, logDir, zkfile.Options{IgnoreDigest: *ignoreDigest})
		if errors.Is(err, zkfile.ErrDigest) {
			fmt.Fprintf(stderr, "zkd import: %s: %v\nThe files do not rebuild the tree ZooKeeper had (or zkd replays them differently: please report it). Check ZooKeeper's own log for a digest mismatch; -ignore-digest imports anyway.\n", from, err)
			return 1
		}
		if err != nil {
			fmt.Fprintf(stderr, "zkd import: %v\n", err)
			return 1
		}
		if r.DigestMismatch != "" {
			fmt.Fprintf(stderr, "zkd import: %s: WARNING, imported anyway (-ignore-digest): %s\n", from, r.DigestMismatch)
		}
		for _, sk := range r.SkippedSnaps {
			fmt.Fprintf(stderr, "zkd import: passed over a snapshot that does not verify: %s\n", sk)
		}
		for _, l := range r.TornLogs {
			fmt.Fprintf(stderr, "zkd import: %s ends in a partly written entry (a crash); it was left out, as ZooKeeper does\n", l)
		}
		if len(froms) > 1 {
			fmt.Fprintf(stdout, "%s: zxid 0x%x\n", from, s.Zxid)
		}
		// As ZooKeeper's election would, take the member that has seen the most.
		if st == nil || s.Zxid > st.Zxid {
			st, rep = s, r
		}
	}
	t, err := st.Tree()
	if err != nil {
		fmt.Fprintf(stderr, "zkd import: %v\n", err)
		return 1
	}
	// The tree's snapshot goes straight into the new directory: the tree was built through the
	// snapshot reader, so it is not encoded into a backup and read back a second time.
	v := t.View()
	if err := consensus.SeedDir(*data, v, id, peers); err != nil {
		fmt.Fprintf(stderr, "zkd import: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "imported %s and %d transactions from %d logs: zxid 0x%x, %d znodes, %d sessions, into %s; start zkd on it\n",
		rep.Snapshot, rep.Txns, len(rep.Logs), v.Zxid(), v.NodeCount(), len(v.Sessions()), *data)
	return 0
}

// importGCPercent is the GOGC of zkd import, unless the environment sets one.
const importGCPercent = 400

// listFlag is a flag that may be given more than once.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// exportCmd writes the state of a stopped standalone zkd server, or of a backup (zkd backup,
// which also works on a running server or cluster), as a snapshot in ZooKeeper's format in
// ZooKeeper's dataDir, which Apache ZooKeeper then loads: the way back.
func exportCmd(args []string, stdout, stderr io.Writer) int {
	fs := toolFlags("export", stderr, "zkd export (-data DIR | -backup FILE) -out DIR")
	data := fs.String("data", "", "a stopped standalone zkd server's data directory")
	backup := fs.String("backup", "", "a backup file (zkd backup -admin URL takes one of a running server)")
	out := fs.String("out", "", "ZooKeeper's dataDir: the snapshot goes into its version-2/")
	if fs.Parse(args) != nil || fs.NArg() != 0 || *out == "" || (*data == "") == (*backup == "") {
		fs.Usage()
		return 2
	}
	var v *znode.View
	if *data != "" {
		var err error
		if v, err = consensus.BackupDir(*data, io.Discard); err != nil {
			fmt.Fprintf(stderr, "zkd export: %v\n", err)
			return 1
		}
	} else {
		f, err := os.Open(*backup)
		if err != nil {
			fmt.Fprintf(stderr, "zkd export: %v\n", err)
			return 1
		}
		t, err := consensus.ReadBackup(f)
		f.Close()
		if err != nil {
			fmt.Fprintf(stderr, "zkd export: %v\n", err)
			return 1
		}
		v = t.View()
	}
	path, err := zkfile.ExportView(*out, v)
	if err != nil {
		fmt.Fprintf(stderr, "zkd export: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "exported zxid 0x%x (%d znodes, %d sessions) as %s; start ZooKeeper with dataDir=%s\n",
		v.Zxid(), v.NodeCount(), len(v.Sessions()), path, *out)
	return 0
}
