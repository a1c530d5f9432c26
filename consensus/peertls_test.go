package consensus

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zkd-io/zkd/internal/peernet"
	"github.com/zkd-io/zkd/internal/third_party/raft"

	"github.com/zkd-io/zkd/internal/testkit/zktest"
	"github.com/zkd-io/zkd/jute"
)

// testPKI is a CA and the member certificates of one test.
type testPKI struct {
	ca *zktest.CA
}

func newTestPKI(t *testing.T) *testPKI { return &testPKI{ca: zktest.NewCA(t, "zkd quorum test CA")} }

// member returns a member certificate for 127.0.0.1 issued by the test CA.
func (p *testPKI) member(t *testing.T, name string) zktest.Cert {
	return p.ca.Issue(t, zktest.CertSpec{CommonName: name, IPs: zktest.LoopbackIPs()})
}

// peerTLS returns a PeerTLS presenting cert and trusting the test CA.
func (p *testPKI) peerTLS(cert zktest.Cert) *PeerTLS {
	return &PeerTLS{
		Server: &tls.Config{Certificates: []tls.Certificate{cert.TLS}, ClientCAs: p.ca.Pool(), MinVersion: tls.VersionTLS12},
		Client: &tls.Config{Certificates: []tls.Certificate{cert.TLS}, RootCAs: p.ca.Pool(), MinVersion: tls.VersionTLS12},
	}
}

// tlsCluster starts a 3-node cluster whose nodes take their PeerTLS from tlsOf (nil: plaintext).
func tlsCluster(t *testing.T, memory bool, tlsOf func(id string) *PeerTLS) *cluster {
	t.Helper()
	return newCluster(t, 3, memory, func(cfg *Config) { cfg.TLS = tlsOf(cfg.ID) })
}

// tlsBubbleCluster is tlsCluster on memnet, for a test inside a synctest bubble. Certificates
// must be issued inside the bubble too: their validity is checked against its clock.
func tlsBubbleCluster(t *testing.T, memory bool, tlsOf func(id string) *PeerTLS) *cluster {
	t.Helper()
	return newBubbleCluster(t, 3, memory, func(cfg *Config) { cfg.TLS = tlsOf(cfg.ID) })
}

func refusedBy(n *Node) int64 {
	if n.tls == nil {
		return 0
	}
	return n.tls.Refused()
}

// writeVia proposes a create through n and fails the test unless it commits.
func writeVia(t *testing.T, n *Node, path string) int64 {
	t.Helper()
	res, err := n.Propose(ctxT(t, 20*time.Second), createReq(path, []byte(path), jute.ModePersistent))
	if err != nil || res.Err != nil {
		t.Fatalf("create %s via %s: %v %v", path, n.ID(), err, res.Err)
	}
	return res.Zxid
}

func TestPeerTLSClusterServesAndFailsOver(t *testing.T) {
	synctest.Test(t, testPeerTLSClusterServesAndFailsOver)
}

func testPeerTLSClusterServesAndFailsOver(t *testing.T) {
	pki := newTestPKI(t)
	certs := map[string]*PeerTLS{}
	for _, id := range []string{"n1", "n2", "n3"} {
		certs[id] = pki.peerTLS(pki.member(t, id))
	}
	c := tlsBubbleCluster(t, true, func(id string) *PeerTLS { return certs[id] })
	old := c.leader()
	for _, n := range c.running() {
		writeVia(t, n, "/via-"+n.ID()) // followers forward over the cluster RPC, under TLS
	}
	c.converge()

	c.stop(old.ID())
	l := c.leader()
	if l.ID() == old.ID() {
		t.Fatalf("leader %s did not change", l.ID())
	}
	for _, n := range c.running() {
		writeVia(t, n, "/after-"+n.ID())
	}
	c.start(old.ID())
	c.converge()
	for _, n := range c.running() {
		if got := refusedBy(n); got != 0 {
			t.Errorf("%s refused %d peer connections in a cluster of valid members", n.ID(), got)
		}
	}
}

// TestPeerTLSRelay: under TLS a follower still hands the leader's commit announcements to its
// own Raft (in-process, relay.go), so forwarded writes do not wait for the
// leader's idle AppendEntries (a second here).
func TestPeerTLSRelay(t *testing.T) { synctest.Test(t, testPeerTLSRelay) }

func testPeerTLSRelay(t *testing.T) {
	pki := newTestPKI(t)
	certs := map[string]*PeerTLS{}
	for _, id := range []string{"n1", "n2", "n3"} {
		certs[id] = pki.peerTLS(pki.member(t, id))
	}
	c := newBubbleCluster(t, 3, true, func(cfg *Config) { cfg.TLS, cfg.CommitTimeout = certs[cfg.ID], time.Second })
	c.leader()
	f := c.followers()[0]
	const writes = 10
	start := time.Now()
	for i := range writes {
		writeVia(t, f, fmt.Sprintf("/relay%d", i))
	}
	took := time.Since(start)
	if st := f.Stats(); st.Relayed == 0 {
		t.Fatalf("no commit was relayed (%+v)", st)
	}
	if took > writes*time.Second/2 {
		t.Fatalf("%d forwarded writes took %v: the follower waited for the leader's idle AppendEntries", writes, took)
	}
	c.converge()
}

// TestPeerTLSOutsiderCannotJoin configures n3 as a member that must not be let in (no TLS,
// another CA, a certificate for another host, an expired one): n1 and n2 commit without it and
// it never receives their writes. With hostname verification off, a certificate for another host
// is a member's: that case must join, or the test could not tell.
func TestPeerTLSOutsiderCannotJoin(t *testing.T) {
	// Each case runs in its own synctest bubble, its certificates issued there: their validity is
	// checked against the bubble's clock.
	var pki *testPKI
	var rogue *zktest.CA
	cases := []struct {
		name string
		n3   func(t *testing.T) *PeerTLS
		skip bool // SkipHostnameVerification on every member
		join bool
	}{
		{name: "plaintext", n3: func(*testing.T) *PeerTLS { return nil }},
		{name: "other CA", n3: func(t *testing.T) *PeerTLS {
			pt := pki.peerTLS(rogue.Issue(t, zktest.CertSpec{CommonName: "n3", IPs: zktest.LoopbackIPs()}))
			pt.Server.ClientCAs, pt.Client.RootCAs = rogue.Pool(), rogue.Pool()
			return pt
		}},
		{name: "wrong host", n3: func(t *testing.T) *PeerTLS {
			return pki.peerTLS(pki.ca.Issue(t, zktest.CertSpec{CommonName: "n3", IPs: []net.IP{net.IPv4(127, 0, 0, 9)}, DNSNames: []string{"n3.example"}}))
		}},
		{name: "expired", n3: func(t *testing.T) *PeerTLS {
			return pki.peerTLS(pki.ca.Issue(t, zktest.CertSpec{CommonName: "n3", IPs: zktest.LoopbackIPs(),
				NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)}))
		}},
		{name: "wrong host without hostname verification", skip: true, join: true, n3: func(t *testing.T) *PeerTLS {
			return pki.peerTLS(pki.ca.Issue(t, zktest.CertSpec{CommonName: "n3", IPs: []net.IP{net.IPv4(127, 0, 0, 9)}}))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				pki, rogue = newTestPKI(t), zktest.NewCA(t, "rogue CA")
				cfgs := map[string]*PeerTLS{"n1": pki.peerTLS(pki.member(t, "n1")), "n2": pki.peerTLS(pki.member(t, "n2")), "n3": tc.n3(t)}
				for _, pt := range cfgs {
					if pt != nil {
						pt.SkipHostnameVerification = tc.skip
					}
				}
				c := tlsBubbleCluster(t, true, func(id string) *PeerTLS { return cfgs[id] })
				if tc.join {
					writeVia(t, c.leader(), "/x")
					c.converge()
					return
				}
				l := c.leader("n1", "n2")
				zxid := writeVia(t, l, "/x")
				n3 := c.nodes["n3"]
				// n3 campaigns (it never hears a leader) and is refused by n1 and n2.
				eventually(t, 10*time.Second, "n1 and n2 to refuse n3", func() bool {
					return refusedBy(c.nodes["n1"]) > 0 && refusedBy(c.nodes["n2"]) > 0
				})
				if l2 := c.leader("n1", "n2"); l2.IsLeader() {
					writeVia(t, l2, "/y")
				}
				if got := n3.LastZxid(); got >= zxid {
					t.Errorf("n3 applied zxid %d (write at %d) although it is not let in", got, zxid)
				}
				if id, _ := n3.Leader(); id != "" {
					t.Errorf("n3 knows leader %q although it is not let in", id)
				}
			})
		})
	}
}

// attacker reaches a member's peer port as an outsider would: dial (from local, if set), then
// TLS with cert (if set), then the connection type.
type attacker struct {
	local *net.TCPAddr
	cert  *tls.Certificate
	roots *zktest.CA
}

func (a attacker) dial(ctx context.Context, addr string, kind byte) (net.Conn, error) {
	d := net.Dialer{LocalAddr: a.local}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if a.cert != nil {
		tc := tls.Client(c, &tls.Config{Certificates: []tls.Certificate{*a.cert}, RootCAs: a.roots.Pool(), ServerName: "127.0.0.1"})
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, err
		}
		c = tc
	}
	if _, err := c.Write([]byte{kind}); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// readIndex calls the harmless read-index RPC on addr and returns the reply's status.
func (a attacker) readIndex(ctx context.Context, addr string) (byte, error) {
	c, err := a.dial(ctx, addr, peernet.ConnRPC)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := writeFrame(c, 1, rpcReadIndex, nil); err != nil {
		return 0, err
	}
	_, status, _, err := readFrame(bufio.NewReader(c))
	return status, err
}

// appendEntries sends Raft a stale-term heartbeat (harmless: a member answers it with its term
// and does nothing) through raft's own transport and returns the term answered.
func (a attacker) appendEntries(addr string) (uint64, error) {
	layer := peernet.NewStreamLayer(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, a.dial)
	trans := raft.NewNetworkTransport(layer, 1, 5*time.Second, io.Discard)
	defer trans.Close()
	var resp raft.AppendEntriesResponse
	err := trans.AppendEntries("outsider", raft.ServerAddress(addr),
		&raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("outsider"), Addr: []byte("127.0.0.1:1")}, Term: 0}, &resp)
	return resp.Term, err
}

func TestPeerTLSOutsiderCannotCallRaftOrRPC(t *testing.T) {
	pki := newTestPKI(t)
	rogue := zktest.NewCA(t, "rogue CA")
	certs := map[string]*PeerTLS{}
	for _, id := range []string{"n1", "n2", "n3"} {
		certs[id] = pki.peerTLS(pki.member(t, id))
	}
	c := tlsCluster(t, true, func(id string) *PeerTLS { return certs[id] })
	l := c.leader()
	addr := l.Addr()
	ip := func(s string) *net.TCPAddr { return &net.TCPAddr{IP: net.ParseIP(s)} }
	cert := func(ca *zktest.CA, ips ...string) *tls.Certificate {
		spec := zktest.CertSpec{CommonName: "outsider"}
		for _, s := range ips {
			spec.IPs = append(spec.IPs, net.ParseIP(s))
		}
		c := ca.Issue(t, spec).TLS
		return &c
	}
	// The member's own certificate from a member's host is let in: the calls work.
	member := attacker{cert: &certs["n1"].Client.Certificates[0], roots: pki.ca}
	if status, err := member.readIndex(t.Context(), addr); err != nil || status != statusOK {
		t.Fatalf("read index with a member's certificate: status %d, %v", status, err)
	}
	if _, err := member.appendEntries(addr); err != nil {
		t.Fatalf("raft call with a member's certificate: %v", err)
	}

	outsiders := []struct {
		name string
		a    attacker
	}{
		{"plaintext", attacker{}},
		{"other CA", attacker{cert: cert(rogue, "127.0.0.1"), roots: pki.ca}},
		{"certificate for another host", attacker{cert: cert(pki.ca, "127.0.0.9"), roots: pki.ca}},
		{"not a member's host", attacker{local: ip("127.0.0.2"), cert: cert(pki.ca, "127.0.0.2"), roots: pki.ca}},
	}
	before := refusedBy(l)
	for _, o := range outsiders {
		if status, err := o.a.readIndex(t.Context(), addr); err == nil {
			t.Errorf("%s: read index answered with status %d; want the connection refused", o.name, status)
		}
		if _, err := o.a.appendEntries(addr); err == nil {
			t.Errorf("%s: raft AppendEntries answered; want the connection refused", o.name)
		}
	}
	if got := refusedBy(l) - before; got < int64(2*len(outsiders)) {
		t.Errorf("leader counted %d refused connections; want at least %d", got, 2*len(outsiders))
	}
	if !l.IsLeader() {
		t.Errorf("leader %s lost leadership to outsiders", l.ID())
	}
}

// TestPeerTLSJoin adds a member-to-be (no Peers, no Raft state) to a TLS cluster: the leader
// reaches it over TLS, it catches up and its writes are forwarded.
func TestPeerTLSJoin(t *testing.T) { synctest.Test(t, testPeerTLSJoin) }

func testPeerTLSJoin(t *testing.T) {
	pki := newTestPKI(t)
	var mu sync.Mutex
	cfgs := map[string]*PeerTLS{}
	for _, id := range []string{"n1", "n2", "n3", "n4"} {
		cfgs[id] = pki.peerTLS(pki.member(t, id))
	}
	c := tlsBubbleCluster(t, true, func(id string) *PeerTLS {
		mu.Lock()
		defer mu.Unlock()
		return cfgs[id]
	})
	l := c.leader()
	writeVia(t, l, "/before")
	n4 := c.join("n4")
	if err := c.followers()[0].AddVoter(ctxT(t, 30*time.Second), "n4", n4.Addr()); err != nil {
		t.Fatalf("add voter: %v", err)
	}
	c.converge()
	writeVia(t, n4, "/from-n4")
	c.converge()
	for _, n := range c.running() {
		if got := refusedBy(n); got != 0 {
			t.Errorf("%s refused %d peer connections", n.ID(), got)
		}
	}
}

// TestPeerTLSRollingUpgrade moves a running cluster from plaintext to TLS as ZooKeeper documents
// it, restarting one member at a time, with a quorum serving writes after every step:
// portUnification on everywhere (dial plaintext, accept both), then sslQuorum on (dial TLS,
// accept both), then portUnification off (TLS only).
func TestPeerTLSRollingUpgrade(t *testing.T) { synctest.Test(t, testPeerTLSRollingUpgrade) }

func testPeerTLSRollingUpgrade(t *testing.T) {
	pki := newTestPKI(t)
	var mu sync.Mutex
	cfgs := map[string]*PeerTLS{}
	c := tlsBubbleCluster(t, false, func(id string) *PeerTLS {
		mu.Lock()
		defer mu.Unlock()
		return cfgs[id]
	})
	c.leader()
	writeVia(t, c.nodes["n1"], "/plain")
	steps := []struct {
		name string
		cfg  func(*PeerTLS)
	}{
		{"portUnification", func(p *PeerTLS) { p.AcceptPlaintext, p.DialPlaintext = true, true }},
		{"sslQuorum", func(p *PeerTLS) { p.AcceptPlaintext = true }},
		{"no portUnification", func(*PeerTLS) {}},
	}
	for _, step := range steps {
		for _, id := range c.ids {
			pt := pki.peerTLS(pki.member(t, id))
			step.cfg(pt)
			c.stop(id)
			mu.Lock()
			cfgs[id] = pt
			mu.Unlock()
			c.start(id)
			c.leader()
			for _, n := range c.running() {
				writeVia(t, n, fmt.Sprintf("/%s-%s-via-%s", step.name, id, n.ID()))
			}
			c.converge()
		}
	}
	for _, n := range c.running() {
		if got := refusedBy(n); got != 0 {
			t.Errorf("%s refused %d peer connections during the upgrade", n.ID(), got)
		}
	}
	// Now the port takes TLS only.
	if _, err := (attacker{}).readIndex(t.Context(), c.leader().Addr()); err == nil {
		t.Error("a plaintext read index was answered after the upgrade")
	}
}

// TestPeerMuxFirstByte checks how an accepted connection is told apart by its first byte.
func TestPeerMuxFirstByte(t *testing.T) {
	pki := newTestPKI(t)
	cert := pki.member(t, "n1")
	members := func() []string { return []string{"127.0.0.1:1"} }
	tlsDial := func(c net.Conn) net.Conn {
		return tls.Client(c, &tls.Config{Certificates: []tls.Certificate{cert.TLS}, RootCAs: pki.ca.Pool(), ServerName: "127.0.0.1"})
	}
	type outcome struct {
		kind byte
		tls  bool
		err  bool
	}
	cases := []struct {
		name  string
		cfg   *PeerTLS
		dial  func(c net.Conn) net.Conn // what the peer sends
		first byte
		want  outcome
	}{
		{name: "plain raft, no TLS", first: peernet.ConnRaft, want: outcome{kind: peernet.ConnRaft}},
		{name: "plain rpc, no TLS", first: peernet.ConnRPC, want: outcome{kind: peernet.ConnRPC}},
		{name: "TLS on a plaintext port", first: peernet.TLSRecordHandshake, want: outcome{err: true}},
		{name: "plain refused under TLS", cfg: pki.peerTLS(cert), first: peernet.ConnRaft, want: outcome{err: true}},
		{name: "plain accepted with AcceptPlaintext", cfg: func() *PeerTLS { p := pki.peerTLS(cert); p.AcceptPlaintext = true; return p }(),
			first: peernet.ConnRPC, want: outcome{kind: peernet.ConnRPC}},
		{name: "TLS then rpc", cfg: pki.peerTLS(cert), first: peernet.ConnRPC, want: outcome{kind: peernet.ConnRPC, tls: true}, dial: tlsDial},
		{name: "TLS through GetConfigForClient", cfg: func() *PeerTLS {
			p := pki.peerTLS(cert)
			full := p.Server
			p.Server = &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return full, nil }}
			return p
		}(), first: peernet.ConnRPC, want: outcome{kind: peernet.ConnRPC, tls: true}, dial: tlsDial},
		{name: "GetConfigForClient without a trust store", cfg: func() *PeerTLS {
			p := pki.peerTLS(cert)
			noCAs := p.Server.Clone()
			noCAs.ClientCAs = nil
			p.Server = &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return noCAs, nil }}
			return p
		}(), first: peernet.ConnRPC, want: outcome{err: true}, dial: tlsDial},
		{name: "TLS with AcceptPlaintext", cfg: func() *PeerTLS { p := pki.peerTLS(cert); p.AcceptPlaintext = true; return p }(),
			first: peernet.ConnRaft, want: outcome{kind: peernet.ConnRaft, tls: true}, dial: tlsDial},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := &Node{log: testLogger(t)}
			if tc.cfg != nil {
				n.tls = peernet.NewTLS(*tc.cfg, n.log, members)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			errc := make(chan error, 1)
			go func() {
				c, err := net.Dial("tcp", ln.Addr().String())
				if err != nil {
					errc <- err
					return
				}
				defer c.Close()
				if tc.dial != nil {
					c = tc.dial(c)
				}
				_, err = c.Write([]byte{tc.first, 'x'})
				errc <- err
				_, _ = io.Copy(io.Discard, c) // until the server side closes
			}()
			raw, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			c, kind, err := n.openConn(raw)
			if werr := <-errc; werr != nil && !tc.want.err {
				t.Fatalf("peer: %v", werr)
			}
			if (err != nil) != tc.want.err {
				t.Fatalf("openConn = %v; want error %v", err, tc.want.err)
			}
			if err != nil {
				return
			}
			_, isTLS := c.(*tls.Conn)
			if kind != tc.want.kind || isTLS != tc.want.tls {
				t.Fatalf("openConn = kind %#x, TLS %v; want %#x, %v", kind, isTLS, tc.want.kind, tc.want.tls)
			}
			// What follows the first byte is still there.
			var b [1]byte
			if _, err := io.ReadFull(c, b[:]); err != nil || b[0] != 'x' {
				t.Fatalf("next byte %q, %v; want 'x'", b[0], err)
			}
		})
	}
}

func TestPeerTLSValidate(t *testing.T) {
	pki := newTestPKI(t)
	cert := pki.member(t, "n1")
	good := pki.peerTLS(cert)
	cases := map[string]func(p *PeerTLS){
		"no server":                 func(p *PeerTLS) { p.Server = nil },
		"no trust store for peers":  func(p *PeerTLS) { p.Server.ClientCAs = nil },
		"no server certificate":     func(p *PeerTLS) { p.Server.Certificates = nil },
		"no client":                 func(p *PeerTLS) { p.Client = nil },
		"no client trust store":     func(p *PeerTLS) { p.Client.RootCAs = nil },
		"no client certificate":     func(p *PeerTLS) { p.Client.Certificates = nil },
		"dial plaintext, no accept": func(p *PeerTLS) { p.DialPlaintext = true },
	}
	if err := good.Validate(); err != nil {
		t.Fatalf("valid PeerTLS: %v", err)
	}
	for name, breakIt := range cases {
		p := pki.peerTLS(cert)
		breakIt(p)
		if err := (Config{ID: "n1", TLS: p}).Validate(); err == nil {
			t.Errorf("%s: Validate accepted it", name)
		}
	}
	p := pki.peerTLS(cert)
	p.Client, p.DialPlaintext, p.AcceptPlaintext = nil, true, true
	if err := p.Validate(); err != nil {
		t.Errorf("dial plaintext needs no client config: %v", err)
	}
}

// A peer that hangs up in the middle of its TLS handshake (a member stopping while it dials) is
// not counted as refused; a plaintext peer on a TLS-only port is.
func TestPeerTLSHangUpIsNotARefusal(t *testing.T) {
	pki := newTestPKI(t)
	n := &Node{log: testLogger(t)}
	n.tls = peernet.NewTLS(*pki.peerTLS(pki.member(t, "n1")), n.log, func() []string { return []string{"127.0.0.1:1"} })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, tc := range []struct {
		name  string
		sends []byte
		want  int64
	}{
		{"the start of a TLS record, then a hang-up", []byte{peernet.TLSRecordHandshake, 3, 1, 0}, 0},
		{"plaintext", []byte{peernet.ConnRaft}, 1},
	} {
		go func() {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = c.Write(tc.sends)
			_ = c.Close()
		}()
		raw, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		before := refusedBy(n)
		_, _, err = n.openConn(raw)
		raw.Close()
		if err == nil {
			t.Fatalf("%s: openConn succeeded", tc.name)
		}
		if got := refusedBy(n) - before; got != tc.want {
			t.Errorf("%s: counted %d refusals (%v); want %d", tc.name, got, err, tc.want)
		}
	}
}
