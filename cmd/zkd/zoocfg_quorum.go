package main

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/zkd-io/zkd/consensus"
	"github.com/zkd-io/zkd/internal/tlsconf"
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
func (q *quorumSecurity) apply(cfg *server.Config, log *slog.Logger) error {
	if !q.sslQuorum && !q.portUnification {
		return nil
	}
	if v := q.stores["ssl.quorum.clientAuth"]; v != "" && !strings.EqualFold(v, "need") {
		// Peers must always present a verified certificate; "want" and "none" would accept
		// less, so only "need" (ZooKeeper's default) is taken.
		return keyError("ssl.quorum.clientAuth", v, errors.New("zkd always requires a verified certificate from a peer; only need is supported"))
	}
	set, err := tlsconf.Parse(q.stores, "ssl.quorum.")
	if err != nil {
		return fmt.Errorf("zoo.cfg: %w", err)
	}
	if set.KeyStore.Location == "" || set.TrustStore.Location == "" {
		// Without a trust store Go would trust the system's roots: any publicly issued
		// certificate would make its holder a member.
		return errors.New("zoo.cfg: sslQuorum or portUnification needs ssl.quorum.keyStore.location and ssl.quorum.trustStore.location")
	}
	// Certificates are re-read when their files change whatever sslQuorumReloadCertFiles says
	// (at most once a second, on a handshake): a replaced certificate is never kept in use.
	src, err := tlsconf.New(set, log)
	if err != nil {
		return fmt.Errorf("zoo.cfg: %w", err)
	}
	pt := &consensus.PeerTLS{
		Server:                   src.ServerConfig(),
		ClientFor:                src.ClientConfig,
		AcceptPlaintext:          q.portUnification,
		DialPlaintext:            !q.sslQuorum,
		SkipHostnameVerification: !set.HostnameVerification,
	}
	if err := pt.Validate(); err != nil {
		return fmt.Errorf("zoo.cfg: ssl.quorum.*: %w", err)
	}
	cfg.PeerTLS = pt
	return nil
}
