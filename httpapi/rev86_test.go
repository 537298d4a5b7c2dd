package httpapi_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/httpapi"
)

// TestStreamEndsWhenItsTokensRoleIsNarrowed: docs/http-api.md (and serve's
// help: "Streams ... of a token the reload removed or narrowed end at
// once") promise that "a reload that removes a token, or narrows its role
// or namespaces, ends that token's open streams at once (an end event of
// status unauthorized or forbidden)". An admin token demoted to reader, in
// the same namespaces, keeps its stream open.
func TestStreamEndsWhenItsTokensRoleIsNarrowed(t *testing.T) {
	t.Parallel()
	var current atomic.Pointer[httpapi.Tokens]
	current.Store(mustTokens(t))
	s := newServer(t, &httpapi.Config{Tokens: current.Load, KeepAlive: time.Hour})
	rs := openStream(t, s.url+"/v1/notify/scan/k", "Authorization", "Bearer "+adminToken)
	if rs.resp.StatusCode != 200 {
		t.Fatalf("stream: HTTP %d", rs.resp.StatusCode)
	}
	if name, _, _ := rs.event(); name != "subscribed" {
		t.Fatalf("first event %q", name)
	}
	// The admin of every namespace becomes a reader of every namespace.
	next, err := httpapi.ParseTokens(strings.NewReader(adminToken + " reader *\n"))
	if err != nil {
		t.Fatal(err)
	}
	current.Store(next)
	s.h.TokensReloaded()
	timeout := time.After(3 * time.Second)
	for {
		select {
		case line, ok := <-rs.lines:
			if !ok || strings.HasPrefix(line, "event: end") {
				return
			}
		case <-timeout:
			t.Fatalf("3s after a reload that narrowed the stream's token from admin to reader, its stream is still open: " +
				"docs/http-api.md says such a reload ends the token's open streams at once")
		}
	}
}
