package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/zkd-io/zkd/consensus"
	"github.com/zkd-io/zkd/internal/storage"
	"github.com/zkd-io/zkd/znode"
)

// The data-directory tools: zkd verify, zkd dump log|snapshot, zkd repair. Each works on a
// stopped server's directory (they take its lock).

const toolsUsage = `  zkd verify DIR           check every checksum of a stopped server's data directory
  zkd dump log DIR         one line per log entry (-json for JSON lines)
  zkd dump snapshot FILE   one line per znode of a snapshot's state.bin (-json for JSON lines)
  zkd repair -truncate N DIR  drop the log from entry N on (after damage; loses those writes)
  zkd backup -admin URL -out FILE  a consistent backup of a running server (its snapshot command)
  zkd backup -data DIR -out FILE   a backup of a stopped standalone server's directory
  zkd restore -backup FILE -data DIR [-config zoo.cfg]  seed a new server (or cluster member)
  zkd import -from DIR [-from-log DIR] -data DIR [-config zoo.cfg]  seed one from a stopped
                           Apache ZooKeeper's dataDir (and dataLogDir)
  zkd export (-data DIR | -backup FILE) -out DIR  write a ZooKeeper snapshot of a stopped
                           standalone server (or a backup) into ZooKeeper's dataDir DIR
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
	case "backup":
		return backupCmd(args[1:], stdout, stderr), true
	case "restore":
		return restoreCmd(args[1:], stdout, stderr), true
	case "import":
		return importCmd(args[1:], stdout, stderr), true
	case "export":
		return exportCmd(args[1:], stdout, stderr), true
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
	rep, err := storage.VerifyDir(dir)
	if err != nil {
		fmt.Fprintf(stderr, "zkd verify: %v\n", err)
		var d *storage.DamageError
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
func damageAdvice(dir string, d *storage.DamageError) string {
	s := fmt.Sprintf(`The data in %s is damaged (%s). zkd will not serve it. Choose one:
  - restore a backup (README, "Backing up"), or, in a cluster, move this member's data
    directory aside and start it with -join, so that it takes the leader's copy
    (zkd.rebuildOnDamage=true does that by itself);
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
		err = storage.DumpSnapshot(fs.Arg(0), func(zxid int64, ss []znode.Session) error {
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
		}, func(n storage.NodeRecord) error {
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
	n, err := storage.TruncateLog(fs.Arg(0), idx)
	if err != nil {
		fmt.Fprintf(stderr, "zkd repair: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "dropped %d log entries from %d on; run zkd verify %s\n", n, idx, fs.Arg(0))
	return 0
}

func backupCmd(args []string, stdout, stderr io.Writer) int {
	fs := toolFlags("backup", stderr, "zkd backup (-admin URL [-auth user:password] | -data DIR) -out FILE")
	admin := fs.String("admin", "", "a running server's admin server, e.g. http://127.0.0.1:8080")
	auth := fs.String("auth", "", "digest credentials user:password with ALL permission on /")
	data := fs.String("data", "", "a stopped standalone server's data directory")
	out := fs.String("out", "", "the backup file to write")
	if fs.Parse(args) != nil || fs.NArg() != 0 || *out == "" || (*admin == "") == (*data == "") {
		fs.Usage()
		return 2
	}
	tmp := *out + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		fmt.Fprintf(stderr, "zkd backup: %v\n", err)
		return 1
	}
	if *admin != "" {
		err = fetchSnapshot(*admin, *auth, f)
	} else {
		_, err = consensus.BackupDir(*data, f)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	var t *znode.Tree
	if err == nil {
		// Read back what was written before it takes the backup's name.
		var r *os.File
		if r, err = os.Open(tmp); err == nil {
			t, err = consensus.ReadBackup(r)
			r.Close()
		}
	}
	if err == nil {
		err = os.Rename(tmp, *out)
	}
	if err != nil {
		os.Remove(tmp)
		fmt.Fprintf(stderr, "zkd backup: %v\n", err)
		return 1
	}
	v := t.View()
	fmt.Fprintf(stdout, "backup of zxid 0x%x (%d znodes, %d sessions) written to %s\n", v.Zxid(), v.NodeCount(), len(v.Sessions()), *out)
	return 0
}

// fetchSnapshot streams a running server's snapshot command into w.
func fetchSnapshot(admin, auth string, w io.Writer) error {
	if !strings.Contains(admin, "://") {
		admin = "http://" + admin
	}
	req, err := http.NewRequest(http.MethodGet, strings.TrimSuffix(admin, "/")+"/commands/snapshot?streaming=true", nil)
	if err != nil {
		return err
	}
	if auth != "" {
		req.Header.Set("Authorization", "digest "+auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/octet-stream" {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("%s answered %s: %s", admin, resp.Status, strings.TrimSpace(string(b)))
	}
	_, err = io.Copy(w, resp.Body)
	return err
}

func restoreCmd(args []string, stdout, stderr io.Writer) int {
	fs := toolFlags("restore", stderr, "zkd restore -backup FILE -data DIR [-config zoo.cfg]")
	backup := fs.String("backup", "", "the backup file (zkd backup)")
	data := fs.String("data", "", "the new server's data directory (must hold no zkd data)")
	configPath := fs.String("config", "", "the new server's zoo.cfg: its myid and the cluster's members (default: standalone)")
	if fs.Parse(args) != nil || fs.NArg() != 0 || *backup == "" || *data == "" {
		fs.Usage()
		return 2
	}
	id, peers, err := membersFromConfig(*configPath)
	if err != nil {
		fmt.Fprintf(stderr, "zkd restore: %v\n", err)
		return 1
	}
	f, err := os.Open(*backup)
	if err != nil {
		fmt.Fprintf(stderr, "zkd restore: %v\n", err)
		return 1
	}
	defer f.Close()
	v, err := consensus.RestoreDir(*data, f, id, peers)
	if err != nil {
		fmt.Fprintf(stderr, "zkd restore: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "restored zxid 0x%x (%d znodes, %d sessions) into %s; start zkd on it\n", v.Zxid(), v.NodeCount(), len(v.Sessions()), *data)
	return 0
}

// membersFromConfig returns the server id and the cluster members a zoo.cfg names; with no
// file, a standalone server (id 1, no members).
func membersFromConfig(path string) (string, []consensus.Peer, error) {
	if path == "" {
		return "1", nil, nil
	}
	cf, err := os.Open(path)
	if err != nil {
		return "", nil, err
	}
	defer cf.Close()
	st, err := parseZooCfg(cf, slog.New(slog.DiscardHandler))
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", path, err)
	}
	id := int64(1)
	if st.cfg.ServerID != 0 {
		id = st.cfg.ServerID
	}
	var peers []consensus.Peer
	for _, p := range st.cfg.Peers {
		peers = append(peers, consensus.Peer{ID: strconv.FormatInt(p.ID, 10), Addr: p.PeerAddr})
	}
	return strconv.FormatInt(id, 10), peers, nil
}
