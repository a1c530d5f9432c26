package zktest

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/zkd-io/zkd/internal/testkit/tlstest"
)

// CA is a certificate authority made for one test (internal/testkit/tlstest's, in the shape the
// cluster TLS tests use).
type CA struct {
	Cert *x509.Certificate
	ca   *tlstest.CA
}

// NewCA makes a CA named name, valid from an hour ago for a day.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	ca := tlstest.NewCA(t, name)
	return &CA{Cert: ca.Cert, ca: ca}
}

// Pool returns a pool holding only the CA's certificate.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// PEM returns the CA's certificate in PEM.
func (ca *CA) PEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// CertSpec says what a certificate issued by Issue holds. Zero NotBefore/NotAfter mean from an
// hour ago for a day.
type CertSpec struct {
	CommonName string
	IPs        []net.IP
	DNSNames   []string
	NotBefore  time.Time
	NotAfter   time.Time
}

// Cert is an issued certificate with its key.
type Cert struct {
	TLS     tls.Certificate
	CertPEM []byte
	KeyPEM  []byte
}

// Issue issues a certificate for both TLS server and client use (a quorum member is both).
func (ca *CA) Issue(t testing.TB, spec CertSpec) Cert {
	t.Helper()
	leaf := ca.ca.Issue(t, tlstest.Options{
		Subject: pkix.Name{CommonName: spec.CommonName}, IPs: spec.IPs, DNSNames: spec.DNSNames,
		NotBefore: spec.NotBefore, NotAfter: spec.NotAfter,
	})
	certPEM, keyPEM := leaf.CertPEM(), leaf.KeyPEM(t)
	tc, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return Cert{TLS: tc, CertPEM: certPEM, KeyPEM: keyPEM}
}

// WriteFiles writes the certificate and key as PEM files in dir, named base.crt and base.key,
// and returns their paths.
func (c Cert) WriteFiles(t testing.TB, dir, base string) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, base+".crt"), filepath.Join(dir, base+".key")
	if err := os.WriteFile(certFile, c.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, c.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// LoopbackIPs returns 127.0.0.1 alone, the IP SAN of a member in loopback cluster tests.
func LoopbackIPs() []net.IP { return []net.IP{net.IPv4(127, 0, 0, 1)} }
