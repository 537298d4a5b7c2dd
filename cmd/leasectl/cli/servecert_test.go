package cli

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/testca"
)

// TestServingCertWithoutExpiryIsNotCheckedAtOnce shows that a certificate
// with no well-defined expiry (NotAfter 9999-12-31T23:59:59Z, as RFC 5280
// 4.1.2.5 gives it and many internal CAs issue it) is checked again at
// once, over and over: untilExpiry is NotAfter.Sub(now) plus a second, and
// Sub saturates at the greatest Duration (about 292 years), so the second
// overflows it to a negative one. serve's expiry timer is reset to it
// after every check, so serve's main loop spins on a core for as long as
// it serves.
func TestServingCertWithoutExpiryIsNotCheckedAtOnce(t *testing.T) {
	t.Parallel()
	ca := testca.New(t, "rev105")
	notAfter := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	certFile, keyFile := ca.ServerValid(t, time.Now().Add(-time.Hour), notAfter)
	now := time.Now()
	c, err := newServingCert(certFile, keyFile, slog.New(slog.NewTextHandler(io.Discard, nil)), now)
	if err != nil {
		t.Fatal(err)
	}
	if d := c.untilExpiry(now); d <= 0 {
		t.Errorf("untilExpiry of a certificate valid until %s = %v: serve's expiry timer fires at once", notAfter.Format(time.RFC3339), d)
	}
	if d, again := c.checkExpiry(now); again && d <= 0 {
		t.Errorf("checkExpiry of a certificate valid until %s asks to check again in %v: serve checks it in a loop", notAfter.Format(time.RFC3339), d)
	}
}
