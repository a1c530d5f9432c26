package tlsconf

import (
	"crypto/tls"
	"fmt"
	"strings"
)

// CipherSuites maps a comma-separated list of Java cipher suite names (ZooKeeper's
// ssl.ciphersuites) onto Go's ids. Java and Go both use the IANA names. TLS 1.3 suites are
// accepted and left out (Go enables all of them and lets no one choose), as is Java's
// TLS_EMPTY_RENEGOTIATION_INFO_SCSV signalling value. A name Go's TLS does not implement is an
// error, as an unknown name is in Java, so that a server never runs with other ciphers than
// configured. An empty list means nil: Go's defaults.
func CipherSuites(list string) ([]uint16, error) {
	byName := make(map[string]uint16)
	for _, cs := range tls.CipherSuites() {
		byName[cs.Name] = cs.ID
	}
	for _, cs := range tls.InsecureCipherSuites() {
		byName[cs.Name] = cs.ID
	}
	var ids []uint16
	named := false
	for name := range strings.SplitSeq(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		named = true
		id, ok := byName[name]
		switch {
		case ok && tls13Suite(id):
			continue
		case ok:
			ids = append(ids, id)
		case name == "TLS_EMPTY_RENEGOTIATION_INFO_SCSV":
			continue
		default:
			return nil, fmt.Errorf("cipher suite %s is unknown to Go's TLS (Go implements %s)", name, goSuiteNames())
		}
	}
	if named && len(ids) == 0 {
		// Only TLS 1.3 suites: TLS 1.2 connections would have none. Keep Go's TLS 1.2 defaults
		// out too, so a TLS 1.2 handshake fails rather than using ciphers nobody chose.
		return []uint16{}, nil
	}
	return ids, nil
}

func tls13Suite(id uint16) bool {
	switch id {
	case tls.TLS_AES_128_GCM_SHA256, tls.TLS_AES_256_GCM_SHA384, tls.TLS_CHACHA20_POLY1305_SHA256:
		return true
	}
	return false
}

func goSuiteNames() string {
	var names []string
	for _, cs := range tls.CipherSuites() {
		names = append(names, cs.Name)
	}
	return strings.Join(names, ", ")
}
