package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// loadTLS builds c.TLS from the -tls-* flags; with no -tls-ca the run is plaintext.
func (c *config) loadTLS() error {
	if c.tlsCA == "" {
		if c.tlsCert != "" || c.tlsKey != "" {
			return errors.New("zkbench: -tls-cert and -tls-key need -tls-ca")
		}
		return nil
	}
	pem, err := os.ReadFile(c.tlsCA)
	if err != nil {
		return fmt.Errorf("zkbench: -tls-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("zkbench: -tls-ca %s: no PEM certificate", c.tlsCA)
	}
	tc := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if c.tlsCert != "" || c.tlsKey != "" {
		cert, err := tls.LoadX509KeyPair(c.tlsCert, c.tlsKey)
		if err != nil {
			return fmt.Errorf("zkbench: -tls-cert/-tls-key: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	c.TLS, c.TLSOn = tc, true
	return nil
}
