package tlsconf

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"

	keystore "github.com/pavlo-v-chernykh/keystore-go/v4"
	"software.sslmate.com/src/go-pkcs12"
)

// errNoKey and errNoCerts describe stores that lack what they are for.
var (
	errNoKey   = errors.New("no private key in the store")
	errNoCerts = errors.New("no certificate in the store")
)

// loadKeyStore reads a key store: the private key and its certificate chain, leaf first.
func loadKeyStore(st Store, data []byte) (*tls.Certificate, error) {
	typ, err := storeType(st)
	if err != nil {
		return nil, err
	}
	var (
		key   crypto.PrivateKey
		chain []*x509.Certificate
	)
	switch typ {
	case StorePEM:
		key, chain, err = pemKeyStore(data)
	case StorePKCS12:
		var leaf *x509.Certificate
		var cas []*x509.Certificate
		key, leaf, cas, err = pkcs12.DecodeChain(data, st.Password)
		if err == nil {
			chain = append([]*x509.Certificate{leaf}, cas...)
		}
	case StoreJKS:
		key, chain, err = jksKeyStore(data, st.Password)
	}
	if err != nil {
		return nil, fmt.Errorf("%s store: %w", typ, err)
	}
	return keyPair(key, chain)
}

// keyPair checks that key belongs to the leaf certificate and makes a tls.Certificate.
func keyPair(key crypto.PrivateKey, chain []*x509.Certificate) (*tls.Certificate, error) {
	if key == nil {
		return nil, errNoKey
	}
	if len(chain) == 0 {
		return nil, errNoCerts
	}
	pub, ok := key.(interface{ Public() crypto.PublicKey })
	if !ok {
		return nil, fmt.Errorf("unsupported private key type %T", key)
	}
	if eq, ok := pub.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !eq.Equal(chain[0].PublicKey) {
		// Stores may list the chain in any order: find the certificate of the key.
		i := slices.IndexFunc(chain, func(c *x509.Certificate) bool {
			e, ok := pub.Public().(interface{ Equal(crypto.PublicKey) bool })
			return ok && e.Equal(c.PublicKey)
		})
		if i < 0 {
			return nil, errors.New("the private key does not match any certificate in the store")
		}
		chain[0], chain[i] = chain[i], chain[0]
	}
	switch key.(type) {
	case *rsa.PrivateKey, *ecdsa.PrivateKey, ed25519.PrivateKey:
	default:
		return nil, fmt.Errorf("unsupported private key type %T", key)
	}
	cert := &tls.Certificate{PrivateKey: key, Leaf: chain[0]}
	for _, c := range chain {
		cert.Certificate = append(cert.Certificate, c.Raw)
	}
	return cert, nil
}

// pemKeyStore reads a PEM key store as ZooKeeper's: one private key and the certificate chain
// in one file. Encrypted private keys are not supported (Go's standard library cannot decrypt
// them); a PKCS12 store carries a password-protected key instead.
func pemKeyStore(data []byte) (crypto.PrivateKey, []*x509.Certificate, error) {
	var (
		key   crypto.PrivateKey
		chain []*x509.Certificate
	)
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		switch b.Type {
		case "CERTIFICATE":
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil, nil, fmt.Errorf("certificate: %w", err)
			}
			chain = append(chain, c)
		case "ENCRYPTED PRIVATE KEY":
			return nil, nil, errors.New("encrypted PEM private keys are not supported; use an unencrypted key (protect the file) or a PKCS12 store")
		case "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY":
			if key != nil {
				return nil, nil, errors.New("more than one private key in the store")
			}
			if b.Headers["Proc-Type"] != "" {
				return nil, nil, errors.New("encrypted PEM private keys are not supported; use an unencrypted key (protect the file) or a PKCS12 store")
			}
			k, err := parsePrivateKey(b)
			if err != nil {
				return nil, nil, err
			}
			key = k
		}
	}
	return key, chain, nil
}

func parsePrivateKey(b *pem.Block) (crypto.PrivateKey, error) {
	switch b.Type {
	case "RSA PRIVATE KEY":
		return x509.ParsePKCS1PrivateKey(b.Bytes)
	case "EC PRIVATE KEY":
		return x509.ParseECPrivateKey(b.Bytes)
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("private key: %w", err)
	}
	return k, nil
}

// jksKeyStore reads the first private key entry (by alias) of a Java KeyStore. The key's
// password is the store's, as ZooKeeper assumes.
func jksKeyStore(data []byte, password string) (crypto.PrivateKey, []*x509.Certificate, error) {
	ks := keystore.New()
	if err := ks.Load(bytes.NewReader(data), []byte(password)); err != nil {
		return nil, nil, err
	}
	aliases := ks.Aliases()
	slices.Sort(aliases)
	for _, alias := range aliases {
		if !ks.IsPrivateKeyEntry(alias) {
			continue
		}
		e, err := ks.GetPrivateKeyEntry(alias, []byte(password))
		if err != nil {
			return nil, nil, fmt.Errorf("entry %q: %w", alias, err)
		}
		key, err := x509.ParsePKCS8PrivateKey(e.PrivateKey)
		if err != nil {
			return nil, nil, fmt.Errorf("entry %q: private key: %w", alias, err)
		}
		var chain []*x509.Certificate
		for _, c := range e.CertificateChain {
			cert, err := x509.ParseCertificate(c.Content)
			if err != nil {
				return nil, nil, fmt.Errorf("entry %q: certificate: %w", alias, err)
			}
			chain = append(chain, cert)
		}
		return key, chain, nil
	}
	return nil, nil, errNoKey
}

// loadTrustStore reads a trust store: every certificate in it is a trust anchor.
func loadTrustStore(st Store, data []byte) (*x509.CertPool, error) {
	typ, err := storeType(st)
	if err != nil {
		return nil, err
	}
	var certs []*x509.Certificate
	switch typ {
	case StorePEM:
		for {
			var b *pem.Block
			b, data = pem.Decode(data)
			if b == nil {
				break
			}
			if b.Type != "CERTIFICATE" {
				continue
			}
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil, fmt.Errorf("PEM store: certificate: %w", err)
			}
			certs = append(certs, c)
		}
	case StorePKCS12:
		certs, err = pkcs12.DecodeTrustStore(data, st.Password)
		if err != nil && !errors.Is(err, pkcs12.ErrIncorrectPassword) {
			// Not a Java trust store: a key store used as one (Java trusts its certificates).
			if _, leaf, cas, chainErr := pkcs12.DecodeChain(data, st.Password); chainErr == nil {
				certs, err = append([]*x509.Certificate{leaf}, cas...), nil
			}
		}
	case StoreJKS:
		certs, err = jksTrustStore(data, st.Password)
	}
	if err != nil {
		return nil, fmt.Errorf("%s store: %w", typ, err)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("%s store: %w", typ, errNoCerts)
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

// jksTrustStore returns a Java KeyStore's trusted certificates and, as Java's trust managers
// do, the leaf certificate of each private key entry.
func jksTrustStore(data []byte, password string) ([]*x509.Certificate, error) {
	ks := keystore.New()
	if err := ks.Load(bytes.NewReader(data), []byte(password)); err != nil {
		return nil, err
	}
	aliases := ks.Aliases()
	slices.Sort(aliases)
	var certs []*x509.Certificate
	for _, alias := range aliases {
		var raw []byte
		if ks.IsTrustedCertificateEntry(alias) {
			e, err := ks.GetTrustedCertificateEntry(alias)
			if err != nil {
				return nil, fmt.Errorf("entry %q: %w", alias, err)
			}
			raw = e.Certificate.Content
		} else if chain, err := ks.GetPrivateKeyEntryCertificateChain(alias); err == nil && len(chain) > 0 {
			raw = chain[0].Content
		}
		if raw == nil {
			continue
		}
		c, err := x509.ParseCertificate(raw)
		if err != nil {
			return nil, fmt.Errorf("entry %q: certificate: %w", alias, err)
		}
		certs = append(certs, c)
	}
	return certs, nil
}
