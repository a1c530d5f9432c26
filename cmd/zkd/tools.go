package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"

	"github.com/zkd-io/zkd/consensus"
	"github.com/zkd-io/zkd/znode"
)

// The data-directory tools: zkd verify, zkd dump log|snapshot, zkd repair. Each works on a
// stopped server's directory (they take its lock).

const toolsUsage = `  zkd verify DIR           check every checksum of a stopped server's data directory
  zkd dump log DIR         one line per log entry (-json for JSON lines)
  zkd dump snapshot FILE   one line per znode of a snapshot's state.bin (-json for JSON lines)
  zkd repair -truncate N DIR  drop the log from entry N on (after damage; loses those writes)
`

// runTool runs a tool subcommand; ok is false when args name none.
func runTool(args []string, stdout, stderr io.Writer) (code int, ok bool) {
	if len(args) == 0 {
		return 0, false
	}
	switch args[0] {
	case "verify":
		return verifyCmd(args[1:], stdout, stderr), true
	case "dump":
		return dumpCmd(args[1:], stdout, stderr), true
	case "repair":
		return repairCmd(args[1:], stdout, stderr), true
	}
	return 0, false
}

func toolFlags(name string, stderr io.Writer, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: %s\n", usage)
		fs.PrintDefaults()
	}
	return fs
}

func verifyCmd(args []string, stdout, stderr io.Writer) int {
	fs := toolFlags("verify", stderr, "zkd verify DIR")
	if fs.Parse(args) != nil || fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	dir := fs.Arg(0)
	rep, err := consensus.VerifyDir(dir)
	if err != nil {
		fmt.Fprintf(stderr, "zkd verify: %v\n", err)
		var d *consensus.DamageError
		if errors.As(err, &d) {
			fmt.Fprint(stderr, damageAdvice(dir, d))
		}
		return 1
	}
	fmt.Fprintf(stdout, "%s: intact\n", dir)
	fmt.Fprintf(stdout, "log store %s: entries %d..%d (durable through %d)\n", rep.LogStore, rep.FirstIndex, rep.LastIndex, rep.Durable)
	for _, s := range rep.Snapshots {
		fmt.Fprintf(stdout, "snapshot %s: index %d term %d, %d bytes, zxid 0x%x, %d znodes, %d sessions\n",
			s.ID, s.Index, s.Term, s.Size, s.Zxid, s.Nodes, s.Sessions)
	}
	if rep.TornBytes > 0 {
		fmt.Fprintf(stdout, "the log ends in an append a crash interrupted (%d bytes, never acknowledged): the next start drops it\n", rep.TornBytes)
	}
	return 0
}

// damageAdvice tells an operator what to do about damage in dir.
func damageAdvice(dir string, d *consensus.DamageError) string {
	s := fmt.Sprintf(`The data in %s is damaged (%s). zkd will not serve it. Choose one:
  - restore a copy taken with the server stopped (README, "Backing up"), or, in a cluster, move
    this member's data directory aside and add it back empty (zkd -join, then reconfig -add),
    so that it takes the leader's copy;
`, dir, d.File)
	if d.Index > 1 {
		s += fmt.Sprintf("  - drop the log from entry %d on, losing the writes stored after it: zkd repair -truncate %d %s\n", d.Index, d.Index, dir)
	}
	return s + fmt.Sprintf("Run zkd verify %s to check the directory again.\n", dir)
}

func dumpCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "log" && args[0] != "snapshot") {
		fmt.Fprint(stderr, "Usage: zkd dump log DIR | zkd dump snapshot FILE  [-json]\n")
		return 2
	}
	what := args[0]
	fs := toolFlags("dump "+what, stderr, "zkd dump "+what+" [-json] PATH")
	asJSON := fs.Bool("json", false, "one JSON object per line")
	if fs.Parse(args[1:]) != nil || fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	enc := json.NewEncoder(stdout)
	var err error
	if what == "log" {
		err = consensus.DumpLog(fs.Arg(0), func(r consensus.LogRecord) error {
			if *asJSON {
				return enc.Encode(r)
			}
			if r.Kind != "txn" {
				_, err := fmt.Fprintf(stdout, "%d\tterm %d\t%s\t%d bytes\n", r.Index, r.Term, r.Kind, r.Size)
				return err
			}
			_, err := fmt.Fprintf(stdout, "%d\tterm %d\t%s\tsession %s\t%s\t%s\tdata %d\t%d bytes\n",
				r.Index, r.Term, r.Time.Format("2006-01-02T15:04:05.000Z07:00"), r.Session, r.Op, r.Path, r.DataSize, r.Size)
			return err
		})
	} else {
		err = consensus.DumpSnapshot(fs.Arg(0), func(zxid int64, ss []znode.Session) error {
			if *asJSON {
				type sess struct {
					ID      string `json:"session"`
					Timeout int32  `json:"timeout"`
				}
				out := struct {
					Zxid     string `json:"zxid"`
					Sessions []sess `json:"sessions"`
				}{Zxid: fmt.Sprintf("0x%x", zxid), Sessions: []sess{}}
				for _, s := range ss {
					out.Sessions = append(out.Sessions, sess{fmt.Sprintf("0x%x", s.ID), s.Timeout})
				}
				return enc.Encode(out)
			}
			fmt.Fprintf(stdout, "zxid 0x%x, %d sessions\n", zxid, len(ss))
			for _, s := range ss {
				fmt.Fprintf(stdout, "session 0x%x\ttimeout %d\n", s.ID, s.Timeout)
			}
			return nil
		}, func(n consensus.NodeRecord) error {
			if *asJSON {
				return enc.Encode(n)
			}
			st := n.Stat
			_, err := fmt.Fprintf(stdout, "%s\tczxid 0x%x\tmzxid 0x%x\tpzxid 0x%x\tversion %d\tcversion %d\taversion %d\tephemeralOwner 0x%x\tchildren %d\tdata %d\n",
				n.Path, st.Czxid, st.Mzxid, st.Pzxid, st.Version, st.Cversion, st.Aversion, st.EphemeralOwner, st.NumChildren, st.DataLength)
			return err
		})
	}
	if err != nil {
		fmt.Fprintf(stderr, "zkd dump %s: %v\n", what, err)
		return 1
	}
	return 0
}

func repairCmd(args []string, stdout, stderr io.Writer) int {
	fs := toolFlags("repair", stderr, "zkd repair -truncate N DIR")
	from := fs.String("truncate", "", "drop the log entries from this index on")
	if fs.Parse(args) != nil || fs.NArg() != 1 || *from == "" {
		fs.Usage()
		return 2
	}
	idx, err := strconv.ParseUint(*from, 10, 64)
	if err != nil {
		fmt.Fprintf(stderr, "zkd repair: -truncate %q: not an index\n", *from)
		return 2
	}
	n, err := consensus.TruncateLog(fs.Arg(0), idx)
	if err != nil {
		fmt.Fprintf(stderr, "zkd repair: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "dropped %d log entries from %d on; run zkd verify %s\n", n, idx, fs.Arg(0))
	return 0
}
