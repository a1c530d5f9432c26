package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkd-io/zkd/internal/testkit"
	"github.com/zkd-io/zkd/internal/testkit/tmpfs"
	"github.com/zkd-io/zkd/internal/testkit/zktest"
)

// runZkdTool runs the binary to completion and returns its exit status and output.
func runZkdTool(t *testing.T, args ...string) (int, string) {
	t.Helper()
	bin, err := buildZkd()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

// The operator's path through damage, with the real binary on real files: a stopped server's
// directory verifies and dumps; four bytes flipped inside a znode's data in the newest log file
// make the server refuse to start, naming the file, the entry and what to do, and zkd verify
// exit non-zero; zkd repair -truncate at the named entry lets it start again without it.
func TestDamagedDataRefusedWithAdvice(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	addr := freePort(t)
	cfg := filepath.Join(t.TempDir(), "zoo.cfg")
	_, port, _ := strings.Cut(addr, ":")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, "tickTime=2000\ndataDir=%s\nclientPort=%s\nclientPortAddress=127.0.0.1\nsnapCount=20\nadmin.enableServer=false\n", dir, port), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startZkd(t, "-config", cfg)
	waitRuok(t, addr, p)
	c := connectZk(t, addr)
	for i := range 40 {
		if _, err := c.Create(fmt.Sprintf("/n%04d", i), fmt.Appendf(nil, "payload-%04d", i), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	// A snapshot is taken within a few seconds of passing snapCount; the writes after it stay in
	// the log only.
	if !testkit.Until(20*time.Second, func() bool {
		snaps, _ := filepath.Glob(filepath.Join(dir, "raft", "snapshots", "*", "state.bin"))
		return len(snaps) > 0
	}) {
		t.Fatalf("no snapshot; output:\n%s", p.out.String())
	}
	for i := 40; i < 50; i++ {
		if _, err := c.Create(fmt.Sprintf("/n%04d", i), fmt.Appendf(nil, "payload-%04d", i), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()

	if code, out := runZkdTool(t, "verify", dir); code != 0 || !strings.Contains(out, "intact") {
		t.Fatalf("verify of an intact directory: exit %d\n%s", code, out)
	}
	code, out := runZkdTool(t, "dump", "log", dir)
	if code != 0 || !regexp.MustCompile(`(?m)^\d+\tterm \d+\t\S+\tsession 0x[0-9a-f]+\tcreate\t/n0045\tdata 12\t`).MatchString(out) {
		t.Fatalf("dump log: exit %d\n%s", code, out)
	}
	code, out = runZkdTool(t, "dump", "log", "-json", dir)
	if code != 0 {
		t.Fatalf("dump log -json: exit %d\n%s", code, out)
	}
	for line := range strings.Lines(out) {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil || r["index"] == nil {
			t.Fatalf("dump log -json line %q: %v", line, err)
		}
	}
	snaps, _ := filepath.Glob(filepath.Join(dir, "raft", "snapshots", "*", "state.bin"))
	code, out = runZkdTool(t, "dump", "snapshot", snaps[0])
	if code != 0 || !regexp.MustCompile(`(?m)^/n0007\tczxid 0x[0-9a-f]+\tmzxid 0x[0-9a-f]+\tpzxid 0x[0-9a-f]+\tversion 0\t.*\tdata 12$`).MatchString(out) {
		t.Fatalf("dump snapshot: exit %d\n%s", code, out)
	}

	// Four bytes of /n0045's data flipped in the newest log segment.
	segs, _ := filepath.Glob(filepath.Join(dir, "raft", "wal", "*.wal"))
	seg := segs[len(segs)-1]
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(b, []byte("payload-0045"))
	if at < 0 {
		t.Fatal("the newest segment does not hold /n0045's data")
	}
	for i := range 4 {
		b[at+8+i] ^= 0xff
	}
	if err := os.WriteFile(seg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out = runZkdTool(t, "-config", cfg)
	entry := regexp.MustCompile(`log entry (\d+)`).FindStringSubmatch(out)
	if code == 0 || entry == nil || !strings.Contains(out, seg) || !strings.Contains(out, "zkd verify") || !strings.Contains(out, "zkd repair -truncate "+entry[1]) {
		t.Fatalf("start on damaged data: exit %d\n%s", code, out)
	}
	if strings.Contains(out, "panic") || strings.Contains(out, "goroutine") {
		t.Fatalf("the damaged start panicked:\n%s", out)
	}
	if code, vout := runZkdTool(t, "verify", dir); code != 1 || !strings.Contains(vout, "log entry "+entry[1]) {
		t.Fatalf("verify of the damaged directory: exit %d\n%s", code, vout)
	}
	if code, rout := runZkdTool(t, "repair", "-truncate", entry[1], dir); code != 0 {
		t.Fatalf("repair: exit %d\n%s", code, rout)
	}
	if code, vout := runZkdTool(t, "verify", dir); code != 0 {
		t.Fatalf("verify after the repair: exit %d\n%s", code, vout)
	}
	p = startZkd(t, "-config", cfg)
	waitRuok(t, addr, p)
	c = connectZk(t, addr)
	defer c.Close()
	if data, _, err := c.Get("/n0044"); err != nil || string(data) != "payload-0044" {
		t.Fatalf("/n0044 after the repair: %q %v", data, err)
	}
	if ok, _, _ := c.Exists("/n0045"); ok {
		t.Fatal("/n0045, whose entry was damaged and dropped, exists")
	}
}

// A 20 MB data volume (a tmpfs mounted for the test; it needs root, as CI has): zkd starts,
// takes writes and serves them after a restart. The log's segment files are sized to the space
// available instead of 64 MiB each.
func TestSmallDataVolume(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	if os.Geteuid() != 0 {
		t.Skip("mounting a 20 MB tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=20m", "zkd-test", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount: %v: %s", err, out)
		}
	})
	addr := freePort(t)
	args := []string{"-data", dir, "-addr", addr, "-admin", "off"}
	p := startZkd(t, args...)
	waitRuok(t, addr, p)
	// 20 MB is less than the 64 MiB of log a snapshot waits for by default: the start says so.
	if !strings.Contains(p.out.String(), "less free space than the log may grow to before a snapshot") {
		t.Fatalf("no warning about the small volume:\n%s", p.out.String())
	}
	c := connectZk(t, addr)
	data := bytes.Repeat([]byte("x"), 1024)
	for i := range 500 {
		if _, err := c.Create(fmt.Sprintf("/s%04d", i), data, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatalf("create %d on a 20 MB volume: %v\n%s", i, err, p.out.String())
		}
	}
	c.Close()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_ = p.cmd.Wait()
	p = startZkd(t, args...)
	waitRuok(t, addr, p)
	c = connectZk(t, addr)
	defer c.Close()
	if got, _, err := c.Get("/s0499"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("after a restart: %v", err)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_ = p.cmd.Wait()
}

// A standalone server whose disk fills up (another file takes every byte): writes fail at once
// with OperationTimeout (nothing done), while reads, new sessions and mntr go on and say so; once the
// file is removed, writes are taken again without a restart, and after a restart every
// acknowledged write is there. The disk-full state is logged once.
func TestDiskFullStandalone(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	vol := tmpfs.Mount(t, "16m")
	addr := freePort(t)
	args := []string{"-data", filepath.Join(vol, "data"), "-addr", addr, "-admin", "off"}
	p := startZkd(t, args...)
	waitRuok(t, addr, p)
	c := connectZk(t, addr)
	var acked []string
	create := func(path string) error {
		_, err := c.Create(path, []byte(path), 0, zk.WorldACL(zk.PermAll))
		if err == nil {
			acked = append(acked, path)
		}
		return err
	}
	for i := range 50 {
		if err := create(fmt.Sprintf("/before-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	filler := tmpfs.Fill(t, vol)

	var refused error
	i := 0
	if !testkit.Until(15*time.Second, func() bool {
		refused = create(fmt.Sprintf("/while-%d", i))
		i++
		return refused != nil
	}) {
		t.Fatalf("writes still taken on a full disk; output:\n%s", p.out.String())
	}
	if !strings.Contains(refused.Error(), "-7") {
		t.Fatalf("a write on a full disk failed with %v; want OperationTimeout (-7)", refused)
	}
	if data, _, err := c.Get("/before-7"); err != nil || string(data) != "/before-7" {
		t.Fatalf("read on a full disk: %q %v", data, err)
	}
	c2 := connectZk(t, addr) // a new session is a small entry: it still works
	if ok, _, err := c2.Exists("/before-49"); err != nil || !ok {
		t.Fatalf("a new session's read on a full disk: %v %v", ok, err)
	}
	c2.Close()
	if mntr := fourLetter(t, addr, "mntr"); !strings.Contains(mntr, "zk_disk_full\t1") {
		t.Fatalf("mntr on a full disk:\n%s", mntr)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	i = 0
	if err := error(nil); !testkit.Until(20*time.Second, func() bool {
		err = create(fmt.Sprintf("/after-%d", i))
		i++
		return err == nil
	}) {
		t.Fatalf("writes not taken again after space was freed: %v\n%s", err, p.out.String())
	}
	c.Close()
	if n := strings.Count(p.out.String(), "disk is full"); n != 1 {
		t.Fatalf("the full disk was logged %d times; want once:\n%s", n, p.out.String())
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_ = p.cmd.Wait()

	p = startZkd(t, args...)
	waitRuok(t, addr, p)
	c = connectZk(t, addr)
	defer c.Close()
	for _, path := range acked {
		if data, _, err := c.Get(path); err != nil || string(data) != path {
			t.Fatalf("acknowledged %s after the restart: %q %v", path, data, err)
		}
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_ = p.cmd.Wait()
}

// fourLetter sends a four-letter word and returns the answer.
func fourLetter(t *testing.T, addr, word string) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte(word)); err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(conn)
	return string(b)
}

// walkTree reads every znode under / (but /zookeeper) with its data, Stat and ACL.
func walkTree(t *testing.T, c *zk.Conn) map[string]string {
	t.Helper()
	out := map[string]string{}
	for p, e := range zktest.DumpTree(t, c) {
		if p != "/zookeeper" && !strings.HasPrefix(p, "/zookeeper/") {
			out[p] = fmt.Sprintf("%q %+v %v", e.Data, e.Stat, e.ACL)
		}
	}
	return out
}

// Backup and restore through the real binary: a running server's tree (versions, ACLs,
// sequential and ephemeral nodes) is backed up through its admin server, which needs ALL
// permission on / as in ZooKeeper; the backup dumps and verifies; a new server restored from it
// serves the identical tree, every Stat field included, and its zxids go on above the backup's.
// A stopped standalone directory backs up too.
func TestBackupRestoreRoundTrip(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	addr, admin := freePort(t), freePort(t)
	p := startZkd(t, "-data", dir, "-addr", addr, "-admin", admin)
	waitRuok(t, addr, p)
	c := connectZk(t, addr)
	open := zk.WorldACL(zk.PermAll)
	for i := range 20 {
		path := fmt.Sprintf("/app-%02d", i)
		if _, err := c.Create(path, fmt.Appendf(nil, "v%d", i), 0, open); err != nil {
			t.Fatal(err)
		}
		for range i % 4 {
			if _, err := c.Set(path, []byte("changed"), -1); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 5 {
		if _, err := c.Create("/app-03/seq-", nil, zk.FlagSequence, open); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Create("/app-04/owned", []byte("e"), zk.FlagEphemeral, open); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create("/locked", []byte("secret"), 0, zk.DigestACL(zk.PermRead, "reader", "pw")); err != nil {
		t.Fatal(err)
	}
	if err := c.AddAuth("digest", []byte("admin:pw")); err != nil {
		t.Fatal(err)
	}
	// Only admin:pw may back up: / gets ALL for it alone (and read for everyone).
	rootACL := append(zk.DigestACL(zk.PermAll, "admin", "pw"), zk.WorldACL(zk.PermRead)...)
	if _, err := c.SetACL("/", rootACL, -1); err != nil {
		t.Fatal(err)
	}
	if err := c.AddAuth("digest", []byte("reader:pw")); err != nil {
		t.Fatal(err)
	}
	want := walkTree(t, c)

	out := filepath.Join(t.TempDir(), "zkd.backup")
	if code, o := runZkdTool(t, "backup", "-admin", "http://"+admin, "-out", out); code == 0 || !strings.Contains(o, "403") {
		t.Fatalf("a backup without ALL on /: exit %d\n%s", code, o)
	}
	code, o := runZkdTool(t, "backup", "-admin", "http://"+admin, "-auth", "admin:pw", "-out", out)
	if code != 0 || !strings.Contains(o, "written to") {
		t.Fatalf("backup: exit %d\n%s", code, o)
	}
	if code, o := runZkdTool(t, "dump", "snapshot", out); code != 0 || !strings.Contains(o, "/app-03/seq-0000000004") {
		t.Fatalf("dump of the backup: exit %d\n%s", code, o)
	}
	c.Close()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_ = p.cmd.Wait()
	if code, o := runZkdTool(t, "backup", "-data", dir, "-out", filepath.Join(t.TempDir(), "offline")); code != 0 {
		t.Fatalf("backup of a stopped directory: exit %d\n%s", code, o)
	}

	restored := filepath.Join(t.TempDir(), "restored")
	if code, o := runZkdTool(t, "restore", "-backup", out, "-data", restored); code != 0 {
		t.Fatalf("restore: exit %d\n%s", code, o)
	}
	if code, o := runZkdTool(t, "restore", "-backup", out, "-data", restored); code == 0 {
		t.Fatalf("a restore over existing data succeeded:\n%s", o)
	}
	if code, o := runZkdTool(t, "verify", restored); code != 0 || !strings.Contains(o, "intact") {
		t.Fatalf("verify of the restored directory: exit %d\n%s", code, o)
	}
	p = startZkd(t, "-data", restored, "-addr", addr, "-admin", "off")
	waitRuok(t, addr, p)
	c = connectZk(t, addr)
	defer c.Close()
	for _, cred := range []string{"admin:pw", "reader:pw"} {
		if err := c.AddAuth("digest", []byte(cred)); err != nil {
			t.Fatal(err)
		}
	}
	got := walkTree(t, c)
	for path, w := range want {
		if got[path] != w {
			t.Errorf("%s after restore:\n got %s\nwant %s", path, got[path], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("restored %d znodes, want %d", len(got), len(want))
	}
	_, before, _ := c.Get("/app-19")
	if _, err := c.Create("/after-restore", nil, 0, open); err != nil {
		t.Fatal(err)
	}
	_, st, err := c.Get("/after-restore")
	if err != nil || st.Czxid <= before.Mzxid {
		t.Fatalf("a write after the restore has zxid %d, not above the backup's %d (%v)", st.Czxid, before.Mzxid, err)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_ = p.cmd.Wait()
}
