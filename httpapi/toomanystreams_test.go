package httpapi_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/protocol"
)

// TestClientReportsAStreamCapPlainly: a stream (notify, audit follow)
// that the server refuses because its token has the most streams open
// that one token may (429, too_many_streams) reaches the Go client's
// caller as unavailable (the store was not asked; a later stream may
// open once one of the token's others closed: not an auth failure,
// leasectl exit 5, never 7), its message naming the cap and its flag. The
// client said "the server answered HTTP 429 with status
// \"too_many_streams\", which is not a lease status". The server's own
// cap (503 unavailable) is reported likewise, naming --max-streams. The
// token's cap matches httpapi.ErrTooManyStreams, the server's does not.
func TestClientReportsAStreamCapPlainly(t *testing.T) {
	t.Parallel()
	toks := mustTokens(t)
	s := newServer(t, &httpapi.Config{Tokens: func() *httpapi.Tokens { return toks }, MaxStreamsPerToken: 1, MaxStreams: 2})
	if rs := openStream(t, s.url+"/v1/notify/scan/other", "Authorization", "Bearer "+readerToken); rs.resp.StatusCode != 200 {
		t.Fatalf("the reader's first stream: HTTP %d", rs.resp.StatusCode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	check := func(what string, err error, flag string) {
		t.Helper()
		if capped := flag == "--max-streams-per-token"; errors.Is(err, httpapi.ErrTooManyStreams) != capped {
			t.Errorf("%s: %v; matches httpapi.ErrTooManyStreams: %v, want %v", what, err, !capped, capped)
		}
		if err == nil {
			t.Fatalf("%s: no error", what)
		}
		msg := err.Error()
		if protocol.StatusOf(err) != protocol.StatusUnavailable || strings.Contains(msg, "not a lease status") ||
			!strings.Contains(msg, flag) || errors.Is(err, protocol.ErrUnauthenticated) || errors.Is(err, protocol.ErrForbidden) {
			t.Errorf("%s: %v (status %s); want unavailable, not an auth failure, naming %s and not \"not a lease status\"",
				what, err, protocol.StatusOf(err), flag)
		}
	}
	reader, err := httpapi.NewClient(s.url, &httpapi.ClientConfig{Token: readerToken})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close(ctx)
	_, _, err = reader.Subscribe(ctx, protocol.Key{Namespace: "scan", Name: "k"})
	check("subscribe past the token's cap", err, "--max-streams-per-token")
	for _, err := range reader.Follow(ctx, audit.Query{Namespace: "scan", Cursor: "a1.0"}) {
		check("follow past the token's cap", err, "--max-streams-per-token")
		break
	}

	if rs := openStream(t, s.url+"/v1/notify/scan/other", "Authorization", "Bearer "+adminToken); rs.resp.StatusCode != 200 {
		t.Fatalf("the admin's stream: HTTP %d", rs.resp.StatusCode)
	}
	writer, err := httpapi.NewClient(s.url, &httpapi.ClientConfig{Token: writerToken})
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close(ctx)
	_, _, err = writer.Subscribe(ctx, protocol.Key{Namespace: "scan", Name: "k"})
	check("subscribe past the server's cap", err, "--max-streams")
}
