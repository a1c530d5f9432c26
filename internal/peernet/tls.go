package peernet

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// TLSConfig puts the peer port (Raft and the cluster RPC) under mutual TLS, ZooKeeper's
// sslQuorum. Every accepted TLS connection must present a certificate that chains to the trust
// store; with hostname verification (the default, ssl.quorum.hostnameVerification=true) it must
// also come from the host of a configured member and name that host, and a dialled member's
// certificate must name the host it was dialled at. See docs/security.md for what this does and
// does not prove.
//
// The configurations are used as given for every connection, so a loader that reloads
// certificates through GetCertificate, GetClientCertificate or GetConfigForClient keeps working.
// They must not be modified after New.
type TLSConfig struct {
	// Server accepts peer connections: it must hold this member's certificate (Certificates,
	// GetCertificate or GetConfigForClient) and the trust store for peers' certificates
	// (ClientCAs, or GetConfigForClient). Its ClientAuth is ignored: a peer must always present
	// a certificate that verifies (tls.RequireAndVerifyClientCert). Required.
	Server *tls.Config
	// Client dials peers: it presents this member's certificate (Certificates or
	// GetClientCertificate) and verifies the peer's against RootCAs. ServerName is set per dial
	// to the dialled member's host. Required unless DialPlaintext.
	Client *tls.Config
	// ClientFor, when set, replaces Client: it returns the configuration for dialling the member
	// at host, which must present this member's certificate and verify the peer's chain, and its
	// name unless SkipHostnameVerification. A loader that reloads its trust store uses it (a
	// Client with InsecureSkipVerify and its own check could not learn the host of each dial).
	ClientFor func(host string) *tls.Config
	// SkipHostnameVerification checks certificates against the trust store only
	// (ssl.quorum.hostnameVerification=false): any certificate the trust store accepts is a
	// member, from any address. False (the default, as in ZooKeeper) also checks hosts as
	// described on TLSConfig.
	SkipHostnameVerification bool
	// AcceptPlaintext also accepts peers that connect without TLS (ZooKeeper's portUnification
	// on the quorum side, for a rolling change between plaintext and TLS). The first byte of a
	// connection tells them apart: 0x16 opens a TLS handshake, zkd's plaintext peer connections
	// start with 0x01 or 0x02. Plaintext peers are not authenticated. False refuses them.
	AcceptPlaintext bool
	// DialPlaintext dials peers without TLS while still accepting TLS connections (sslQuorum=false
	// with portUnification=true: the first step of a rolling upgrade). It requires
	// AcceptPlaintext. False dials every peer with TLS.
	DialPlaintext bool
}

// Validate reports the first problem with t.
func (t *TLSConfig) Validate() error {
	switch {
	case t.Server == nil:
		return errors.New("consensus: config: TLS.Server is required")
	case t.Server.ClientCAs == nil && t.Server.GetConfigForClient == nil:
		// Without ClientCAs Go would verify peers against the system roots: any publicly
		// issued certificate would make its holder a member.
		return errors.New("consensus: config: TLS.Server needs ClientCAs, the trust store for peer certificates")
	case len(t.Server.Certificates) == 0 && t.Server.GetCertificate == nil && t.Server.GetConfigForClient == nil:
		return errors.New("consensus: config: TLS.Server has no certificate")
	case t.DialPlaintext && !t.AcceptPlaintext:
		return errors.New("consensus: config: TLS.DialPlaintext requires AcceptPlaintext (peers that dial plaintext must be accepted)")
	case !t.DialPlaintext && t.Client == nil && t.ClientFor == nil:
		return errors.New("consensus: config: TLS.Client is required unless DialPlaintext")
	}
	if !t.DialPlaintext && t.ClientFor == nil {
		switch {
		case t.Client.RootCAs == nil && t.Client.VerifyConnection == nil:
			return errors.New("consensus: config: TLS.Client needs RootCAs, the trust store for peer certificates")
		case len(t.Client.Certificates) == 0 && t.Client.GetClientCertificate == nil:
			return errors.New("consensus: config: TLS.Client has no certificate to present")
		}
	}
	return nil
}

// TLSRecordHandshake is the first byte of a TLS ClientHello record.
const TLSRecordHandshake byte = 0x16

// TLS is a node's side of TLSConfig: the configurations it handshakes with, the member hosts it
// checks, and the log of refused peers.
type TLS struct {
	cfg      TLSConfig
	server   *tls.Config
	log      *slog.Logger
	members  func() []string // the configured members' peer addresses
	resolver *net.Resolver
	refused  atomic.Int64 // accepted connections refused (no TLS, a handshake this side failed, membership)
	failed   FailLog
}

// DialPlaintext reports whether peers are dialled without TLS (TLSConfig.DialPlaintext).
func (p *TLS) DialPlaintext() bool { return p.cfg.DialPlaintext }

// Refused counts the accepted connections refused: no TLS, a handshake this side failed, or a
// peer that is not a member.
func (p *TLS) Refused() int64 { return p.refused.Load() }

// NewTLS returns a node's side of cfg; members returns the configured members' peer addresses.
func NewTLS(cfg TLSConfig, log *slog.Logger, members func() []string) *TLS {
	p := &TLS{cfg: cfg, log: log, members: members, resolver: net.DefaultResolver}
	p.server = cfg.Server.Clone()
	p.server.ClientAuth = tls.RequireAndVerifyClientCert
	if get := cfg.Server.GetConfigForClient; get != nil {
		p.server.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			c, err := get(hello)
			if err != nil || c == nil {
				return c, err
			}
			if c.ClientCAs == nil {
				// Go would verify the peer against the system roots.
				return nil, errors.New("consensus: peer TLS configuration without ClientCAs")
			}
			c = c.Clone()
			c.ClientAuth = tls.RequireAndVerifyClientCert
			return c, nil
		}
	}
	return p
}

// client returns the configuration for dialling addr.
func (p *TLS) client(addr string) (*tls.Config, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if p.cfg.ClientFor != nil {
		return p.cfg.ClientFor(host), nil
	}
	c := p.cfg.Client.Clone()
	c.ServerName = host
	if p.cfg.SkipHostnameVerification {
		// Chain only: crypto/tls checks the name together with the chain, so it is skipped and
		// the chain verified here.
		roots, own := c.RootCAs, c.VerifyConnection
		c.InsecureSkipVerify = true
		c.VerifyConnection = func(cs tls.ConnectionState) error {
			if err := verifyChain(cs, roots, x509.ExtKeyUsageServerAuth); err != nil {
				return err
			}
			if own != nil {
				return own(cs)
			}
			return nil
		}
	}
	return c, nil
}

func verifyChain(cs tls.ConnectionState, roots *x509.CertPool, usage x509.ExtKeyUsage) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("consensus: peer presented no certificate")
	}
	opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{usage}}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(opts)
	return err
}

// Dial upgrades c, just dialled to addr, to TLS. The handshake is bounded by ctx.
func (p *TLS) Dial(ctx context.Context, c net.Conn, addr string) (net.Conn, error) {
	cfg, err := p.client(addr)
	if err != nil {
		return nil, err
	}
	tc := tls.Client(c, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		p.failed.Note(p.log, "dial "+addr, "TLS handshake with peer failed", "addr", addr, "err", err)
		return nil, fmt.Errorf("consensus: TLS handshake with %s: %w", addr, err)
	}
	p.failed.OK(p.log, "dial "+addr, "TLS handshake with peer succeeds again", "addr", addr)
	return tc, nil
}

// hungUp reports whether a handshake failed because the other side closed the connection or
// stopped answering, rather than because this side turned it down.
func hungUp(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded)
}

// Accept decides an accepted connection whose first byte is first (already read; c replays it)
// and returns the connection to read the connection type from, or an error if it is refused.
// c's deadline bounds the handshake.
func (p *TLS) Accept(ctx context.Context, c net.Conn, first byte) (net.Conn, error) {
	remote := RemoteHost(c)
	key := "accept " + remote
	if first != TLSRecordHandshake {
		if !p.cfg.AcceptPlaintext {
			p.refused.Add(1)
			p.failed.Note(p.log, key, "refused a plaintext peer connection: the peer port requires TLS (sslQuorum)", "remote", c.RemoteAddr())
			return nil, errors.New("consensus: plaintext peer connection refused")
		}
		if !p.cfg.SkipHostnameVerification {
			if _, err := p.memberHosts(ctx, remote); err != nil {
				p.refused.Add(1)
				p.failed.Note(p.log, key, "refused a plaintext peer connection", "remote", c.RemoteAddr(), "err", err)
				return nil, err
			}
		}
		return c, nil
	}
	tc := tls.Server(c, p.server)
	if err := tc.HandshakeContext(ctx); err != nil {
		if hungUp(err) {
			return nil, err // the peer went away (a member stopping, say) or stalled: nothing was refused
		}
		p.refused.Add(1)
		p.failed.Note(p.log, key, "refused a peer: TLS handshake failed", "remote", c.RemoteAddr(), "err", err)
		return nil, err
	}
	if !p.cfg.SkipHostnameVerification {
		if err := p.checkMember(ctx, tc.ConnectionState(), remote); err != nil {
			p.refused.Add(1)
			p.failed.Note(p.log, key, "refused a peer", "remote", c.RemoteAddr(), "err", err)
			return nil, err
		}
	}
	p.failed.OK(p.log, key, "accepted a peer again after refusals", "remote", c.RemoteAddr())
	return tc, nil
}

// checkMember checks a verified client certificate from remote (an IP address): remote must be
// the host of a configured member, and the certificate must name remote or that member's host
// name.
func (p *TLS) checkMember(ctx context.Context, cs tls.ConnectionState, remote string) error {
	names, err := p.memberHosts(ctx, remote)
	if err != nil {
		return err
	}
	cert := cs.PeerCertificates[0]
	if cert.VerifyHostname(remote) == nil {
		return nil
	}
	for _, h := range names {
		if cert.VerifyHostname(h) == nil {
			return nil
		}
	}
	return fmt.Errorf("consensus: peer certificate (subject %q) names neither %s nor a member host name at that address %q",
		cert.Subject.String(), remote, names)
}

// memberHosts returns the host names (not IP literals) of the configured members whose host is
// remote, or an error if no member's host is. A member-to-be started with no Peers knows no
// members until the leader reaches it: it accepts any address (the certificate must still name
// it), since it has no state to protect and must let the leader in.
func (p *TLS) memberHosts(ctx context.Context, remote string) ([]string, error) {
	ip := net.ParseIP(remote)
	var names []string
	members := p.members()
	if len(members) == 0 {
		return nil, nil
	}
	found := false
	for _, addr := range members {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			continue
		}
		if hip := net.ParseIP(host); hip != nil {
			found = found || (ip != nil && hip.Equal(ip))
			continue
		}
		ips, err := p.resolver.LookupIPAddr(ctx, host)
		if err != nil {
			continue
		}
		if slices.ContainsFunc(ips, func(a net.IPAddr) bool { return ip != nil && a.IP.Equal(ip) }) {
			found = true
			names = append(names, host)
		}
	}
	if !found {
		return nil, fmt.Errorf("consensus: %s is not the host of a configured member", remote)
	}
	return names, nil
}

// RemoteHost returns the host of c's remote address.
func RemoteHost(c net.Conn) string {
	a := c.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(a); err == nil {
		return h
	}
	return a
}

// ReplayConn returns bytes already read from its connection (First) before the rest.
type ReplayConn struct {
	net.Conn
	First []byte
}

func (c *ReplayConn) Read(p []byte) (int, error) {
	if len(c.First) > 0 {
		n := copy(p, c.First)
		c.First = c.First[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// FailLog logs a failure for a key (a peer) once, then at most every LogEvery while it goes on,
// and once when it stops, instead of once per attempt.
type FailLog struct {
	every time.Duration // zero means LogEvery
	mu    sync.Mutex
	m     map[string]*peerFail
}

// MaxFailKeys bounds the peers a FailLog tracks.
const MaxFailKeys = 1024

type peerFail struct {
	since, logged time.Time
	count         int
}

// Note logs msg for key as described on FailLog.
func (f *FailLog) Note(log *slog.Logger, key, msg string, args ...any) {
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = make(map[string]*peerFail)
	}
	e := f.m[key]
	if e == nil {
		if len(f.m) >= MaxFailKeys {
			// Refusals from this many addresses at once are a scan or a flood, not a
			// misconfigured member: stay silent about new ones rather than grow without bound.
			return
		}
		f.m[key] = &peerFail{since: now, logged: now, count: 1}
		log.Warn(msg, args...)
		return
	}
	e.count++
	if now.Sub(e.logged) >= cmp.Or(f.every, LogEvery) {
		e.logged = now
		log.Warn(msg, append(args, "for", now.Sub(e.since).Round(time.Second), "failures", e.count)...)
	}
}

// OK logs msg once if key had failures, and forgets them.
func (f *FailLog) OK(log *slog.Logger, key, msg string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e := f.m[key]; e != nil {
		delete(f.m, key)
		log.Info(msg, append(args, "failures", e.count)...)
	}
}
