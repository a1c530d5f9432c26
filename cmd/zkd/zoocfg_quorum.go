package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/zkd-io/zkd/consensus"
	"github.com/zkd-io/zkd/server"
)

// quorumSecurity collects zoo.cfg's keys for security between servers: sslQuorum,
// portUnification (the quorum side), sslQuorumReloadCertFiles, ssl.quorum.* and quorum.auth.*.
// They become server.Config.PeerTLS once the whole file is read (apply).
type quorumSecurity struct {
	sslQuorum       bool
	portUnification bool
	reload          bool
	// stores holds every ssl.quorum.* key as written (without a zookeeper. prefix), for the
	// loader of key and trust stores.
	stores map[string]string
}

// isQuorumSecurityKey reports whether k (zoo.cfg key without a zookeeper. prefix) is one that
// quorumSecurity handles.
func isQuorumSecurityKey(k string) bool {
	switch k {
	case "sslQuorum", "portUnification", "sslQuorumReloadCertFiles":
		return true
	}
	return strings.HasPrefix(k, "ssl.quorum.") || strings.HasPrefix(k, "quorum.auth.")
}

// quorumSASLKeys switch on SASL between servers, which zkd does not do: it authenticates members
// by mutual TLS, so asking for SASL must stop startup rather than run unauthenticated.
var quorumSASLKeys = map[string]bool{
	"quorum.auth.enableSasl":         true,
	"quorum.auth.learnerRequireSasl": true,
	"quorum.auth.serverRequireSasl":  true,
}

// set records one key; key is as written in the file, k without the zookeeper. prefix.
func (q *quorumSecurity) set(st *settings, key, k, v string) error {
	switch {
	case k == "sslQuorum":
		b, err := boolValue(key, v)
		q.sslQuorum = b
		return err
	case k == "portUnification":
		b, err := boolValue(key, v)
		q.portUnification = b
		return err
	case k == "sslQuorumReloadCertFiles":
		b, err := boolValue(key, v)
		q.reload = b
		return err
	case quorumSASLKeys[k]:
		on, err := boolValue(key, v)
		if err != nil {
			return err
		}
		if on {
			return fmt.Errorf("zoo.cfg: %s=true: zkd authenticates cluster members with mutual TLS, not SASL; "+
				"set sslQuorum=true with ssl.quorum.keyStore.* and ssl.quorum.trustStore.* instead "+
				"(refusing to start less secure than configured)", key)
		}
		return nil
	case strings.HasPrefix(k, "quorum.auth."):
		// Login contexts, the Kerberos principal, ...: meaningful only with quorum SASL, which
		// is off (or startup stopped above).
		st.ignored = append(st.ignored, key)
		return nil
	}
	if q.stores == nil {
		q.stores = make(map[string]string)
	}
	q.stores[k] = v
	return nil
}

// apply sets cfg.PeerTLS from the collected keys. ZooKeeper's modes:
//
//	sslQuorum=false portUnification=false  plaintext (ssl.quorum.* unused)
//	sslQuorum=false portUnification=true   dial plaintext, accept both (rolling upgrade, step 1)
//	sslQuorum=true  portUnification=true   dial TLS, accept both (step 2)
//	sslQuorum=true  portUnification=false  TLS only
func (q *quorumSecurity) apply(cfg *server.Config) error {
	if !q.sslQuorum && !q.portUnification {
		return nil
	}
	if q.reload {
		// TODO(lead): internal/tlsconf reloads; wire it here and drop this refusal.
		return errors.New("zoo.cfg: sslQuorumReloadCertFiles=true: the peer port's PEM loader does not reload certificates yet; " +
			"refusing to start rather than keep using replaced ones (restart zkd after replacing them)")
	}
	srv, cli, err := loadQuorumStores(q.stores)
	if err != nil {
		return err
	}
	pt := &consensus.PeerTLS{
		Server:          srv,
		Client:          cli,
		AcceptPlaintext: q.portUnification,
		DialPlaintext:   !q.sslQuorum,
	}
	if v, ok := q.stores["ssl.quorum.hostnameVerification"]; ok {
		hv, err := boolValue("ssl.quorum.hostnameVerification", v)
		if err != nil {
			return err
		}
		pt.SkipHostnameVerification = !hv
	}
	if err := pt.Validate(); err != nil {
		return fmt.Errorf("zoo.cfg: ssl.quorum.*: %w", err)
	}
	cfg.PeerTLS = pt
	return nil
}

// quorumStoreKeys are the ssl.quorum.* keys loadQuorumStores understands.
var quorumStoreKeys = map[string]bool{
	"ssl.quorum.keyStore.location":               true,
	"ssl.quorum.keyStore.password":               true,
	"ssl.quorum.keyStore.type":                   true,
	"ssl.quorum.trustStore.location":             true,
	"ssl.quorum.trustStore.password":             true,
	"ssl.quorum.trustStore.type":                 true,
	"ssl.quorum.hostnameVerification":            true,
	"ssl.quorum.protocol":                        true,
	"ssl.quorum.enabledProtocols":                true,
	"ssl.quorum.ciphersuites":                    true,
	"ssl.quorum.clientAuth":                      true,
	"ssl.quorum.crl":                             true,
	"ssl.quorum.ocsp":                            true,
	"ssl.quorum.handshakeDetectionTimeoutMillis": true,
}

// loadQuorumStores builds the peer port's server and client TLS configurations from the
// ssl.quorum.* keys. It reads PEM stores (a key store file holding the private key and the
// certificate chain, a trust store file holding CA certificates), as ZooKeeper's PEM type does.
// TODO(lead): replace with internal/tlsconf, which adds PKCS12, JKS and reloading.
func loadQuorumStores(keys map[string]string) (srv, cli *tls.Config, err error) {
	for k, v := range keys {
		if !quorumStoreKeys[k] {
			return nil, nil, fmt.Errorf("zoo.cfg: %s: zkd does not implement this security setting; refusing to start less secure than configured", k)
		}
		switch k {
		case "ssl.quorum.crl", "ssl.quorum.ocsp":
			on, err := boolValue(k, v)
			if err != nil {
				return nil, nil, err
			}
			if on {
				return nil, nil, fmt.Errorf("zoo.cfg: %s=true: zkd does not check revocation on the peer port; refusing to start less secure than configured", k)
			}
		case "ssl.quorum.clientAuth":
			// Peers must always present a verified certificate; "want" and "none" would accept
			// less, so only "need" (ZooKeeper's default) is taken.
			if !strings.EqualFold(v, "need") {
				return nil, nil, keyError(k, v, errors.New("zkd always requires a verified certificate from a peer; only need is supported"))
			}
		}
	}
	keyFile, trustFile := keys["ssl.quorum.keyStore.location"], keys["ssl.quorum.trustStore.location"]
	if keyFile == "" || trustFile == "" {
		return nil, nil, errors.New("zoo.cfg: sslQuorum or portUnification needs ssl.quorum.keyStore.location and ssl.quorum.trustStore.location")
	}
	for _, store := range []string{"keyStore", "trustStore"} {
		typ := keys["ssl.quorum."+store+".type"]
		if typ == "" {
			typ = storeTypeOf(keys["ssl.quorum."+store+".location"])
		}
		if !strings.EqualFold(typ, "PEM") {
			return nil, nil, keyError("ssl.quorum."+store+".type", typ, errors.New("only PEM stores are supported on the peer port so far"))
		}
	}
	if keys["ssl.quorum.keyStore.password"] != "" {
		return nil, nil, errors.New("zoo.cfg: ssl.quorum.keyStore.password: encrypted PEM keys are not supported; use an unencrypted key readable only by zkd")
	}
	pemKey, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("zoo.cfg: ssl.quorum.keyStore.location: %w", err)
	}
	cert, err := tls.X509KeyPair(pemKey, pemKey)
	if err != nil {
		return nil, nil, fmt.Errorf("zoo.cfg: ssl.quorum.keyStore.location %s: %w", keyFile, err)
	}
	pemTrust, err := os.ReadFile(trustFile)
	if err != nil {
		return nil, nil, fmt.Errorf("zoo.cfg: ssl.quorum.trustStore.location: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemTrust) {
		return nil, nil, fmt.Errorf("zoo.cfg: ssl.quorum.trustStore.location %s: no PEM certificate in it", trustFile)
	}
	base := &tls.Config{MinVersion: tls.VersionTLS12}
	if err := tlsVersions(base, keys); err != nil {
		return nil, nil, err
	}
	if v := keys["ssl.quorum.ciphersuites"]; v != "" {
		if base.CipherSuites, err = cipherSuites(v); err != nil {
			return nil, nil, keyError("ssl.quorum.ciphersuites", v, err)
		}
	}
	srv, cli = base.Clone(), base.Clone()
	srv.Certificates, srv.ClientCAs = []tls.Certificate{cert}, pool
	cli.Certificates, cli.RootCAs = []tls.Certificate{cert}, pool
	return srv, cli, nil
}

// storeTypeOf infers a store's type from its file name, as ZooKeeper does.
func storeTypeOf(path string) string {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".pem", ".crt", ".key":
		return "PEM"
	case ".p12", ".pfx":
		return "PKCS12"
	case ".jks":
		return "JKS"
	}
	return "JKS" // Java's default
}

var tlsVersionNames = map[string]uint16{"TLSv1.2": tls.VersionTLS12, "TLSv1.3": tls.VersionTLS13}

// tlsVersions applies ssl.quorum.enabledProtocols or, without it, ssl.quorum.protocol (as in
// ZooKeeper, the enabled protocols default to the one named there). TLS below 1.2 is refused.
func tlsVersions(c *tls.Config, keys map[string]string) error {
	v := keys["ssl.quorum.enabledProtocols"]
	if p := keys["ssl.quorum.protocol"]; p != "" {
		ver, ok := tlsVersionNames[p]
		if !ok && p != "TLS" {
			return keyError("ssl.quorum.protocol", p, errors.New("want TLSv1.2 or TLSv1.3"))
		}
		if v == "" && ok {
			c.MinVersion, c.MaxVersion = ver, ver
		}
	}
	if v == "" {
		return nil
	}
	var lo, hi uint16
	for p := range strings.SplitSeq(v, ",") {
		ver, ok := tlsVersionNames[strings.TrimSpace(p)]
		if !ok {
			return keyError("ssl.quorum.enabledProtocols", v, errors.New("want TLSv1.2 and/or TLSv1.3"))
		}
		if lo == 0 || ver < lo {
			lo = ver
		}
		hi = max(hi, ver)
	}
	c.MinVersion, c.MaxVersion = lo, hi
	return nil
}

// cipherSuites maps a comma-separated list of IANA cipher suite names (Java uses the same names)
// to Go's secure suites. TLS 1.3 suites are not configurable in Go and are skipped.
func cipherSuites(v string) ([]uint16, error) {
	byName := map[string]uint16{}
	for _, s := range tls.CipherSuites() {
		byName[s.Name] = s.ID
	}
	var ids []uint16
	for name := range strings.SplitSeq(v, ",") {
		name = strings.TrimSpace(name)
		if strings.HasPrefix(name, "TLS_AES_") || strings.HasPrefix(name, "TLS_CHACHA20_") {
			continue
		}
		id, ok := byName[name]
		if !ok {
			return nil, fmt.Errorf("%s is not a cipher suite Go considers secure", name)
		}
		ids = append(ids, id)
	}
	return ids, nil
}
