// Package testca makes throwaway certificate authorities for tests of TLS
// paths: a CA that signs a server certificate for 127.0.0.1 and a client
// certificate, written as PEM files in a test's temporary directory. Test
// scaffolding only (internal/boundary keeps it out of the product).
package testca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority whose key lives in memory for the test.
// CertFile is its certificate (PEM), what clients and servers trust.
type CA struct {
	Name     string
	CertFile string
	cert     *x509.Certificate
	key      *ecdsa.PrivateKey
	dir      string
	serial   int64
}

// New makes a CA named name and writes its certificate into t.TempDir().
// It is not safe for concurrent use.
func New(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{Name: name, cert: cert, key: key, dir: t.TempDir(), serial: 1}
	ca.CertFile = ca.write(t, name+"-ca.pem", "CERTIFICATE", der)
	return ca
}

// Server issues a server certificate for 127.0.0.1 and localhost and
// returns its certificate and key files.
func (ca *CA) Server(t testing.TB) (certFile, keyFile string) {
	t.Helper()
	return ca.issue(t, "server", x509.ExtKeyUsageServerAuth,
		func(c *x509.Certificate) {
			c.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
			c.DNSNames = []string{"localhost"}
		})
}

// ServerValid issues a server certificate as Server does, valid from
// notBefore to notAfter (in the past, say, for an expired one).
func (ca *CA) ServerValid(t testing.TB, notBefore, notAfter time.Time) (certFile, keyFile string) {
	t.Helper()
	return ca.issue(t, "server", x509.ExtKeyUsageServerAuth,
		func(c *x509.Certificate) {
			c.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
			c.DNSNames = []string{"localhost"}
			c.NotBefore, c.NotAfter = notBefore, notAfter
		})
}

// Client issues a client certificate with common name cn and returns its
// certificate and key files.
func (ca *CA) Client(t testing.TB, cn string) (certFile, keyFile string) {
	t.Helper()
	return ca.issue(t, cn, x509.ExtKeyUsageClientAuth, func(*x509.Certificate) {})
}

func (ca *CA) issue(t testing.TB, cn string, usage x509.ExtKeyUsage, adjust func(*x509.Certificate)) (string, string) {
	key := newKey(t)
	ca.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	adjust(tmpl)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	base := ca.Name + "-" + cn
	return ca.write(t, base+".pem", "CERTIFICATE", der), ca.write(t, base+"-key.pem", "EC PRIVATE KEY", kder)
}

func (ca *CA) write(t testing.TB, name, kind string, der []byte) string {
	p := filepath.Join(ca.dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}
