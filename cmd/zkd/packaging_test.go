package main

import (
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"
)

const entrypoint = "../../packaging/docker/docker-entrypoint.sh"

// runEntrypoint runs the image's entrypoint with env (and ZOO_*_DIR under dir) and args as its
// command, and returns the zoo.cfg it left.
func runEntrypoint(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("sh", append([]string{entrypoint}, args...)...)
	cmd.Env = append(append(os.Environ(),
		"ZOO_CONF_DIR="+filepath.Join(dir, "conf"), "ZOO_DATA_DIR="+filepath.Join(dir, "data"),
		"ZOO_DATA_LOG_DIR="+filepath.Join(dir, "datalog")), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("entrypoint: %v: %s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "conf", "zoo.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func parseCfg(t *testing.T, cfg string) settings {
	t.Helper()
	st, err := parseZooCfg(strings.NewReader(cfg), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("zkd refuses the generated zoo.cfg: %v\n%s", err, cfg)
	}
	return st
}

// With no environment, the entrypoint writes what the official ZooKeeper image writes (one
// server, clients on 2181), and zkd accepts it. A zoo.cfg and a myid that exist are kept.
func TestDockerEntrypointDefaults(t *testing.T) {
	dir := t.TempDir()
	cfg := runEntrypoint(t, dir, nil, "true")
	for _, line := range []string{"dataDir=" + filepath.Join(dir, "data"), "tickTime=2000", "initLimit=5", "syncLimit=2",
		"maxClientCnxns=60", "admin.enableServer=true", "server.1=localhost:2888:3888;2181"} {
		if !strings.Contains(cfg, line+"\n") {
			t.Errorf("zoo.cfg lacks %q:\n%s", line, cfg)
		}
	}
	st := parseCfg(t, cfg)
	if st.cfg.ServerID != 1 || st.cfg.Addr != ":2181" || st.cfg.MaxClientConns != 60 {
		t.Errorf("zkd reads it as %+v", st.cfg)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "data", "myid")); string(b) != "1\n" {
		t.Errorf("myid = %q", b)
	}
	// A mounted zoo.cfg and an existing myid win over the environment.
	if again := runEntrypoint(t, dir, []string{"ZOO_MY_ID=7", "ZOO_TICK_TIME=50"}, "true"); again != cfg {
		t.Errorf("an existing zoo.cfg was rewritten:\n%s", again)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "data", "myid")); string(b) != "1\n" {
		t.Errorf("an existing myid was rewritten: %q", b)
	}
}

// The compose file's three servers get configurations zkd reads as one three-member cluster,
// each with its own id; extra keys and the four-letter-word list pass through.
func TestDockerComposeServers(t *testing.T) {
	b, err := os.ReadFile("../../packaging/docker/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ids := regexp.MustCompile(`ZOO_MY_ID: (\d+)`).FindAllStringSubmatch(string(b), -1)
	servers := regexp.MustCompile(`ZOO_SERVERS: (.*)`).FindAllStringSubmatch(string(b), -1)
	if len(ids) != 3 || len(servers) != 3 {
		t.Fatalf("compose.yaml: %d ids, %d server lists; want 3 of each", len(ids), len(servers))
	}
	for i := range ids {
		dir := t.TempDir()
		cfg := runEntrypoint(t, dir, []string{"ZOO_MY_ID=" + ids[i][1], "ZOO_SERVERS=" + servers[i][1],
			"ZOO_4LW_COMMANDS_WHITELIST=*", "ZOO_CFG_EXTRA=reconfigEnabled=true maxSessionTimeout=30000"}, "true")
		st := parseCfg(t, cfg)
		if got := st.cfg.ServerID; got != int64(i+1) || len(st.cfg.Peers) != 3 || !st.cfg.ReconfigEnabled ||
			st.cfg.MaxSessionTimeout.Milliseconds() != 30000 {
			t.Errorf("service %d: zkd reads id %d, %d peers, reconfig %v, max session %v", i+1, got, len(st.cfg.Peers),
				st.cfg.ReconfigEnabled, st.cfg.MaxSessionTimeout)
		}
		if st.cfg.Peers[i].PeerAddr != "zoo"+ids[i][1]+":2888" || st.cfg.Peers[i].ElectionPort != 3888 {
			t.Errorf("service %d: peer %+v", i+1, st.cfg.Peers[i])
		}
	}
}

// The entrypoint's default command runs zkd on the generated configuration: it serves.
func TestDockerEntrypointStartsZkd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin, err := buildZkd()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	client := freePort(t)
	peer := strings.Split(freePort(t), ":")[1]
	cmd := exec.Command("sh", entrypoint)
	p := &zkdProcess{cmd: cmd, out: &syncBuffer{}}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"),
		"ZOO_CONF_DIR="+filepath.Join(dir, "conf"), "ZOO_DATA_DIR="+filepath.Join(dir, "data"),
		"ZOO_DATA_LOG_DIR="+filepath.Join(dir, "datalog"), "ZOO_ADMINSERVER_ENABLED=false",
		"ZOO_SERVERS=server.1=127.0.0.1:"+peer+":3888;"+client)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitRuok(t, client, p)
	c := connectZk(t, client)
	defer c.Close()
	if _, err := c.Create("/in-docker", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
}

// The systemd unit passes systemd-analyze verify (with ExecStart pointing at a built zkd).
func TestSystemdUnitVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin, err := buildZkd()
	if err != nil {
		t.Fatal(err)
	}
	unit, err := os.ReadFile("../../packaging/systemd/zkd.service")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "zkd.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/zkd", bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	if err != nil || strings.Contains(string(out), "zkd.service") {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}
