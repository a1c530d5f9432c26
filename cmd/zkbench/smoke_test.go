package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/zkd-io/zkd/internal/testkit/tlstest"
	"github.com/zkd-io/zkd/internal/testkit/zktest"
	"github.com/zkd-io/zkd/jute"
	zkdserver "github.com/zkd-io/zkd/server"
)

// target is the address list every test here runs against: $ZKBENCH_ADDR if set (for example a
// zkd started by CI), else one real ZooKeeper started by TestMain for the whole package.
var target []string

// targetErr says why there is no target.
var targetErr error

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "hold" {
		// The scale test's session holders are this binary run again (startHold).
		if err := holdMain(context.Background(), os.Args[2:], os.Stdin, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := runTests(m)
	if code == 0 {
		// Every client, progress printer and watchdog must have stopped by now.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "leaked goroutines:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func runTests(m *testing.M) int {
	if a := os.Getenv("ZKBENCH_ADDR"); a != "" {
		target = splitAddrs(a)
		return m.Run()
	}
	if os.Getenv("ZKBENCH_TARGET") != "zookeeper" {
		// The default: the smoke runs against an in-process zkd (durable on a temp dir, like the
		// binary), so CI keeps the tool working against the server it exists to measure.
		dir, err := os.MkdirTemp("", "zkbench-zkd-")
		if err != nil {
			targetErr = err
			return m.Run()
		}
		defer func() { _ = os.RemoveAll(dir) }()
		s, err := zkdserver.Start(zkdserver.Config{Dir: dir, TickTime: 2 * time.Second, MaxClientConns: -1})
		if err != nil {
			targetErr = err
			return m.Run()
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = s.Shutdown(ctx)
		}()
		target = []string{s.Addr()}
		if err := waitServing(context.Background(), target[0], 30*time.Second); err != nil {
			targetErr = err
		}
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "zkbench-test-")
	if err != nil {
		targetErr = err
		return m.Run()
	}
	defer func() { _ = os.RemoveAll(dir) }()
	zk, err := zktest.StartZooKeeper(dir)
	if err != nil {
		targetErr = err
		return m.Run()
	}
	defer func() { _ = zk.Stop() }()
	target = zk.Addrs
	if err := waitServing(context.Background(), target[0], 30*time.Second); err != nil {
		targetErr = err
	}
	return m.Run()
}

// smokeTarget returns the server to test against, skipping the test when there is none.
func smokeTarget(t *testing.T) []string {
	t.Helper()
	if errors.Is(targetErr, zktest.ErrNoZooKeeper) {
		t.Skipf("ZKBENCH_ADDR not set and %v", targetErr)
	}
	if targetErr != nil {
		t.Fatal(targetErr)
	}
	return target
}

// TestSmoke runs every workload for a moment against a real server and checks the results, then
// checks that the runs left no nodes behind.
func TestSmoke(t *testing.T) {
	addrs := smokeTarget(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var log bytes.Buffer
	results, err := smokeAll(ctx, addrs, &log)
	t.Log("\n" + log.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != len(workloads)+1 {
		t.Fatalf("%d results for %d workloads plus open loop", len(results), len(workloads))
	}
	c, err := dialClient(addrs[0], 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.close() }()
	left, err := children(c, "/zkbench")
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("runs left nodes behind under /zkbench: %v", left)
	}
}

// TestLockContenders is the bounded form of the 10,000-contender lock measurement
// (scripts/bench/lockmem.sh, make bench-locks): 1,000 contenders queue on one lock at once, each
// a connection of its own that reads the 1,000-child directory. Every one holds it exactly once,
// without errors; each wait on a predecessor is ended by exactly one notification, counted at
// the clients and by the server (mntr's node_deleted_watch_count: connections notified per delete
// that triggered a watch), so a release wakes one waiter and no herd.
func TestLockContenders(t *testing.T) {
	addrs := smokeTarget(t)
	const n = 1000
	before, err := mntr(addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	args := []string{"-addr", strings.Join(addrs, ","), "-workload", "lock", "-ops", fmt.Sprint(n), "-duration", "0",
		"-clients", fmt.Sprint(n), "-session-timeout", "60s", "-json"}
	if err := realMain(context.Background(), args, &out, &errOut); err != nil {
		t.Fatalf("zkbench %v: %v\n%s", args, err, errOut.String())
	}
	after, err := mntr(addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	var res result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	if res.Ops != n || res.Errors != 0 || res.Lock == nil {
		t.Fatalf("result = %+v; want %d locks without errors, with lock counts", res, n)
	}
	if res.Lock.Waits < n/2 || res.Lock.Notifications != res.Lock.Waits {
		t.Errorf("lock counts %+v; want a notification for each wait, and most contenders waiting", *res.Lock)
	}
	deletes := after["zk_cnt_node_deleted_watch_count"] - before["zk_cnt_node_deleted_watch_count"]
	notified := after["zk_sum_node_deleted_watch_count"] - before["zk_sum_node_deleted_watch_count"]
	if deletes != res.Lock.Waits || notified != deletes {
		t.Errorf("the server notified %d connections of %d deletes; want one each for the %d waits", notified, deletes, res.Lock.Waits)
	}
	t.Logf("%d contenders: %.0f grants/s, p99 %.0f ms; %d waits, %d notifications", n, res.Throughput, res.Latency.P99/1000, res.Lock.Waits, res.Lock.Notifications)
}

// TestCommandLineJSON runs the command as a user would and decodes its -json output.
func TestCommandLineJSON(t *testing.T) {
	addrs := smokeTarget(t)
	var out, errOut bytes.Buffer
	args := []string{"-addr", strings.Join(addrs, ","), "-workload", "create", "-ops", "200", "-duration", "0", "-clients", "4", "-json"}
	if err := realMain(context.Background(), args, &out, &errOut); err != nil {
		t.Fatalf("zkbench %v: %v\n%s", args, err, errOut.String())
	}
	var res result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	if res.Ops != 200 || res.Workload != "create" || res.Errors != 0 {
		t.Fatalf("result = %+v, want 200 creates without errors", res)
	}
	if err := checkSane(res); err != nil {
		t.Fatal(err)
	}
}

// TestClientPipelinesInOrder sends many requests at once on one connection and checks every
// reply reaches its own caller, then that a failed connection fails the calls still waiting.
func TestClientPipelinesInOrder(t *testing.T) {
	addrs := smokeTarget(t)
	c, err := dialClient(addrs[0], 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ensurePath(c, "/zkbench/pipeline"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = removeTree(c, "/zkbench/pipeline"); _ = c.close() })
	const n = 500
	done := make(chan error, n)
	for i := range n {
		path := "/zkbench/pipeline/n-" + string(rune('a'+i%26)) + "-" + strings.Repeat("x", i%7) + "-" + itoa(i)
		c.send(jute.OpCreate, &jute.CreateRequest{Path: path, Data: []byte(path), ACL: openACL}, func(r reply) {
			if err := r.result(); err != nil {
				done <- err
				return
			}
			got := r.body.(*jute.CreateResponse).Path
			if got != path {
				done <- errors.New("reply for " + got + " delivered to the caller of " + path)
				return
			}
			done <- nil
		})
	}
	for range n {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	kids, err := children(c, "/zkbench/pipeline")
	if err != nil || len(kids) != n {
		t.Fatalf("%d children (err %v), want %d", len(kids), err, n)
	}
	other, err := dialClient(addrs[0], 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	other.fail(errClosed)
	if err := other.call(jute.OpExists, &jute.ExistsRequest{Path: "/"}).result(); !errors.Is(err, errClosed) {
		t.Fatalf("call on a failed connection: %v, want errClosed", err)
	}
	other.wg.Wait()
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

// TestMultiFailureIsAnError checks that a multi whose op fails is reported as that op's error
// (ZooKeeper puts the failure in the results), and that nothing of it was applied.
func TestMultiFailureIsAnError(t *testing.T) {
	addrs := smokeTarget(t)
	c, err := dialClient(addrs[0], 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.close() }()
	if err := ensurePath(c, "/zkbench/multi-fail"); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = removeTree(c, "/zkbench/multi-fail") }()
	ops := []jute.MultiOp{
		{Type: jute.OpCreate, Req: &jute.CreateRequest{Path: "/zkbench/multi-fail/a", ACL: openACL}},
		{Type: jute.OpDelete, Req: &jute.DeleteRequest{Path: "/zkbench/multi-fail/missing", Version: -1}},
	}
	err = c.call(jute.OpMulti, &jute.MultiRequest{Ops: ops}).multiResult()
	if !errors.Is(err, jute.CodeNoNode) {
		t.Fatalf("multi with a delete of a missing node: %v, want NoNode", err)
	}
	if r := c.call(jute.OpExists, &jute.ExistsRequest{Path: "/zkbench/multi-fail/a"}); !errors.Is(r.result(), jute.CodeNoNode) {
		t.Fatalf("the failed multi's create was applied: exists gives %v", r.result())
	}
}

// -tls-ca (with a client certificate) runs the benchmark over TLS against a server's secure
// port; a plaintext run against that port fails instead of measuring something else.
func TestTLSRun(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "zkbench test CA")
	srv := ca.Issue(t, tlstest.Localhost("server"))
	cli := ca.Issue(t, tlstest.Localhost("client"))
	caFile, certFile, keyFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	cli.WriteCertAndKey(t, certFile, keyFile)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	s, err := zkdserver.Start(zkdserver.Config{
		TickTime: 2 * time.Second, MaxClientConns: -1, NoPlainListener: true, SecureAddr: "127.0.0.1:0",
		TLS: &tls.Config{
			Certificates: []tls.Certificate{{Certificate: [][]byte{srv.Cert.Raw}, PrivateKey: srv.Key}},
			ClientCAs:    pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	addr := s.SecureAddr()
	var out, errOut bytes.Buffer
	args := []string{"-addr", addr, "-workload", "set", "-ops", "300", "-duration", "0", "-clients", "4", "-json",
		"-tls-ca", caFile, "-tls-cert", certFile, "-tls-key", keyFile}
	if err := realMain(context.Background(), args, &out, &errOut); err != nil {
		t.Fatalf("zkbench %v: %v\n%s", args, err, errOut.String())
	}
	var res result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	if res.Ops != 300 || res.Errors != 0 || !res.TLS {
		t.Fatalf("result = %+v, want 300 sets over TLS without errors", res)
	}
	plain := []string{"-addr", addr, "-workload", "set", "-ops", "10", "-duration", "0", "-clients", "1"}
	if err := realMain(context.Background(), plain, &out, &errOut); err == nil {
		t.Fatal("a plaintext run against the TLS-only port succeeded")
	}
}
