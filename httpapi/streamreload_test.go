package httpapi_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/protocol"
)

// TestStreamOutlivesANarrowedRole: a stream needs only a reader's rights,
// so a reload that narrows its token's role (admin to reader, in the same
// namespaces) leaves the stream open and signalling, as docs/http-api.md
// and serve's help say (they said once that any narrowing ended it);
// TestStreamEndsWhenItsTokenIsRemoved covers the reloads that end one.
func TestStreamOutlivesANarrowedRole(t *testing.T) {
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
	next, err := httpapi.ParseTokens(strings.NewReader(adminToken + " reader *\n"))
	if err != nil {
		t.Fatal(err)
	}
	current.Store(next)
	s.h.TokensReloaded()
	let(t, s.rt, hold(t, s.rt, protocol.Key{Namespace: "scan", Name: "k"}, "w"))
	if name, ev, _ := rs.event(); name != "signal" {
		t.Fatalf("after a reload that made the stream's admin token a reader: event %q (%s %s), want signal: the stream should stay open",
			name, ev.Status, ev.Message)
	}
}
