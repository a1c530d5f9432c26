package server_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zkd-io/zkd/conformance"
	"github.com/zkd-io/zkd/internal/testkit"
	"github.com/zkd-io/zkd/internal/testkit/apachezk"
	"github.com/zkd-io/zkd/internal/testkit/tlstest"
	"github.com/zkd-io/zkd/internal/testkit/zktest"
	"github.com/zkd-io/zkd/jute"
	"github.com/zkd-io/zkd/server"
	"github.com/zkd-io/zkd/server/zkdtest"
)

// throttleTarget is a server under an overload setting: zkd configured through server.Config,
// and, when it is installed, real ZooKeeper 3.8 given the same setting as zoo.cfg lines (which
// ZooKeeper turns into the zookeeper.* system properties its throttles read).
type throttleTarget struct {
	name string
	addr string
}

func throttleTargets(t *testing.T, tweak func(*server.Config), zooCfg map[string]string) []throttleTarget {
	t.Helper()
	s := zkdtest.Start(t, zkdtest.WithConfig(tweak))
	targets := []throttleTarget{{"zkd", s.Addr()}}
	if zktest.Check() != nil {
		t.Logf("real ZooKeeper not checked: %v", zktest.Check())
		return targets
	}
	p := zktest.Launch(t, 1, func(ports []int) apachezk.ServerConfig {
		return apachezk.ServerConfig{Dir: t.TempDir(), ClientAddr: fmt.Sprintf("127.0.0.1:%d", ports[0]), HeapMB: 256, Extra: zooCfg}
	})
	return append(targets, throttleTarget{"zookeeper", p.ClientAddr()})
}

// A connection whose session request finds the connection throttle's bucket empty is closed
// unanswered, and counted in connection_rejected, on zkd as on ZooKeeper; the sessions let
// through are unharmed, and connection_token_deficit records the bucket after each.
func TestConnectionThrottleRefusesAsZooKeeper(t *testing.T) {
	targets := throttleTargets(t, func(c *server.Config) {
		c.ConnThrottleTokens = 2
		c.ConnThrottleFillTime = 10 * time.Minute // no refill within the test
	}, map[string]string{"connection_throttle_tokens": "2", "connection_throttle_fill_time": "600000"})
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			var ok []*conformance.Raw
			for i := range 2 {
				r, err := conformance.DialRaw(tg.addr, 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { r.Close() })
				if err := r.NewSession(10000); err != nil {
					t.Fatalf("session %d within the bucket: %v", i+1, err)
				}
				ok = append(ok, r)
			}
			r, err := conformance.DialRaw(tg.addr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close() })
			if err := r.WriteBytes(conformance.Frame(jute.Marshal(nil, &jute.ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16)}))); err != nil {
				t.Fatal(err)
			}
			if err := r.ExpectClosed(5 * time.Second); err != nil {
				t.Fatalf("third session request, over the bucket: %v; want the connection closed unanswered", err)
			}
			for i, r := range ok {
				if _, err := r.Do(jute.OpExists, &jute.ExistsRequest{Path: "/zookeeper"}, &jute.ExistsResponse{}); err != nil {
					t.Fatalf("session %d after the refusal: %v", i+1, err)
				}
			}
			m := mntr(t, tg.addr)
			want := map[string]float64{
				"zk_connection_rejected":          1,
				"zk_cnt_connection_token_deficit": 2,
				"zk_min_connection_token_deficit": 1,
				"zk_max_connection_token_deficit": 2,
				"zk_connection_drop_probability":  0,
			}
			for k, v := range want {
				if got, present := m[k]; !present || got != v {
					t.Errorf("mntr %s = %v (present %v); want %v", k, got, present, v)
				}
			}
			// The refused connection was closed by the server; one the client closes counts
			// in connection_drop_count.
			if m["zk_connection_drop_count"] != 0 {
				t.Errorf("connection_drop_count = %v before any client closed; want 0", m["zk_connection_drop_count"])
			}
			ok[0].Close()
			if !testkit.Until(5*time.Second, func() bool { return mntr(t, tg.addr)["zk_connection_drop_count"] == 1 }) {
				t.Errorf("connection_drop_count = %v after a client closed; want 1", mntr(t, tg.addr)["zk_connection_drop_count"])
			}
		})
	}
}

// Under the request throttler (request_throttle_max_requests) and a small global outstanding
// limit (globalOutstandingLimit), a crowd of pipelining clients is slowed, never refused: every
// write is answered OK, every write answered is there afterwards, and the throttler's stalls are
// counted in request_throttle_wait_count; nothing is stale, so nothing is dropped.
func TestRequestThrottleStallsButAnswersAsZooKeeper(t *testing.T) {
	cases := []struct {
		name   string
		tweak  func(*server.Config)
		zoo    map[string]string
		stalls bool
	}{
		{"max_requests", func(c *server.Config) { c.RequestThrottleMaxRequests = 2 }, map[string]string{"request_throttle_max_requests": "2"}, true},
		{"globalOutstandingLimit", func(c *server.Config) { c.GlobalOutstandingLimit = 1 }, map[string]string{"globalOutstandingLimit": "1"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, tg := range throttleTargets(t, tc.tweak, tc.zoo) {
				t.Run(tg.name, func(t *testing.T) {
					crowdWrites(t, tg.addr)
					m := mntr(t, tg.addr)
					t.Logf("request_throttle_wait_count %v, stale_requests_dropped %v", m["zk_request_throttle_wait_count"], m["zk_stale_requests_dropped"])
					if tc.stalls && m["zk_request_throttle_wait_count"] == 0 {
						t.Errorf("request_throttle_wait_count = 0 after a crowd of pipelined writes through a throttler of 2")
					}
					if !tc.stalls && m["zk_request_throttle_wait_count"] != 0 {
						t.Errorf("request_throttle_wait_count = %v with the throttler off", m["zk_request_throttle_wait_count"])
					}
					if m["zk_stale_requests_dropped"] != 0 {
						t.Errorf("stale_requests_dropped = %v with every client connected", m["zk_stale_requests_dropped"])
					}
					if !testkit.Until(5*time.Second, func() bool { return mntr(t, tg.addr)["zk_outstanding_requests"] == 0 }) {
						t.Errorf("outstanding_requests = %v once every write was answered; want 0", mntr(t, tg.addr)["zk_outstanding_requests"])
					}
				})
			}
		})
	}
}

// crowdWrites has 4 clients, each with 4 goroutines, create 15 nodes each under a fresh parent,
// all writes answered OK, and then finds every one of them.
func crowdWrites(t *testing.T, addr string) {
	t.Helper()
	const clients, workers, each = 4, 4, 15
	admin, _ := connect(t, addr)
	parent := fmt.Sprintf("/crowd%d", time.Now().UnixNano()) // no dash: ZooKeeper names per-namespace metrics after it
	if _, err := admin.Create(parent, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		created []string
		wg      sync.WaitGroup
	)
	for i := range clients {
		c, _ := connect(t, addr)
		for j := range workers {
			wg.Go(func() {
				for k := range each {
					p, err := c.Create(fmt.Sprintf("%s/n-%d-%d-%d", parent, i, j, k), []byte("x"), 0, zk.WorldACL(zk.PermAll))
					if err != nil {
						t.Errorf("create under throttling: %v; want every request answered OK", err)
						return
					}
					mu.Lock()
					created = append(created, p)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	kids, _, err := admin.Children(parent)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, k := range kids {
		have[parent+"/"+k] = true
	}
	sort.Strings(created)
	for _, p := range created {
		if !have[p] {
			t.Errorf("%s was created (answered OK) and is missing", p)
		}
	}
	if len(created) != clients*workers*each {
		t.Errorf("%d writes answered OK; want %d", len(created), clients*workers*each)
	}
}

// A write the request throttler holds while its client goes away is dropped, never proposed,
// and counted in stale_requests_dropped; the requests in process meanwhile are answered. The one
// slot is held by blocking the apply hook after a watch fires: the write that fired it waits for
// its result (and a read of the watcher, if it comes after the write, for the view with the event).
// Over TLS too: the reader looks for the client's end of stream through the TLS connection.
func TestRequestThrottleDropsStaleWrite(t *testing.T) {
	t.Run("plain", func(t *testing.T) { testRequestThrottleDropsStaleWrite(t, false) })
	t.Run("tls", func(t *testing.T) { testRequestThrottleDropsStaleWrite(t, true) })
}

func testRequestThrottleDropsStaleWrite(t *testing.T, useTLS bool) {
	ca := tlstest.NewCA(t, "throttle CA")
	leaf := ca.Issue(t, tlstest.Localhost("zkd"))
	s := zkdtest.Start(t, zkdtest.WithConfig(func(c *server.Config) {
		c.RequestThrottleMaxRequests = 1
		c.RequestThrottleStallTime = 20 * time.Millisecond
		if useTLS {
			c.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leaf.Cert.Raw}, PrivateKey: leaf.Key}}}
			c.PortUnification = true
		}
	}))
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	dial := func() *conformance.Raw {
		nc, err := net.DialTimeout("tcp", s.Addr(), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if useTLS {
			nc = tls.Client(nc, &tls.Config{RootCAs: roots, ServerName: "localhost"})
		}
		r := conformance.NewRaw(nc, 10*time.Second)
		t.Cleanup(func() { r.Close() })
		if err := r.NewSession(10000); err != nil {
			t.Fatal(err)
		}
		return r
	}
	watcher, writer, leaver := dial(), dial(), dial()
	mustCreate(t, writer, "/w", openACL, 0)
	if _, err := watcher.Do(jute.OpExists, &jute.ExistsRequest{Path: "/w", Watch: true}, &jute.ExistsResponse{}); err != nil {
		t.Fatal(err)
	}
	unblock := make(chan struct{})
	var once sync.Once
	server.SetAfterFire(s, func(int64) { <-unblock })
	release := func() { once.Do(func() { close(unblock) }) }
	t.Cleanup(release)

	setXid, readXid, staleXid := writer.NextXid(), watcher.NextXid(), leaver.NextXid()
	if err := writer.Send(setXid, jute.OpSetData, &jute.SetDataRequest{Path: "/w", Data: []byte("v"), Version: -1}); err != nil {
		t.Fatal(err)
	}
	if err := watcher.Send(readXid, jute.OpGetData, &jute.GetDataRequest{Path: "/w"}); err != nil {
		t.Fatal(err)
	}
	before := mntr(t, s.Addr())["zk_request_throttle_wait_count"]
	if err := leaver.Send(staleXid, jute.OpCreate, &jute.CreateRequest{Path: "/stale", Data: nil, ACL: openACL}); err != nil {
		t.Fatal(err)
	}
	// Several stall periods pass with the slot held: the leaver's create waits in the throttler.
	if !testkit.Until(5*time.Second, func() bool { return mntr(t, s.Addr())["zk_request_throttle_wait_count"] >= before+4 }) {
		t.Fatal("the throttler never stalled")
	}
	leaver.Close()
	if !testkit.Until(5*time.Second, func() bool { return mntr(t, s.Addr())["zk_stale_requests_dropped"] == 1 }) {
		t.Fatalf("stale_requests_dropped = %v; want 1 once the leaver closed", mntr(t, s.Addr())["zk_stale_requests_dropped"])
	}
	release()
	if rep, err := writer.ReadReplyFor(setXid); err != nil || rep.Header.Err != 0 {
		t.Fatalf("setData held in process: %+v, %v; want OK", rep.Header, err)
	}
	if rep, err := watcher.ReadReplyFor(readXid); err != nil || rep.Header.Err != 0 {
		t.Fatalf("getData: %+v, %v; want OK", rep.Header, err)
	}
	if _, _, err := watcher.WaitEvent(); err != nil {
		t.Fatal(err)
	}
	if _, err := watcher.Do(jute.OpExists, &jute.ExistsRequest{Path: "/stale"}, &jute.ExistsResponse{}); !errors.Is(err, jute.CodeNoNode) {
		t.Fatalf("exists /stale: %v; want NoNode: the dropped create must never be applied", err)
	}
	if !testkit.Until(5*time.Second, func() bool { return mntr(t, s.Addr())["zk_outstanding_requests"] == 0 }) {
		t.Errorf("outstanding_requests = %v with everything answered or dropped; want 0", mntr(t, s.Addr())["zk_outstanding_requests"])
	}
}

// Large-request throttling (largeRequestThreshold, largeRequestMaxBytes): a request frame over
// the threshold that would take the large requests in process over the maximum closes its
// connection unanswered and counts in large_requests_rejected, on zkd as on ZooKeeper; one within
// the maximum is answered, and gives its bytes back when it is.
func TestLargeRequestLimitAsZooKeeper(t *testing.T) {
	targets := throttleTargets(t, func(c *server.Config) {
		c.LargeRequestThreshold = 100
		c.LargeRequestMaxBytes = 150
	}, map[string]string{"largeRequestThreshold": "100", "largeRequestMaxBytes": "150"})
	create := func(path string, n int) *jute.CreateRequest {
		return &jute.CreateRequest{Path: path, Data: make([]byte, n), ACL: openACL}
	}
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			r, err := conformance.DialRaw(tg.addr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close() })
			if err := r.NewSession(10000); err != nil {
				t.Fatal(err)
			}
			base := fmt.Sprintf("/large%d", time.Now().UnixNano())
			// Frames of 55 bytes plus the data: 75 (small), 130 (large, within 150).
			for i, n := range []int{20, 75, 75} {
				if _, err := r.Do(jute.OpCreate, create(fmt.Sprintf("%s%d", base, i), n), &jute.CreateResponse{}); err != nil {
					t.Fatalf("create with %d bytes of data: %v; want OK", n, err)
				}
			}
			if err := r.Send(r.NextXid(), jute.OpCreate, create(base+"big", 300)); err != nil {
				t.Fatal(err)
			}
			if err := r.ExpectClosed(5 * time.Second); err != nil {
				t.Fatalf("a 355-byte request over largeRequestMaxBytes=150: %v; want the connection closed unanswered", err)
			}
			if got := mntr(t, tg.addr)["zk_large_requests_rejected"]; got != 1 {
				t.Errorf("large_requests_rejected = %v; want 1", got)
			}
			c, _ := connect(t, tg.addr)
			if ok, _, err := c.Exists(base + "big"); err != nil || ok {
				t.Errorf("exists %sbig = %v, %v; want false: the refused create must not be applied", base, ok, err)
			}
		})
	}
}

// With connection_throttle_weight_enabled, the bucket holds the global weight (3) times the
// configured tokens, a new session draws 3 and a reconnect 2, on zkd as on ZooKeeper.
func TestConnectionThrottleWeightsAsZooKeeper(t *testing.T) {
	targets := throttleTargets(t, func(c *server.Config) {
		c.ConnThrottleTokens = 2
		c.ConnThrottleFillTime = 10 * time.Minute
		c.ConnThrottleWeightEnabled = true
	}, map[string]string{"connection_throttle_tokens": "2", "connection_throttle_fill_time": "600000", "connection_throttle_weight_enabled": "true"})
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			dial := func() *conformance.Raw {
				r, err := conformance.DialRaw(tg.addr, 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { r.Close() })
				return r
			}
			first := dial()
			if err := first.NewSession(10000); err != nil {
				t.Fatalf("new session, 3 of 6 tokens: %v", err)
			}
			again := dial() // the same session on a new connection: 2 of the 3 left
			if _, _, err := again.Handshake(jute.ConnectRequest{TimeOut: 10000, SessionID: first.Session.SessionID, Passwd: first.Session.Passwd}); err != nil || again.Session.SessionID != first.Session.SessionID {
				t.Fatalf("reconnect, 2 of 3 tokens: %v, session 0x%x", err, again.Session.SessionID)
			}
			refused := dial()
			if err := refused.WriteBytes(conformance.Frame(jute.Marshal(nil, &jute.ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16)}))); err != nil {
				t.Fatal(err)
			}
			if err := refused.ExpectClosed(5 * time.Second); err != nil {
				t.Fatalf("new session with 1 token left: %v; want the connection closed unanswered", err)
			}
			m := mntr(t, tg.addr)
			for k, v := range map[string]float64{
				"zk_connection_rejected": 1, "zk_cnt_connection_token_deficit": 2,
				"zk_min_connection_token_deficit": 3, "zk_max_connection_token_deficit": 5,
			} {
				if m[k] != v {
					t.Errorf("mntr %s = %v; want %v", k, m[k], v)
				}
			}
		})
	}
}

// The bucket refills with time: in a synctest bubble (a fake clock, no real waiting), one token
// per second lets one session through per second and refuses the rest unanswered.
func TestConnectionThrottleRefillsWithTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ln := startFake(t, func(c *server.Config) {
			c.ConnThrottleTokens = 1
			c.ConnThrottleFillTime = time.Second
		})
		try := func() error { return ln.dial(t).NewSession(10000) }
		for second := range 3 {
			if err := try(); err != nil {
				t.Fatalf("second %d: first session refused: %v", second, err)
			}
			if err := try(); err == nil {
				t.Fatalf("second %d: a second session let through an empty bucket", second)
			}
			time.Sleep(time.Second + time.Millisecond) // the bubble's clock: more than fill_time
		}
	})
}
