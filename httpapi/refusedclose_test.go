package httpapi_test

import (
	"testing"
	"time"

	"github.com/leasestore/leasestore/httpapi"
)

// TestRefusedBeforeTheBodyClosesAtOnce: a request refused before its body
// is read (401, 403, 404) is answered at once and its HTTP/1 connection
// closed, "instead of the server reading the rest of the body"
// (docs/http-api.md, Hostile clients and limits). A body under 256 KiB
// that never comes is what Go's server reads after the handler returns,
// until the body timeout: the answer came at once, but the connection, and
// the server's goroutine reading it, stayed for the whole body timeout.
func TestRefusedBeforeTheBodyClosesAtOnce(t *testing.T) {
	t.Parallel()
	toks := mustTokens(t)
	s := newServer(t, &httpapi.Config{Tokens: func() *httpapi.Tokens { return toks }, BodyTimeout: 6 * time.Second})
	for _, c := range []struct{ what, head string }{
		{"no token", "POST /v1/acquire HTTP/1.1\r\nHost: leasestore\r\nContent-Length: 1000\r\n\r\n"},
		{"a reader's token on a writer's route", "POST /v1/acquire HTTP/1.1\r\nHost: leasestore\r\nContent-Length: 1000\r\n" +
			"Authorization: Bearer " + readerToken + "\r\n\r\n"},
		{"no such route", "POST /v1/nothing HTTP/1.1\r\nHost: leasestore\r\nContent-Length: 1000\r\n\r\n"},
	} {
		status, took := rawExchange(t, s.url, c.head, 0, 0, 20*time.Second)
		if took > 2*time.Second {
			t.Errorf("%s: answered %q, but the connection closed only after %v (the body timeout is 6s): "+
				"the server read on for the body it had refused", c.what, status, took.Round(100*time.Millisecond))
		}
	}
}

// TestUnreadBodyOfMetricsAndOpenAPIClosesAtOnce: /metrics and
// /openapi.json take no body and answer without reading one, as the other
// GET routes do; like theirs, the answer comes at once and the HTTP/1
// connection closes within refusedBodyGrace. They answered only when the
// body timeout cut off the body the client announced and never sent: Go's
// server reads an unread body before it sends an answer that does not
// close the connection.
func TestUnreadBodyOfMetricsAndOpenAPIClosesAtOnce(t *testing.T) {
	t.Parallel()
	s := newServer(t, &httpapi.Config{BodyTimeout: 6 * time.Second})
	for _, path := range []string{"/metrics", "/openapi.json", "/healthz"} {
		status, took := rawExchange(t, s.url, "GET "+path+" HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n\r\n", 0, 0, 20*time.Second)
		if took > 2*time.Second {
			t.Errorf("GET %s with a body never sent: answered %q, the connection closed after %v (the body timeout is 6s): "+
				"the server waited for the body it does not read", path, status, took.Round(100*time.Millisecond))
		}
	}
}
