// Package tlstest makes certificate authorities and certificates for tests, and writes them as
// the key and trust stores ZooKeeper reads: PEM, PKCS12 and JKS. It is test machinery; no
// production file imports it.
package tlstest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"testing"
	"time"

	keystore "github.com/pavlo-v-chernykh/keystore-go/v4"
	"software.sslmate.com/src/go-pkcs12"
)

// CA is a certificate authority that issues test certificates.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

// Leaf is an issued certificate with its key.
type Leaf struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	CA   *CA
}

// Options describe a certificate to issue.
type Options struct {
	// Subject is the certificate's subject; RawSubject, when set, replaces it (for names
	// pkix.Name cannot express, such as multi-valued RDNs).
	Subject    pkix.Name
	RawSubject []byte
	// DNSNames and IPs are the subject alternative names.
	DNSNames []string
	IPs      []net.IP
	// NotBefore and NotAfter bound its validity. Zero means an hour ago and a day from now.
	NotBefore, NotAfter time.Time
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func nextSerial() *big.Int {
	b, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	return b.Add(b, big.NewInt(1))
}

// NewCA makes a self-signed certificate authority named cn.
func NewCA(t testing.TB, cn string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          nextSerial(),
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"zkd tests"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, Key: key}
}

// Issue issues a certificate for both server and client use.
func (ca *CA) Issue(t testing.TB, o Options) *Leaf {
	t.Helper()
	key := newKey(t)
	if o.NotBefore.IsZero() {
		o.NotBefore = time.Now().Add(-time.Hour)
	}
	if o.NotAfter.IsZero() {
		o.NotAfter = time.Now().Add(24 * time.Hour)
	}
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(),
		Subject:      o.Subject,
		RawSubject:   o.RawSubject,
		DNSNames:     o.DNSNames,
		IPAddresses:  o.IPs,
		NotBefore:    o.NotBefore,
		NotAfter:     o.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &Leaf{Cert: cert, Key: key, CA: ca}
}

// Localhost are the options of a server certificate for localhost and 127.0.0.1.
func Localhost(cn string) Options {
	return Options{Subject: pkix.Name{CommonName: cn}, DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}}
}

func write(t testing.TB, path string, data []byte) {
	t.Helper()
	// Written aside and renamed, so a server reloading the file never reads half of it.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// CertPEM is the certificate in PEM.
func (l *Leaf) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: l.Cert.Raw})
}

// KeyPEM is the private key in unencrypted PKCS#8 PEM, the form ZooKeeper's PEM stores take.
func (l *Leaf) KeyPEM(t testing.TB) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(l.Key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// WritePEM writes a PEM key store: the key, the certificate and the CA's certificate.
func (l *Leaf) WritePEM(t testing.TB, path string) {
	t.Helper()
	var b bytes.Buffer
	b.Write(l.KeyPEM(t))
	b.Write(l.CertPEM())
	b.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: l.CA.Cert.Raw}))
	write(t, path, b.Bytes())
}

// WriteCertAndKey writes the certificate and the key as two PEM files (kazoo's certfile and
// keyfile).
func (l *Leaf) WriteCertAndKey(t testing.TB, certPath, keyPath string) {
	t.Helper()
	write(t, certPath, l.CertPEM())
	write(t, keyPath, l.KeyPEM(t))
}

// WritePKCS12 writes a PKCS12 key store protected by password.
func (l *Leaf) WritePKCS12(t testing.TB, path, password string) {
	t.Helper()
	data, err := pkcs12.Modern2023.Encode(l.Key, l.Cert, []*x509.Certificate{l.CA.Cert}, password)
	if err != nil {
		t.Fatal(err)
	}
	write(t, path, data)
}

// WriteJKS writes a Java KeyStore holding the key under the alias "key", protected by password
// (the key too).
func (l *Leaf) WriteJKS(t testing.TB, path, password string) {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(l.Key)
	if err != nil {
		t.Fatal(err)
	}
	ks := keystore.New()
	entry := keystore.PrivateKeyEntry{
		CreationTime: time.Now(),
		PrivateKey:   der,
		CertificateChain: []keystore.Certificate{
			{Type: "X509", Content: l.Cert.Raw}, {Type: "X509", Content: l.CA.Cert.Raw},
		},
	}
	if err := ks.SetPrivateKeyEntry("key", entry, []byte(password)); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := ks.Store(&b, []byte(password)); err != nil {
		t.Fatal(err)
	}
	write(t, path, b.Bytes())
}

// WritePEM writes the CA's certificate as a PEM trust store.
func (ca *CA) WritePEM(t testing.TB, path string) {
	t.Helper()
	write(t, path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw}))
}

// WritePKCS12 writes the CA's certificate as a Java-style PKCS12 trust store.
func (ca *CA) WritePKCS12(t testing.TB, path, password string) {
	t.Helper()
	data, err := pkcs12.Modern2023.EncodeTrustStore([]*x509.Certificate{ca.Cert}, password)
	if err != nil {
		t.Fatal(err)
	}
	write(t, path, data)
}

// WriteJKS writes the CA's certificate as a JKS trust store.
func (ca *CA) WriteJKS(t testing.TB, path, password string) {
	t.Helper()
	ks := keystore.New()
	if err := ks.SetTrustedCertificateEntry("ca", keystore.TrustedCertificateEntry{
		CreationTime: time.Now(), Certificate: keystore.Certificate{Type: "X509", Content: ca.Cert.Raw},
	}); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := ks.Store(&b, []byte(password)); err != nil {
		t.Fatal(err)
	}
	write(t, path, b.Bytes())
}
