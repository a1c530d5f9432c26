package server

import (
	"crypto/tls"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/zkd-io/zkd/internal/tlsconf"
	"github.com/zkd-io/zkd/jute"
)

// listenMode is what a client listener speaks.
type listenMode int

const (
	modePlain   listenMode = iota // plain TCP only
	modeTLS                       // TLS only (the secure client port)
	modeUnified                   // both, told apart by the first byte (client.portUnification)
)

// tlsHandshakeRecord is the first byte of every TLS connection: the record type of a handshake.
// No ZooKeeper request starts with it: a ConnectRequest's length prefix starts with a zero
// byte, and no four-letter word starts with 0x16.
const tlsHandshakeRecord = 0x16

// bufferedConn reads through the connection's reader, so that bytes already peeked from the
// socket (port unification) reach the TLS layer.
type bufferedConn struct {
	net.Conn
	r *connReader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// startTLS runs the TLS handshake of a connection accepted on a secure or unified listener,
// before its reader and writer start; on a unified listener, a connection whose first byte is
// not a TLS record stays plain. A client whose certificate was verified gets its x509 id. It
// reports false when it closed the connection (the failure is logged).
func (c *conn) startTLS() bool {
	s := c.s
	timeout := s.cfg.SessionlessTimeout
	_ = c.raw.SetDeadline(time.Now().Add(timeout))
	defer func() { _ = c.raw.SetDeadline(time.Time{}) }()
	if c.mode == modeUnified {
		first, err := c.br.Peek(1)
		if err != nil {
			c.countSessionless(err)
			c.abort(c.readEnded(err), err)
			return false
		}
		if first[0] != tlsHandshakeRecord {
			return true // a plain client; readLoop takes it from here
		}
	}
	tc := tls.Server(&bufferedConn{Conn: c.raw, r: c.br}, s.cfg.TLS)
	if err := tc.Handshake(); err != nil {
		s.m.tlsFailed.Inc()
		if !c.isClosed() {
			s.tlsLog.log(s.log, "tls handshake failed; connection closed", "remote", c.remote, "err", err)
		}
		c.abort(closeTLSHandshake, err)
		return false
	}
	c.nc = tc
	c.br = &connReader{}
	c.br.reset(tc, &s.readBufs)
	c.x509Auth(tc.ConnectionState())
	return true
}

// x509Auth gives a client whose certificate chain the server verified ZooKeeper's x509 id: its
// certificate's subject as Java prints it. The configured X509SuperUser also gets super, with
// the same id, as ZooKeeper's X509AuthenticationProvider does.
func (c *conn) x509Auth(cs tls.ConnectionState) {
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return // clientAuth want or none, and no certificate given
	}
	dn, err := tlsconf.SubjectDN(cs.VerifiedChains[0][0])
	if err != nil {
		c.log.Info("x509: cannot read the client certificate's subject; no x509 id", "err", err)
		return
	}
	if su := c.s.cfg.X509SuperUser; su != "" && su == dn {
		c.addAuth(jute.Id{Scheme: "super", ID: dn})
		c.log.Info("x509: authenticated as super user", "id", dn)
	}
	c.addAuth(jute.Id{Scheme: "x509", ID: dn})
	c.log.Debug("x509: authenticated", "id", dn)
}

// onceLog logs a recurring event at INFO once a minute at most, saying how many it left out, and
// at DEBUG every time, so that a client retrying a bad handshake cannot flood the log.
type onceLog struct {
	mu      sync.Mutex
	last    time.Time
	dropped int
}

func (o *onceLog) log(l *slog.Logger, msg string, args ...any) {
	o.mu.Lock()
	now := time.Now()
	info := o.last.IsZero() || now.Sub(o.last) >= time.Minute
	dropped := o.dropped
	if info {
		o.last, o.dropped = now, 0
	} else {
		o.dropped++
	}
	o.mu.Unlock()
	if info {
		if dropped > 0 {
			args = append(args, "similarSinceLastLogged", dropped)
		}
		l.Info(msg, args...)
		return
	}
	l.Debug(msg, args...)
}
