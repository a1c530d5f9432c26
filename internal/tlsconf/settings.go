// Package tlsconf turns ZooKeeper-style TLS settings (the ssl.* keys of zoo.cfg, or ssl.quorum.*
// for the peer port) into crypto/tls configurations, and keeps them current when the key and
// trust store files change.
//
// It owns reading key and trust stores (PEM, PKCS12 and JKS, the formats ZooKeeper reads),
// mapping Java's protocol and cipher suite names onto Go's, and formatting a certificate's subject
// as Java's X500Principal.getName() does (ZooKeeper's x509 identities). It does no networking:
// the server and the peer transport hand its tls.Configs to their own listeners and dialers.
//
// A Source is safe for concurrent use. It re-reads its files at most once per ReloadInterval,
// when a handshake asks for the configuration, so it starts no goroutines.
package tlsconf

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// ClientAuth is what a server asks of a client's certificate (ZooKeeper's ssl.clientAuth).
type ClientAuth int

const (
	// ClientAuthNeed requires a certificate the trust store verifies (ZooKeeper's default).
	ClientAuthNeed ClientAuth = iota
	// ClientAuthWant asks for a certificate and verifies one when given; a client without
	// one is still served.
	ClientAuthWant
	// ClientAuthNone asks for no certificate.
	ClientAuthNone
)

// String returns the zoo.cfg spelling.
func (a ClientAuth) String() string {
	switch a {
	case ClientAuthWant:
		return "want"
	case ClientAuthNone:
		return "none"
	}
	return "need"
}

// StoreType is the format of a key or trust store file.
type StoreType string

// The store types zkd reads. ZooKeeper also knows BCFKS, which needs BouncyCastle; zkd refuses it.
const (
	StorePEM    StoreType = "PEM"
	StorePKCS12 StoreType = "PKCS12"
	StoreJKS    StoreType = "JKS"
)

// Store names a key or trust store file.
type Store struct {
	// Location is the file's path. Empty means none: no key store, or, for a trust store, the
	// system's trusted roots.
	Location string
	// Password opens the store (and, in PKCS12 and JKS, the private key). Empty means none.
	Password string
	// Type is the file's format. Empty means it is guessed from the file name as ZooKeeper
	// does: .pem, .p12 or .pfx, .jks.
	Type StoreType
}

// Settings are one set of TLS settings, as Parse reads them from ZooKeeper's keys.
type Settings struct {
	// Prefix is the key prefix the settings were read with ("ssl." or "ssl.quorum."); errors
	// name keys with it. Empty means "ssl.".
	Prefix string
	// KeyStore holds this side's private key and certificate chain.
	KeyStore Store
	// TrustStore holds the certificates that verify the other side.
	TrustStore Store
	// ClientAuth is what a server asks of clients. The zero value is ClientAuthNeed.
	ClientAuth ClientAuth
	// MinVersion and MaxVersion bound the TLS versions (tls.VersionTLS12 and so on). Zero means
	// ZooKeeper's default: TLS 1.2 and 1.3.
	MinVersion, MaxVersion uint16
	// CipherSuites are the TLS 1.2 (and older) cipher suites allowed. Nil means Go's defaults.
	// TLS 1.3 suites are not configurable in Go; their names are accepted and change nothing.
	CipherSuites []uint16
	// HostnameVerification makes a client check that the server's certificate names the host it
	// dialled (ZooKeeper's hostnameVerification, true by default).
	HostnameVerification bool
	// ClientHostnameVerification makes a server check that a client's certificate names the
	// address it connects from. ZooKeeper does so on the quorum port only, so Parse sets it from
	// hostnameVerification for the "ssl.quorum." prefix.
	ClientHostnameVerification bool
	// AuthProvider is the auth scheme a verified certificate authenticates with (ZooKeeper's
	// ssl.authProvider). Empty means "x509".
	AuthProvider string
	// HandshakeTimeout bounds a server-side handshake (handshakeDetectionTimeoutMillis). Zero
	// means the caller's own timeout.
	HandshakeTimeout time.Duration
	// ReloadInterval is how often, at most, the store files are checked for changes. Zero means
	// one second; negative means never.
	ReloadInterval time.Duration
}

func (s Settings) prefix() string {
	if s.Prefix == "" {
		return "ssl."
	}
	return s.Prefix
}

// key returns the full zoo.cfg key for a setting, for error messages.
func (s Settings) key(name string) string { return s.prefix() + name }

// keys the Parse function knows, below the prefix.
var knownKeys = []string{
	"keyStore.location", "keyStore.password", "keyStore.passwordPath", "keyStore.type",
	"trustStore.location", "trustStore.password", "trustStore.passwordPath", "trustStore.type",
	"clientAuth", "protocol", "enabledProtocols", "ciphersuites", "hostnameVerification",
	"clientHostnameVerification", "crl", "ocsp", "handshakeDetectionTimeoutMillis", "sslProvider",
	"authProvider", "context.supplier.class",
}

// Parse reads the TLS settings under prefix ("ssl." for the client port, "ssl.quorum." for the
// peer port) from ZooKeeper-style properties. Keys may carry ZooKeeper's "zookeeper." system
// property prefix. Keys of another prefix are ignored ("ssl.quorum.*" when prefix is "ssl.");
// an unknown key under prefix, a bad value, or a setting zkd does not implement (crl or ocsp
// true, a context supplier class) is an error naming the key.
func Parse(props map[string]string, prefix string) (Settings, error) {
	set := Settings{Prefix: prefix, HostnameVerification: true}
	protocol := ""
	var enabled []string
	clientHostname := ""
	for rawKey, v := range props {
		k := strings.TrimPrefix(rawKey, "zookeeper.")
		name, ok := strings.CutPrefix(k, prefix)
		if !ok || (prefix == "ssl." && strings.HasPrefix(name, "quorum.")) {
			continue
		}
		v = strings.TrimSpace(v)
		bad := func(err error) error { return fmt.Errorf("%s=%q: %w", k, v, err) }
		var err error
		switch name {
		case "keyStore.location":
			set.KeyStore.Location = v
		case "keyStore.password":
			set.KeyStore.Password = v
		case "keyStore.passwordPath":
			if set.KeyStore.Password, err = readSecret(v); err != nil {
				return set, bad(err)
			}
		case "keyStore.type":
			if set.KeyStore.Type, err = parseStoreType(v); err != nil {
				return set, bad(err)
			}
		case "trustStore.location":
			set.TrustStore.Location = v
		case "trustStore.password":
			set.TrustStore.Password = v
		case "trustStore.passwordPath":
			if set.TrustStore.Password, err = readSecret(v); err != nil {
				return set, bad(err)
			}
		case "trustStore.type":
			if set.TrustStore.Type, err = parseStoreType(v); err != nil {
				return set, bad(err)
			}
		case "clientAuth":
			switch strings.ToLower(v) {
			case "", "need":
				set.ClientAuth = ClientAuthNeed
			case "want":
				set.ClientAuth = ClientAuthWant
			case "none":
				set.ClientAuth = ClientAuthNone
			default:
				return set, bad(errors.New("must be none, want or need"))
			}
		case "protocol":
			if _, err := tlsVersion(v); err != nil {
				return set, bad(err)
			}
			protocol = v
		case "enabledProtocols":
			for p := range strings.SplitSeq(v, ",") {
				if p = strings.TrimSpace(p); p != "" {
					if _, err := tlsVersion(p); err != nil {
						return set, bad(err)
					}
					enabled = append(enabled, p)
				}
			}
		case "ciphersuites":
			if set.CipherSuites, err = CipherSuites(v); err != nil {
				return set, bad(err)
			}
		case "hostnameVerification":
			if set.HostnameVerification, err = parseBool(v); err != nil {
				return set, bad(err)
			}
		case "clientHostnameVerification":
			if _, err := parseBool(v); err != nil {
				return set, bad(err)
			}
			clientHostname = v
		case "authProvider":
			set.AuthProvider = v
		case "context.supplier.class":
			if v != "" {
				return set, bad(errors.New("zkd cannot load Java classes; configure the stores with the keyStore and trustStore keys"))
			}
		case "crl", "ocsp":
			on, err := parseBool(v)
			if err != nil {
				return set, bad(err)
			}
			if on {
				return set, bad(errors.New("zkd does not implement certificate revocation checking; " +
					"refusing to start less secure than configured (remove the key, or set it to false and rely on short-lived certificates)"))
			}
		case "handshakeDetectionTimeoutMillis":
			var ms int
			if _, err := fmt.Sscan(v, &ms); err != nil || ms <= 0 {
				return set, bad(errors.New("must be a positive integer"))
			}
			set.HandshakeTimeout = time.Duration(ms) * time.Millisecond
		case "sslProvider":
			// JDK or OPENSSL picks Netty's TLS engine in ZooKeeper; zkd always uses Go's.
		default:
			return set, bad(fmt.Errorf("unknown TLS setting (zkd knows %s%s)", prefix, strings.Join(knownKeys, ", "+prefix)))
		}
	}
	// ZooKeeper checks clients' host names on the quorum port only, unless
	// clientHostnameVerification says otherwise; it never does without hostnameVerification.
	set.ClientHostnameVerification = prefix == "ssl.quorum."
	if clientHostname != "" {
		set.ClientHostnameVerification, _ = parseBool(clientHostname)
	}
	set.ClientHostnameVerification = set.ClientHostnameVerification && set.HostnameVerification
	set.MinVersion, set.MaxVersion = versionRange(protocol, enabled)
	return set, nil
}

// readSecret reads a password file (passwordPath), without its trailing line break.
func readSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

func parseBool(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "true", "yes":
		return true, nil
	case "false", "no", "":
		return false, nil
	}
	return false, errors.New("must be true or false")
}

func parseStoreType(v string) (StoreType, error) {
	switch strings.ToUpper(v) {
	case "":
		return "", nil
	case "PEM":
		return StorePEM, nil
	case "PKCS12":
		return StorePKCS12, nil
	case "JKS":
		return StoreJKS, nil
	case "BCFKS":
		return "", errors.New("BCFKS stores need BouncyCastle; zkd reads PEM, PKCS12 and JKS")
	}
	return "", errors.New("unknown store type (want PEM, PKCS12 or JKS)")
}

// storeType returns the store's type, guessed from its file name when not given, as ZooKeeper
// guesses it.
func storeType(st Store) (StoreType, error) {
	if st.Type != "" {
		return st.Type, nil
	}
	switch strings.ToLower(filepath.Ext(st.Location)) {
	case ".pem":
		return StorePEM, nil
	case ".p12", ".pfx":
		return StorePKCS12, nil
	case ".jks":
		return StoreJKS, nil
	}
	return "", errors.New("cannot tell the store type from the file name (use .pem, .p12, .pfx or .jks, or set the type key)")
}

// tlsVersion maps a Java protocol name onto Go's version number.
func tlsVersion(name string) (uint16, error) {
	switch name {
	case "TLSv1.3":
		return tls.VersionTLS13, nil
	case "TLSv1.2":
		return tls.VersionTLS12, nil
	case "TLSv1.1":
		return tls.VersionTLS11, nil
	case "TLSv1":
		return tls.VersionTLS10, nil
	case "TLS":
		return 0, nil
	}
	return 0, errors.New("unknown TLS protocol (want TLSv1.3, TLSv1.2, TLSv1.1, TLSv1 or TLS)")
}

// versionRange derives the versions to allow, as ZooKeeper derives its enabled protocols: the
// enabledProtocols list when given; otherwise protocol alone, or TLS 1.3 with 1.2 when protocol
// is TLSv1.3 or unset. Go allows a range, so the range spans the list.
func versionRange(protocol string, enabled []string) (lo, hi uint16) {
	if len(enabled) == 0 {
		switch protocol {
		case "", "TLSv1.3":
			return tls.VersionTLS12, tls.VersionTLS13
		case "TLS":
			return tls.VersionTLS10, tls.VersionTLS13
		}
		enabled = []string{protocol}
	}
	var vs []uint16
	for _, p := range enabled {
		v, _ := tlsVersion(p)
		if v == 0 {
			vs = append(vs, tls.VersionTLS10, tls.VersionTLS13)
			continue
		}
		vs = append(vs, v)
	}
	return slices.Min(vs), slices.Max(vs)
}
