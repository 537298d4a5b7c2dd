package main

// serve's certificate over its life: SIGHUP loads a rotated pair (or keeps
// the one in force when the new pair does not load), and a certificate
// that expires while serve runs is logged. Real TLS handshakes against a
// real serve process.

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/testca"
)

// presented makes one TLS handshake with s and returns the certificate it
// presented. pool nil: the certificate is not verified (an expired one).
func (s *server) presented(t *testing.T, pool *x509.CertPool) *x509.Certificate {
	t.Helper()
	u, err := url.Parse(s.url)
	if err != nil {
		t.Fatal(err)
	}
	conf := &tls.Config{RootCAs: pool, InsecureSkipVerify: pool == nil} //nolint:gosec // only to read an expired certificate
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Minute}, "tcp", u.Host, conf)
	if err != nil {
		t.Fatalf("TLS handshake with %s: %v\nstderr: %s", u.Host, err, s.stderr)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

// hup sends SIGHUP and waits until serve logged the tokens reload that
// ends its handling of it (the count-th such line): the certificate is
// reloaded before the tokens.
func (s *server) hup(t *testing.T, count int) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	s.awaitLog(t, "tokens reloaded", count)
}

// awaitLog waits until serve's log holds line at least count times.
func (s *server) awaitLog(t *testing.T, line string, count int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for strings.Count(s.stderr.String(), line) < count {
		if time.Now().After(deadline) {
			t.Fatalf("no %q (%d times) in serve's log within a minute: %s", line, count, s.stderr)
		}
		time.Sleep(10 * time.Millisecond) // the log line is the signal; poll for it
	}
}

// logLines returns the lines of serve's log that hold every one of parts.
func (s *server) logLines(parts ...string) []string {
	var out []string
	for line := range strings.Lines(s.stderr.String()) {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			out = append(out, line)
		}
	}
	return out
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// serial returns the serial number of the certificate in a PEM file.
func serial(t *testing.T, path string) *big.Int {
	t.Helper()
	return parsePEM(t, path).SerialNumber
}

func parsePEM(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(readFile(t, path))
	if block == nil {
		t.Fatalf("%s: no PEM", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestServeReloadsCertificateOnSIGHUP: a certificate rotated in place (as
// cert-manager or certbot do) is presented after SIGHUP, without a
// restart; a pair that does not load (the certificate renewed but the key
// not yet, or a certificate half written) keeps the pair in force and is
// logged, naming the file. serve read the pair once, at start, and
// presented it until restarted.
func TestServeReloadsCertificateOnSIGHUP(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testca.New(t, "rotate")
	certFile, keyFile := ca.Server(t)
	s := startServe(t, dir, "sqlite:"+filepath.Join(dir, "rotate.db"), nil,
		"--tls-cert", certFile, "--tls-key", keyFile, "--tokens", writeTokens(t, dir, e2eTokens))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(readFile(t, ca.CertFile))
	first := serial(t, certFile)
	if got := s.presented(t, pool).SerialNumber; got.Cmp(first) != 0 {
		t.Fatalf("serve presents serial %v, want %v (the file's)", got, first)
	}

	// Rotated in place: both files replaced, then SIGHUP.
	ca.Server(t)
	second := serial(t, certFile)
	secondKey := readFile(t, keyFile)
	s.hup(t, 1)
	if got := s.presented(t, pool).SerialNumber; got.Cmp(second) != 0 {
		t.Fatalf("after rotating the certificate in place and SIGHUP, serve presents serial %v, want %v (the new one)", got, second)
	}
	if len(s.logLines("TLS certificate reloaded", certFile)) != 1 {
		t.Fatalf("no log line of the reload naming %s:\n%s", certFile, s.stderr)
	}

	// Half rotated: the new certificate with the old key.
	ca.Server(t)
	third, thirdCert, thirdKey := serial(t, certFile), readFile(t, certFile), readFile(t, keyFile)
	writeFile(t, keyFile, secondKey)
	s.hup(t, 2)
	if got := s.presented(t, pool).SerialNumber; got.Cmp(second) != 0 {
		t.Fatalf("a certificate with the old key: serve presents serial %v, want %v (the pair in force)", got, second)
	}
	if n := len(s.logLines("ERR", "does not load", certFile)); n != 1 {
		t.Fatalf("a certificate with the old key: %d error lines naming %s, want 1:\n%s", n, certFile, s.stderr)
	}

	// Half written: the new key, and half of the new certificate.
	writeFile(t, keyFile, thirdKey)
	writeFile(t, certFile, thirdCert[:len(thirdCert)/2])
	s.hup(t, 3)
	if got := s.presented(t, pool).SerialNumber; got.Cmp(second) != 0 {
		t.Fatalf("a half-written certificate: serve presents serial %v, want %v (the pair in force)", got, second)
	}
	if n := len(s.logLines("ERR", "does not load", certFile)); n != 2 {
		t.Fatalf("a half-written certificate: %d error lines naming %s, want 2:\n%s", n, certFile, s.stderr)
	}

	// Written out: the new pair is presented.
	writeFile(t, certFile, thirdCert)
	s.hup(t, 4)
	if got := s.presented(t, pool).SerialNumber; got.Cmp(third) != 0 {
		t.Fatalf("the new pair written out: serve presents serial %v, want %v", got, third)
	}
}

// TestServeLogsExpiredCertificate: a certificate that expires while serve
// runs is logged at error level, once, naming the file and its NotAfter;
// clients failed TLS with nothing in serve's log. A reload of the same
// expired pair is refused (and logged as a reload that does not load), so
// the line of the certificate in use still shows once.
func TestServeLogsExpiredCertificate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	now := time.Now()
	// Valid at start (serve refuses an expired one), expiring soon after:
	// the test waits for the log line, not for a time.
	certFile, keyFile := testca.New(t, "expiring").ServerValid(t, now.Add(-time.Hour), now.Add(3*time.Second))
	notAfter := parsePEM(t, certFile).NotAfter.UTC().Format(time.RFC3339)
	s := startServe(t, dir, "sqlite:"+filepath.Join(dir, "expiring.db"), nil,
		"--tls-cert", certFile, "--tls-key", keyFile, "--tokens", writeTokens(t, dir, e2eTokens))
	const expired = "TLS certificate in use has expired"
	s.awaitLog(t, expired, 1)
	if lines := s.logLines("ERR", expired, certFile, notAfter); len(lines) != 1 {
		t.Fatalf("want one error line naming %s and %s:\n%s", certFile, notAfter, s.stderr)
	}
	s.presented(t, nil)
	s.presented(t, nil)
	s.hup(t, 1)
	if n := strings.Count(s.stderr.String(), expired); n != 1 {
		t.Fatalf("%q logged %d times after two handshakes and a reload, want once:\n%s", expired, n, s.stderr)
	}
	if len(s.logLines("ERR", "does not load", certFile, "expired")) != 1 {
		t.Fatalf("the reload of the expired pair: no error line naming %s:\n%s", certFile, s.stderr)
	}
}
