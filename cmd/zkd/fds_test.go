package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkd-io/zkd/internal/testkit"
)

// A connection storm larger than the file descriptor limit must not take the server down: with
// ulimit -n 256, zkd holds at most 128 client connections (the rest of the descriptors are kept
// for its log, snapshots and peers), closes the ones beyond at once so their clients try
// elsewhere, and keeps writing and taking snapshots the whole time.
func TestConnectionStormLeavesDescriptorsForStorage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin, err := buildZkd()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	addr := freePort(t)
	cfg := filepath.Join(dir, "zoo.cfg")
	// maxClientCnxns=0: every connection here comes from one address; snapCount=50: snapshots,
	// which open new files, are taken while the storm is held; the silent connections are not
	// closed for want of a ConnectRequest while the test runs.
	conf := fmt.Sprintf("dataDir=%s\nclientPort=%s\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\nmaxClientCnxns=0\nsnapCount=50\nzookeeper.nio.sessionlessCnxnTimeout=120000\n",
		filepath.Join(dir, "data"), portOf(t, addr))
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &zkdProcess{out: &syncBuffer{}}
	p.cmd = exec.Command("sh", "-c", `ulimit -n 256 && exec "$0" "$@"`, bin, "-config", cfg)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-exited
	})
	waitRuok(t, addr, p)
	if !strings.Contains(p.out.String(), "maxConns=128") {
		t.Fatalf("zkd did not report its connection limit; output:\n%s", p.out.String())
	}
	c := connectZk(t, addr)
	defer c.Close()

	// The storm: 300 connections held open, none of them sending anything.
	var held []net.Conn
	defer func() {
		for _, nc := range held {
			_ = nc.Close()
		}
	}()
	for range 300 {
		nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		held = append(held, nc)
	}
	// Those beyond the limit are closed by the server as soon as it accepts them; the others
	// stay open. (A few seconds lets a loaded machine's accept loop reach them all.)
	var mu sync.Mutex
	closed := 0
	var wg sync.WaitGroup
	for _, nc := range held {
		wg.Go(func() {
			_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := nc.Read(make([]byte, 1)); errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err) {
				mu.Lock()
				closed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if open := len(held) - closed; closed == 0 || open > 128 {
		t.Fatalf("of %d connections, %d were closed at once and %d held; want at most 128 held (the limit)", len(held), closed, open)
	}

	// Meanwhile the server writes its log and takes snapshots.
	for i := range 200 {
		if _, err := c.Create(fmt.Sprintf("/storm-%d", i), []byte("x"), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatalf("create %d during the storm: %v; output:\n%s", i, err, p.out.String())
		}
	}
	select {
	case err := <-exited:
		t.Fatalf("zkd exited during the storm: %v; output:\n%s", err, p.out.String())
	default:
	}
	if !strings.Contains(p.out.String(), "at the client connection limit") {
		t.Errorf("no warning about the refused connections; output:\n%s", p.out.String())
	}
	// Once the storm ends, new clients get in again.
	for _, nc := range held {
		_ = nc.Close()
	}
	held = nil
	if !testkit.Until(20*time.Second, func() bool {
		ok := zk.FLWRuok([]string{addr}, time.Second)
		return len(ok) == 1 && ok[0]
	}) {
		t.Fatalf("zkd took no connection after the storm; output:\n%s", p.out.String())
	}
	c2 := connectZk(t, addr)
	defer c2.Close()
	if _, _, err := c2.Get("/storm-199"); err != nil {
		t.Fatalf("after the storm: %v", err)
	}
}

// isReset reports whether err is a connection reset by the peer.
func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset")
}
