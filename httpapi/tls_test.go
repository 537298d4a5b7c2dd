package httpapi_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/internal/testkit/testca"
	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// tlsServer is a store served over HTTPS, HTTP/2 offered, on a loopback
// port, with a certificate for 127.0.0.1 that a private CA signed.
type tlsServer struct {
	url    string
	caFile string       // the CA's certificate (PEM)
	http2  atomic.Int64 // requests that came over HTTP/2
	hellos atomic.Int64 // TLS handshakes clients began
}

func newTLSServer(t *testing.T) *tlsServer {
	t.Helper()
	ca := testca.New(t, "private")
	certFile, keyFile := ca.Server(t)
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	rt := protocol.New(memstore.New(nil), nil)
	h, err := httpapi.NewHandler(rt, nil, &httpapi.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	s := &tlsServer{caFile: ca.CertFile}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 2 {
			s.http2.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes a test refuses
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		s.hellos.Add(1)
		return nil, nil // the server's own
	}}
	srv.StartTLS()
	s.url = srv.URL
	t.Cleanup(func() {
		h.CloseStreams()
		srv.Close()
		_ = rt.Close(context.Background())
	})
	return s
}

// privateCAClient is what docs/http-api.md tells a Go program to do for a
// server whose certificate a private CA signed: a clone of
// http.DefaultTransport (HTTP/2 kept) whose RootCAs hold the CA, given as
// ClientConfig.HTTPClient.
func privateCAClient(t *testing.T, caFile string) *http.Client {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("%s holds no certificate", caFile)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// A server whose certificate a private CA signed is reached through
// ClientConfig.HTTPClient with that CA among its RootCAs: the operations
// and the notify stream go over HTTP/2, as with the client's own transport.
func TestClientTrustsAPrivateCAThroughItsHTTPClient(t *testing.T) {
	t.Parallel()
	s := newTLSServer(t)
	c, err := httpapi.NewClient(s.url, &httpapi.ClientConfig{HTTPClient: privateCAClient(t, s.caFile)})
	if err != nil {
		t.Fatal(err)
	}
	store := protocol.New(c, nil)
	defer store.Close(context.Background())

	key := protocol.Key{Namespace: "billing", Name: "invoice-run"}
	res, err := store.Acquire(t.Context(), protocol.AcquireRequest{Key: key, Owner: "worker-1", TTL: time.Hour})
	if err != nil {
		t.Fatalf("acquire over https with the private CA trusted: %v", err)
	}
	ch, cancel, err := c.Subscribe(t.Context(), key)
	if err != nil {
		t.Fatalf("subscribe over https with the private CA trusted: %v", err)
	}
	defer cancel()
	if _, err := store.Release(t.Context(), protocol.ReleaseRequest{Key: key, Owner: "worker-1", Token: res.Lease.Token}); err != nil {
		t.Fatal(err)
	}
	signalled(t, ch, "the release")
	if s.http2.Load() == 0 {
		t.Error("no request came over HTTP/2")
	}
}

// A client that does not trust the server's CA fails unavailable, saying
// the server's certificate is not trusted and naming the ways to trust
// its CA, rather than that the server could not be reached.
func TestClientNamesTheFixForAnUntrustedCertificate(t *testing.T) {
	t.Parallel()
	s := newTLSServer(t)
	store := newClient(t, s.url, nil)
	_, err := store.Acquire(t.Context(), protocol.AcquireRequest{Key: protocol.Key{Namespace: "billing", Name: "invoice-run"},
		Owner: "worker-1", TTL: time.Hour})
	if protocol.StatusOf(err) != protocol.StatusUnavailable {
		t.Fatalf("acquire with the CA not trusted: %v, want unavailable", err)
	}
	for _, want := range []string{"not trusted", "SSL_CERT_FILE", "ClientConfig.HTTPClient"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
}

// A certificate the client refuses is refused again on every retry: the
// operation fails after one handshake, not after MaxAttempts handshakes
// and their pauses.
func TestClientDoesNotRetryAnUntrustedCertificate(t *testing.T) {
	t.Parallel()
	s := newTLSServer(t)
	store := newClient(t, s.url, &httpapi.ClientConfig{MaxAttempts: 5})
	_, err := store.Acquire(t.Context(), protocol.AcquireRequest{Key: protocol.Key{Namespace: "billing", Name: "invoice-run"},
		Owner: "worker-1", TTL: time.Hour})
	if protocol.StatusOf(err) != protocol.StatusUnavailable {
		t.Fatalf("acquire with the CA not trusted: %v, want unavailable", err)
	}
	if n := s.hellos.Load(); n != 1 {
		t.Errorf("the client began %d TLS handshakes for one acquire whose server certificate it refused; want 1 (a refusal does not change on a retry)", n)
	}
}
