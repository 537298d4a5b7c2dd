package etcd

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
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
