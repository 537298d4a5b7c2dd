package etcd

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// TestSpeaksPlainHTTP: the probe behind "the member speaks plain text"
// says yes to a plain HTTP server only: a TLS server answers plain HTTP
// with "400 ... HTTPS server", which once passed for plain text.
func TestSpeaksPlainHTTP(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("{}")) })
	plain := httptest.NewServer(ok)
	defer plain.Close()
	secure := httptest.NewUnstartedServer(ok)
	secure.Config.ErrorLog = log.New(io.Discard, "", 0) // the probe's request is refused, as expected
	secure.StartTLS()
	defer secure.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if !speaksPlainHTTP(ctx, strings.TrimPrefix(plain.URL, "http://")) {
		t.Error("a plain HTTP server: want true")
	}
	if speaksPlainHTTP(ctx, strings.TrimPrefix(secure.URL, "https://")) {
		t.Error("a TLS server: want false")
	}
	closed := httptest.NewServer(ok)
	addr := strings.TrimPrefix(closed.URL, "http://")
	closed.Close()
	if speaksPlainHTTP(ctx, addr) {
		t.Error("nothing listening: want false")
	}
}

// TestFirstContactKeepsCallerDeadline: a caller's deadline that ends
// while errFirstContact probes the endpoints wins: it returns by then, as
// timeout. The server completes the TLS handshake and stays silent; the
// probe used to wait 500 ms for its first word whatever the caller's
// deadline, and to report unavailable.
func TestFirstContactKeepsCallerDeadline(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	cfg := &Config{Endpoints: []string{srv.URL}, Prefix: "/p",
		TLS: srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := errFirstContact(ctx, cfg, 3*time.Second, context.DeadlineExceeded)
	took := time.Since(start)
	t.Log(err)
	if !errors.Is(err, protocol.ErrTimeout) {
		t.Errorf("got %v, want timeout", err)
	}
	if took > 400*time.Millisecond {
		t.Errorf("took %v with a caller's deadline of 100ms", took)
	}
}
