package cli

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"sync/atomic"
	"time"
)

// servingCert is the certificate serve presents: the pair of --tls-cert
// and --tls-key, handed to each handshake by [servingCert.getCertificate]
// so that a reload (SIGHUP) applies from the next handshake on. It is safe
// for concurrent use.
type servingCert struct {
	certFile, keyFile string
	log               *slog.Logger
	cur               atomic.Pointer[loadedCert]
}

// loadedCert is one pair as loaded, and whether its expiry was logged.
type loadedCert struct {
	cert          *tls.Certificate
	notAfter      time.Time
	expiredLogged atomic.Bool
}

// newServingCert loads the pair, refusing one that does not load or is not
// valid at now (exit 2: every client would refuse it).
func newServingCert(certFile, keyFile string, log *slog.Logger, now time.Time) (*servingCert, error) {
	c := &servingCert{certFile: certFile, keyFile: keyFile, log: log}
	lc, err := c.load(now)
	if err != nil {
		return nil, err
	}
	c.cur.Store(lc)
	return c, nil
}

// load reads the pair: it must parse, the key must match the certificate,
// and the certificate must be valid at now.
func (c *servingCert) load(now time.Time) (*loadedCert, error) {
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return nil, usageError("--tls-cert %s with --tls-key %s: %v", c.certFile, c.keyFile, err)
	}
	leaf, err := certificateCurrent(c.certFile, cert, now)
	if err != nil {
		return nil, err
	}
	return &loadedCert{cert: &cert, notAfter: leaf.NotAfter}, nil
}

// getCertificate is the tls.Config's GetCertificate: the pair in force.
// A handshake after it expired logs that (once), as the expiry timer does:
// the timer may not see a wall clock that jumped.
func (c *servingCert) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	lc := c.cur.Load()
	c.logExpired(lc, time.Now())
	return lc.cert, nil
}

// reload loads the pair again (SIGHUP) and reports whether it did; a pair
// that does not load, or is not valid now, is logged and the one in force
// stays.
func (c *servingCert) reload() bool {
	lc, err := c.load(time.Now())
	if err != nil {
		c.log.Error("SIGHUP: the TLS certificate does not load; the one in force stays", "err", err)
		return false
	}
	c.cur.Store(lc)
	c.log.Info("SIGHUP: TLS certificate reloaded", "cert", c.certFile, "not_after", lc.notAfter.UTC().Format(time.RFC3339))
	return true
}

// checkExpiry logs the pair in force when it expired by now, and returns
// how long until it should be checked again (false: not again until a
// reload).
func (c *servingCert) checkExpiry(now time.Time) (time.Duration, bool) {
	lc := c.cur.Load()
	if c.logExpired(lc, now) || lc.expiredLogged.Load() {
		return 0, false
	}
	return c.untilExpiry(now), true
}

// untilExpiry is how long from now until the pair in force has expired (a
// certificate is valid through its NotAfter second), at most a day: a
// certificate valid for centuries (NotAfter 9999-12-31, "no expiry") is
// checked daily, and the second added cannot overflow the Duration that
// Sub saturates at (which made the timer fire at once, in a loop).
func (c *servingCert) untilExpiry(now time.Time) time.Duration {
	return min(c.cur.Load().notAfter.Sub(now), 24*time.Hour) + time.Second
}

// logExpired logs, at error level and once per pair, that lc expired by
// now, and reports whether it did so now.
func (c *servingCert) logExpired(lc *loadedCert, now time.Time) bool {
	if !now.After(lc.notAfter) || !lc.expiredLogged.CompareAndSwap(false, true) {
		return false
	}
	c.log.Error("the TLS certificate in use has expired: clients refuse it; install a renewed pair and send SIGHUP",
		"cert", c.certFile, "not_after", lc.notAfter.UTC().Format(time.RFC3339))
	return true
}

// certificateCurrent returns the leaf of a certificate (of file path),
// refusing one that expired or is not valid yet at now: every client would
// refuse it.
func certificateCurrent(path string, cert tls.Certificate, now time.Time) (*x509.Certificate, error) {
	leaf := cert.Leaf
	if leaf == nil {
		var err error
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, usageError("--tls-cert %s: %v", path, err)
		}
	}
	switch {
	case now.After(leaf.NotAfter):
		return nil, usageError("--tls-cert %s: the certificate expired at %s (NotAfter): give a renewed one",
			path, leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(leaf.NotBefore):
		return nil, usageError("--tls-cert %s: the certificate is not valid before %s (NotBefore): give one valid now, or check this machine's clock",
			path, leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	return leaf, nil
}
