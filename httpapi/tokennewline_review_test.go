package httpapi_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/protocol"
)

// A bearer token read with its line's newline (an env file, a Kubernetes
// secret of a file that ends in one: LEASESTORE_API_TOKEN="TOKEN\n") is a
// bad token, not an outage: DESIGN.md's exit 7 "unauthenticated or
// forbidden (HTTP 401/403: never 5, a bad token is not an outage)". No
// token of a tokens file holds whitespace (its fields split on it), so the
// client could send it trimmed, or refuse it naming the token. It sends
// nothing: net/http refuses the header value, and the client reports the
// server unreachable ("check the base URL's host and port, and that the
// server runs"), unavailable, after 3 attempts.
func TestClientTokenWithATrailingNewlineIsNotAnOutage(t *testing.T) {
	t.Parallel()
	toks, err := httpapi.ParseTokens(strings.NewReader(tokensFile()))
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, &httpapi.Config{Tokens: func() *httpapi.Tokens { return toks }})
	rt := newClient(t, s.url, &httpapi.ClientConfig{Token: writerToken + "\n"})
	res, err := rt.Acquire(t.Context(), protocol.AcquireRequest{Key: protocol.Key{Namespace: "scan", Name: "k"}, Owner: "o", TTL: time.Minute})
	if err == nil && res.Status == protocol.StatusAcquired {
		return // sent trimmed
	}
	if !errors.Is(err, protocol.ErrUnauthenticated) {
		t.Fatalf("acquire with the writer's token read with its newline: %+v, %v (status %s); want it acquired (the token "+
			"trimmed) or refused as a bad token (protocol.ErrUnauthenticated), not the server unreachable",
			res, err, protocol.StatusOf(err))
	}
}
