package tlsconf

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"
)

// Source serves TLS configurations built from Settings and keeps them current: when a handshake
// asks for a configuration and ReloadInterval has passed since the last look, it re-reads the
// store files and, if their contents changed and still load, uses the new key and trust anchors
// from the next handshake on. A change that does not load (a half-written file, a wrong password)
// is logged once and the previous material stays in use.
type Source struct {
	set Settings
	log *slog.Logger
	// now reads the clock ReloadInterval is measured on: time.Now, or a test's fake clock.
	now func() time.Time

	mu struct {
		sync.Mutex
		cur     *material
		checked time.Time
		// failed is the digest of the files whose load last failed, and failedMsg its error,
		// so that a failure is logged once.
		failed    [sha256.Size]byte
		failedMsg string
	}
}

// material is one loaded generation of key and trust stores.
type material struct {
	digest [sha256.Size]byte
	cert   *tls.Certificate // nil without a key store
	roots  *x509.CertPool   // nil means the system's roots
	server *tls.Config      // the server-side configuration built from it
}

// New loads the stores set names and returns a Source serving them. A nil logger discards.
// An unreadable or wrong store is an error that names its zoo.cfg key.
func New(set Settings, log *slog.Logger) (*Source, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if set.ReloadInterval == 0 {
		set.ReloadInterval = time.Second
	}
	s := &Source{set: set, log: log, now: time.Now}
	files, digest, err := s.read()
	if err != nil {
		return nil, err
	}
	m, err := s.load(files, digest)
	if err != nil {
		return nil, err
	}
	s.mu.cur = m
	s.mu.checked = s.now()
	return s, nil
}

// Settings returns the settings the Source was made from.
func (s *Source) Settings() Settings { return s.set }

// Close releases the Source. It holds no goroutines or open files, so Close only exists for
// owners that treat it as a resource; it is safe to call more than once.
func (s *Source) Close() error { return nil }

// storeFiles are the raw contents of the key and trust stores (nil when not configured).
type storeFiles struct{ key, trust []byte }

// read reads both store files and digests their contents.
func (s *Source) read() (storeFiles, [sha256.Size]byte, error) {
	var f storeFiles
	var err error
	if loc := s.set.KeyStore.Location; loc != "" {
		if f.key, err = os.ReadFile(loc); err != nil {
			return f, [sha256.Size]byte{}, fmt.Errorf("%s: %w", s.set.key("keyStore.location"), err)
		}
	}
	if loc := s.set.TrustStore.Location; loc != "" {
		if f.trust, err = os.ReadFile(loc); err != nil {
			return f, [sha256.Size]byte{}, fmt.Errorf("%s: %w", s.set.key("trustStore.location"), err)
		}
	}
	h := sha256.New()
	h.Write(f.key)
	h.Write([]byte{0})
	h.Write(f.trust)
	var d [sha256.Size]byte
	copy(d[:], h.Sum(nil))
	return f, d, nil
}

// load parses the stores and builds the server configuration.
func (s *Source) load(f storeFiles, digest [sha256.Size]byte) (*material, error) {
	m := &material{digest: digest}
	if f.key != nil {
		cert, err := loadKeyStore(s.set.KeyStore, f.key)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", s.set.key("keyStore.location"), s.set.KeyStore.Location, explainPassword(err, s.set.KeyStore, s.set.key("keyStore.password")))
		}
		m.cert = cert
	}
	if f.trust != nil {
		roots, err := loadTrustStore(s.set.TrustStore, f.trust)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", s.set.key("trustStore.location"), s.set.TrustStore.Location, explainPassword(err, s.set.TrustStore, s.set.key("trustStore.password")))
		}
		m.roots = roots
	}
	m.server = s.serverConfig(m)
	return m, nil
}

// explainPassword adds the password key to an error reading a password-protected store (PKCS12
// and JKS), since a wrong password is the usual cause and the libraries' messages vary.
func explainPassword(err error, st Store, key string) error {
	if typ, _ := storeType(st); typ == StorePKCS12 || typ == StoreJKS {
		return fmt.Errorf("%w (wrong password? check %s)", err, key)
	}
	return err
}

// current returns the material to use now, re-reading the files when ReloadInterval has passed.
func (s *Source) current() *material {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if s.set.ReloadInterval < 0 || now.Sub(s.mu.checked) < s.set.ReloadInterval {
		return s.mu.cur
	}
	s.mu.checked = now
	files, digest, err := s.read()
	if err == nil && digest == s.mu.cur.digest {
		return s.mu.cur
	}
	if err == nil && digest == s.mu.failed && s.mu.failedMsg != "" {
		return s.mu.cur
	}
	var m *material
	if err == nil {
		m, err = s.load(files, digest)
	}
	if err != nil {
		if err.Error() != s.mu.failedMsg {
			s.log.Warn("tls: changed certificate files do not load; keeping the previous ones", "err", err)
		}
		s.mu.failed, s.mu.failedMsg = digest, err.Error()
		return s.mu.cur
	}
	s.mu.failedMsg = ""
	s.mu.cur = m
	s.log.Info("tls: reloaded certificates", "keyStore", s.set.KeyStore.Location, "trustStore", s.set.TrustStore.Location)
	return m
}

// Certificate returns the key store's leaf certificate now in use, or nil without a key store.
func (s *Source) Certificate() *x509.Certificate {
	if c := s.current().cert; c != nil {
		return c.Leaf
	}
	return nil
}

// serverConfig builds the server-side configuration of one generation of material.
func (s *Source) serverConfig(m *material) *tls.Config {
	cfg := &tls.Config{
		MinVersion:   s.set.MinVersion,
		MaxVersion:   s.set.MaxVersion,
		CipherSuites: s.set.CipherSuites,
		ClientCAs:    m.roots,
	}
	if m.roots == nil {
		if pool, err := x509.SystemCertPool(); err == nil {
			cfg.ClientCAs = pool
		}
	}
	if m.cert != nil {
		cfg.Certificates = []tls.Certificate{*m.cert}
	}
	switch s.set.ClientAuth {
	case ClientAuthNeed:
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	case ClientAuthWant:
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	default:
		cfg.ClientAuth = tls.NoClientCert
	}
	return cfg
}

// ServerConfig returns a configuration for a TLS server: every handshake uses the newest
// material. Without a key store every handshake fails.
func (s *Source) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: s.set.MinVersion,
		MaxVersion: s.set.MaxVersion,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			m := s.current()
			if m.cert == nil {
				return nil, fmt.Errorf("tlsconf: no key store (%s)", s.set.key("keyStore.location"))
			}
			if !s.set.ClientHostnameVerification || hello.Conn == nil {
				return m.server, nil
			}
			cfg := m.server.Clone()
			remote := hello.Conn.RemoteAddr()
			cfg.VerifyConnection = func(cs tls.ConnectionState) error {
				if len(cs.PeerCertificates) == 0 {
					return nil // clientAuth want or none
				}
				return verifyHost(cs.PeerCertificates[0], remote)
			}
			return cfg, nil
		},
	}
}

// verifyHost checks that a peer's certificate names the address it connects from, by IP or by
// the names the address resolves back to.
func verifyHost(cert *x509.Certificate, addr net.Addr) error {
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		host = addr.String()
	}
	first := cert.VerifyHostname(host)
	if first == nil {
		return nil
	}
	names, _ := net.LookupAddr(host)
	for _, n := range names {
		if cert.VerifyHostname(n) == nil {
			return nil
		}
	}
	return first
}

// ClientConfig returns a configuration for a TLS client dialling serverName (a host name or an
// address, without a port): it presents the key store's certificate, if any, and verifies the
// server against the trust store (the system's roots without one), checking that the
// certificate names serverName when HostnameVerification is on. Both come from the newest
// material at each handshake.
func (s *Source) ClientConfig(serverName string) *tls.Config {
	return &tls.Config{
		ServerName:   serverName,
		MinVersion:   s.set.MinVersion,
		MaxVersion:   s.set.MaxVersion,
		CipherSuites: s.set.CipherSuites,
		// The verification below replaces Go's, so that the roots can change without a new
		// Config; it is never skipped.
		InsecureSkipVerify: true,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if c := s.current().cert; c != nil {
				return c, nil
			}
			return &tls.Certificate{}, nil // no certificate to offer
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			return s.verifyServer(cs, serverName)
		},
	}
}

// verifyServer verifies a server's chain against the current roots and, when hostname
// verification is on, its name.
func (s *Source) verifyServer(cs tls.ConnectionState, serverName string) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tlsconf: the server sent no certificate")
	}
	roots := s.current().roots
	opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool()}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	if s.set.HostnameVerification {
		opts.DNSName = serverName
	}
	_, err := cs.PeerCertificates[0].Verify(opts)
	return err
}
