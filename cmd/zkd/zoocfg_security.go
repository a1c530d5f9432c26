package main

import (
	"fmt"
	"strings"
)

// zkd fails closed on security settings: a zoo.cfg copied from a secured ZooKeeper must never
// start a server that is less secure than the file asks for. Every ZooKeeper security key is
// listed below. A key zkd implements is parsed like any other; one it does not implement stops
// startup with a message naming it, unless its value only turns the feature off. A key under a
// security prefix (ssl., ssl.quorum., quorum.auth., authProvider., ...) that is not listed at all
// stops startup too, so a setting ZooKeeper adds later is refused rather than ignored.
//
// Keys are written without the optional "zookeeper." prefix, which parseZooCfg strips.

// securityKeys maps each known security key to whether zkd implements it.
var securityKeys = func() map[string]bool {
	m := map[string]bool{
		// Client TLS.
		"secureClientPort":        true,
		"secureClientPortAddress": true,
		"client.portUnification":  true,
		"client.certReload":       true,

		// Server-to-server TLS.
		"sslQuorum":                true,
		"portUnification":          true,
		"sslQuorumReloadCertFiles": true,

		// Authentication and authorisation.
		"DigestAuthenticationProvider.superDigest": true,
		"DigestAuthenticationProvider.digestAlg":   false,
		"DigestAuthenticationProvider.enabled":     false,
		"X509AuthenticationProvider.superUser":     true,
		"superUser":                                true,
		"ensembleAuthName":                         false,
		"sessionRequireClientSASLAuth":             true,
		"requireClientAuthScheme":                  false,
		"enforce.auth.enabled":                     true,
		"enforce.auth.schemes":                     true,
		"allowSaslFailedClients":                   false,
		"letAnySaslUserDoX":                        false,
		"sasl.serverconfig":                        true,
		"java.security.auth.login.config":          true,
		"kerberos.removeHostFromPrincipal":         true,
		"kerberos.removeRealmFromPrincipal":        true,
		"kerberos.canonicalizeHostNames":           false,

		// Server-to-server SASL: true stops startup (zkd authenticates members by mutual
		// TLS); the rest only matter with it on (cmd/zkd/zoocfg_quorum.go).
		"quorum.auth.enableSasl":                     true,
		"quorum.auth.learnerRequireSasl":             true,
		"quorum.auth.serverRequireSasl":              true,
		"quorum.auth.learner.saslLoginContext":       true,
		"quorum.auth.server.saslLoginContext":        true,
		"quorum.auth.kerberos.servicePrincipal":      true,
		"quorum.auth.kerberos.canonicalizeHostNames": true,

		// The AdminServer over HTTPS.
		"admin.forceHttps":      false,
		"admin.needClientAuth":  false,
		"admin.portUnification": false,
	}
	// The client port's ssl.* keys (cmd/zkd/zoocfg_tls.go, internal/tlsconf). crl, ocsp and
	// context.supplier.class stay unimplemented: zkd checks no revocation and loads no classes.
	for _, s := range []string{
		"keyStore.location", "keyStore.password", "keyStore.passwordPath", "keyStore.type",
		"trustStore.location", "trustStore.password", "trustStore.passwordPath", "trustStore.type",
		"protocol", "enabledProtocols", "ciphersuites", "hostnameVerification",
		"clientHostnameVerification", "clientAuth", "handshakeDetectionTimeoutMillis", "sslProvider",
		"authProvider",
	} {
		m["ssl."+s] = true
		// The peer port's (cmd/zkd/zoocfg_quorum.go, the same loader): parsed when sslQuorum or
		// portUnification is on, which is the only time they take effect.
		m["ssl.quorum."+s] = true
	}
	for _, s := range sslSuffixes {
		for _, p := range []string{"ssl.", "ssl.quorum."} {
			if _, ok := m[p+s]; !ok {
				m[p+s] = false
			}
		}
	}
	return m
}()

// sslSuffixes are the keys ZooKeeper reads under both ssl. (client port) and ssl.quorum.
// (server to server); each is listed in securityKeys under both prefixes.
var sslSuffixes = []string{
	"keyStore.location", "keyStore.password", "keyStore.passwordPath", "keyStore.type",
	"trustStore.location", "trustStore.password", "trustStore.passwordPath", "trustStore.type",
	"protocol", "enabledProtocols", "ciphersuites", "context.supplier.class",
	"hostnameVerification", "clientHostnameVerification", "crl", "ocsp", "clientAuth",
	"handshakeDetectionTimeoutMillis", "sslProvider", "authProvider",
}

// securityPrefixes mark key families that are security settings as a whole: a key under one of
// them that securityKeys does not list is refused.
var securityPrefixes = []string{"ssl.", "quorum.auth.", "authProvider.", "kerberos.", "enforce.auth.", "sasl."}

// implementedPrefixes are key families zkd parses as a whole (authProvider.N: each provider
// named is checked where it is parsed, and an unknown one stops startup there).
var implementedPrefixes = []string{"authProvider."}

// offValues are values that ask for no security feature at all. A key zkd does not implement is
// accepted with one of these (sslQuorum=false is what ZooKeeper does by default anyway).
// A key that names a file, a password or a provider has no off value except the empty one.
var offValues = map[string]bool{"": true, "false": true, "no": true}

// isSecurityKey reports whether k (without the zookeeper. prefix) is a security setting.
func isSecurityKey(k string) bool {
	if _, ok := securityKeys[k]; ok {
		return true
	}
	for _, p := range securityPrefixes {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

// refuseUnimplementedSecurity returns an error for a security key zkd does not implement whose
// value asks for something. key is the key as written, k without the zookeeper. prefix.
func refuseUnimplementedSecurity(key, k, v string) error {
	if !isSecurityKey(k) || securityKeys[k] {
		return nil
	}
	for _, p := range implementedPrefixes {
		if strings.HasPrefix(k, p) {
			return nil
		}
	}
	if offValues[strings.ToLower(strings.TrimSpace(v))] {
		return nil
	}
	return fmt.Errorf("zoo.cfg: %s: zkd does not implement this security setting; refusing to start less secure than configured (see docs/security.md)", key)
}
