package httpapi_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/protocol"
)

// A refused certificate is refused again on every attempt: a client that
// may retry more often than its deadline allows must still say that the
// certificate is not trusted (unavailable, naming SSL_CERT_FILE), as
// docs/http-api.md promises, not that the server did not answer before the
// deadline (timeout). The server answered each handshake, with a
// certificate the client refused.
func TestClientWithManyAttemptsNamesTheFixForAnUntrustedCertificate(t *testing.T) {
	t.Parallel()
	s := newTLSServer(t)
	store := newClient(t, s.url, &httpapi.ClientConfig{MaxAttempts: 50})
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	_, err := store.Acquire(ctx, protocol.AcquireRequest{Key: protocol.Key{Namespace: "billing", Name: "invoice-run"},
		Owner: "worker-1", TTL: time.Hour})
	if protocol.StatusOf(err) != protocol.StatusUnavailable || !strings.Contains(err.Error(), "not trusted") ||
		!strings.Contains(err.Error(), "SSL_CERT_FILE") {
		t.Fatalf("acquire with the CA not trusted and 50 attempts: %v; want unavailable, the certificate not trusted, naming SSL_CERT_FILE", err)
	}
}
