package main

import (
	"bytes"
	"fmt"
	"io"

	"github.com/zkd-io/zkd/consensus"
	"github.com/zkd-io/zkd/internal/zkfile"
)

// importCmd seeds a new zkd data directory from a stopped Apache ZooKeeper's files: the newest
// snapshot that verifies and every logged transaction after it, as ZooKeeper itself would load
// them. zxids go on from ZooKeeper's last one, and its sessions keep their ids, timeouts and
// passwords, so clients that talked to ZooKeeper reattach to zkd.
func importCmd(args []string, stdout, stderr io.Writer) int {
	fs := toolFlags("import", stderr, "zkd import -from DIR [-from-log DIR] -data DIR [-config zoo.cfg]")
	from := fs.String("from", "", "ZooKeeper's dataDir (holding version-2/snapshot.*)")
	fromLog := fs.String("from-log", "", "ZooKeeper's dataLogDir, when it is not dataDir (holding version-2/log.*)")
	data := fs.String("data", "", "the new zkd server's data directory (must hold no zkd data)")
	configPath := fs.String("config", "", "the new server's zoo.cfg: its myid and the cluster's members (default: standalone); seed every member from the same files")
	if fs.Parse(args) != nil || fs.NArg() != 0 || *from == "" || *data == "" {
		fs.Usage()
		return 2
	}
	id, peers, err := membersFromConfig(*configPath)
	if err != nil {
		fmt.Fprintf(stderr, "zkd import: %v\n", err)
		return 1
	}
	st, rep, err := zkfile.Load(*from, *fromLog)
	if err != nil {
		fmt.Fprintf(stderr, "zkd import: %v\n", err)
		return 1
	}
	for _, s := range rep.SkippedSnaps {
		fmt.Fprintf(stderr, "zkd import: passed over a snapshot that does not verify: %s\n", s)
	}
	for _, l := range rep.TornLogs {
		fmt.Fprintf(stderr, "zkd import: %s ends in a partly written entry (a crash); it was left out, as ZooKeeper does\n", l)
	}
	t, err := st.Tree()
	if err != nil {
		fmt.Fprintf(stderr, "zkd import: %v\n", err)
		return 1
	}
	var buf bytes.Buffer
	if err := consensus.WriteBackup(&buf, t.View()); err != nil {
		fmt.Fprintf(stderr, "zkd import: %v\n", err)
		return 1
	}
	v, err := consensus.RestoreDir(*data, &buf, id, peers)
	if err != nil {
		fmt.Fprintf(stderr, "zkd import: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "imported %s and %d transactions from %d logs: zxid 0x%x, %d znodes, %d sessions, into %s; start zkd on it\n",
		rep.Snapshot, rep.Txns, len(rep.Logs), v.Zxid(), v.NodeCount(), len(v.Sessions()), *data)
	return 0
}
