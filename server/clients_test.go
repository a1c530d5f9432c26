package server_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/zkd-io/zkd/internal/testkit/pyclient"
	"github.com/zkd-io/zkd/server/zkdtest"
)

// Smoke tests with the ZooKeeper clients users have: kazoo (python3-kazoo), the Java client
// through zkCli.sh (zookeeper) and the C client cli_mt (zookeeper-bin). Each skips when its
// client is not installed.

const (
	zkCli = "/usr/share/zookeeper/bin/zkCli.sh"
	cliMt = "/usr/lib/zookeeper/bin/cli_mt"
)

func runClient(t *testing.T, timeout time.Duration, stdin string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

func smokeTargets(t *testing.T) map[string]string {
	return map[string]string{
		"standalone": zkdtest.Start(t, zkdtest.WithoutRaft()).Addr(),
		"cluster":    strings.Join(zkdtest.StartCluster(t, 3).Addrs(), ","),
	}
}

func TestKazooSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("runs an external client")
	}
	py := pyclient.KazooPython(t)
	for name, hosts := range smokeTargets(t) {
		out := runClient(t, 60*time.Second, "", py, "testdata/kazoo_smoke.py", hosts)
		if !strings.Contains(out, "kazoo ok") {
			t.Errorf("%s: kazoo output:\n%s", name, out)
		}
	}
}

func TestZkCliSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("runs an external client")
	}
	if _, err := os.Stat(zkCli); err != nil {
		t.Skip("zkCli.sh is not installed (Debian package zookeeper)")
	}
	if _, err := exec.LookPath("java"); err != nil {
		t.Skip("no java for zkCli.sh")
	}
	script := strings.Join([]string{
		"create /zkcli hello",
		"create -e /zkcli/eph e",
		"create -s /zkcli/seq- s",
		"get /zkcli",
		"set /zkcli world",
		"ls /zkcli",
		"getEphemerals /zkcli",
		"addWatch -m PERSISTENT_RECURSIVE /zkcli",
		"set /zkcli/eph again",
		"getAllChildrenNumber /zkcli",
		"addauth digest alice:pw",
		"whoami",
		"sync /",
		"deleteall /zkcli",
		"ls /",
		"quit",
	}, "\n") + "\n"
	for name, hosts := range smokeTargets(t) {
		out := runClient(t, 90*time.Second, script, zkCli, "-server", hosts)
		for _, want := range []string{
			"Created /zkcli\n", "hello\n", "[eph, seq-0000000001]", "[/zkcli/eph]",
			"type:NodeDataChanged path:/zkcli/eph", "digest: alice", "Sync is OK", "[zookeeper]",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: zkCli output lacks %q:\n%s", name, want, out)
			}
		}
	}
}

func TestCliMtSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("runs an external client")
	}
	if _, err := os.Stat(cliMt); err != nil {
		t.Skip("cli_mt is not installed (Debian package zookeeper-bin)")
	}
	for name, hosts := range smokeTargets(t) {
		// Batch mode runs one command per process; cli_mt passes the rest of the line as the path.
		if out := runClient(t, 30*time.Second, "", cliMt, "-h", hosts, "-c", "create /cmt"); !strings.Contains(out, "[/cmt]: rc = 0") {
			t.Errorf("%s: cli_mt create:\n%s", name, out)
		}
		if out := runClient(t, 30*time.Second, "", cliMt, "-h", hosts, "-c", "ls /"); !strings.Contains(out, "/: rc = 0") || !strings.Contains(out, "\tcmt\n") {
			t.Errorf("%s: cli_mt ls:\n%s", name, out)
		}
		if out := runClient(t, 30*time.Second, "", cliMt, "-h", hosts, "-c", "ls2 /cmt"); !strings.Contains(out, "/cmt: rc = 0") {
			t.Errorf("%s: cli_mt ls2:\n%s", name, out)
		}
	}
}
