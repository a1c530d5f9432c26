// Package zktest holds test machinery shared by zkd's black-box suites: starting a real Apache
// ZooKeeper (the reference implementation) on loopback through the project's zk-anchor tool, so the
// same tests can run against ZooKeeper and zkd side by side.
//
// It is imported only from _test.go files.
package zktest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ErrNoZooKeeper reports that a real ZooKeeper cannot be started here: the zk-anchor tool or the
// Debian zookeeper package (with a JVM) is missing.
var ErrNoZooKeeper = errors.New("zktest: no Apache ZooKeeper available (zk-anchor or the zookeeper package is missing)")

// ZooKeeper is a real Apache ZooKeeper started by StartZooKeeper or StartEnsemble.
type ZooKeeper struct {
	// Addrs are the client addresses (host:port), one per server.
	Addrs  []string
	dir    string
	anchor string
}

// Addr returns the servers' client addresses joined with commas, as zk clients accept them.
func (z *ZooKeeper) Addr() string { return strings.Join(z.Addrs, ",") }

// Stop stops the servers and waits for them to exit.
func (z *ZooKeeper) Stop() error {
	out, err := exec.Command(z.anchor, "stop", z.dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("zktest: zk-anchor stop: %w: %s", err, out)
	}
	return nil
}

// AnchorPath finds the zk-anchor tool: $ZK_ANCHOR if set, else shared/tools/zk-anchor beside the
// module root (the directory holding go.mod).
func AnchorPath() (string, error) {
	if p := os.Getenv("ZK_ANCHOR"); p != "" {
		return p, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, "..", "shared", "tools", "zk-anchor")
			if _, err := os.Stat(p); err != nil {
				return "", ErrNoZooKeeper
			}
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", ErrNoZooKeeper
		}
		dir = parent
	}
}

// Available reports whether a real ZooKeeper can be started without installing anything.
func Available() bool {
	if _, err := AnchorPath(); err != nil {
		return false
	}
	if _, err := os.Stat("/usr/share/java/zookeeper.jar"); err != nil {
		return false
	}
	_, err := exec.LookPath("java")
	return err == nil
}

// StartZooKeeper starts a standalone ZooKeeper with its files under dir on a free loopback port
// and waits until it answers ruok. The caller must Stop it.
func StartZooKeeper(dir string) (*ZooKeeper, error) {
	if !Available() {
		return nil, ErrNoZooKeeper
	}
	anchor, _ := AnchorPath()
	var lastErr error
	for range 5 {
		port, err := freePorts(1)
		if err != nil {
			return nil, err
		}
		out, err := exec.Command(anchor, "start", strconv.Itoa(port), dir).CombinedOutput()
		if err == nil {
			return &ZooKeeper{Addrs: []string{fmt.Sprintf("127.0.0.1:%d", port)}, dir: dir, anchor: anchor}, nil
		}
		lastErr = fmt.Errorf("zktest: zk-anchor start: %w: %s", err, bytes.TrimSpace(out))
		_ = exec.Command(anchor, "stop", dir).Run()
	}
	return nil, lastErr
}

// StartEnsemble starts three ZooKeeper servers with files under dir and waits for a leader.
// The caller must Stop it.
func StartEnsemble(dir string) (*ZooKeeper, error) {
	if !Available() {
		return nil, ErrNoZooKeeper
	}
	anchor, _ := AnchorPath()
	var lastErr error
	for range 5 {
		base, err := freePorts(24)
		if err != nil {
			return nil, err
		}
		out, err := exec.Command(anchor, "ensemble", strconv.Itoa(base), dir).CombinedOutput()
		if err == nil {
			z := &ZooKeeper{dir: dir, anchor: anchor}
			for i := range 3 {
				z.Addrs = append(z.Addrs, fmt.Sprintf("127.0.0.1:%d", base+i))
			}
			return z, nil
		}
		lastErr = fmt.Errorf("zktest: zk-anchor ensemble: %w: %s", err, bytes.TrimSpace(out))
		_ = exec.Command(anchor, "stop", dir).Run()
	}
	return nil, lastErr
}

// freePorts returns the first of n consecutive loopback ports that are free right now, in the
// range zk-anchor accepts. Another process may still take one before it is used; callers retry.
func freePorts(n int) (int, error) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		base := 20000 + rand.IntN(40000-n)
		ok := true
		for p := base; p < base+n && ok; p++ {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				ok = false
				continue
			}
			_ = l.Close()
		}
		if ok {
			return base, nil
		}
	}
	return 0, errors.New("zktest: no free port range found")
}
