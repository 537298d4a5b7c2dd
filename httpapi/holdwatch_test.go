package httpapi_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/protocol"
)

// TestHoldSubscribesAgainAfterARefusedStream: a Hold whose notification
// stream the server refused (the token's streams capped: 429) subscribes
// again once the cap lets it, and then hears a revoke at once, long before
// its next renewal, rather than at the renewal for the rest of the hold.
func TestHoldSubscribesAgainAfterARefusedStream(t *testing.T) {
	t.Parallel()
	const (
		holdTTL = 2 * time.Minute
		every   = 40 * time.Second // renewals: the fallback, far beyond bound
		bound   = 15 * time.Second // generous on a loaded machine
	)
	toks := mustTokens(t)
	s := newServer(t, &httpapi.Config{Tokens: func() *httpapi.Tokens { return toks }, MaxStreamsPerToken: 1})
	auth := []string{"Authorization", "Bearer " + writerToken}
	// The token's only stream is taken: the Hold's subscription is refused.
	taken := openStream(t, s.url+"/v1/notify/scan/other", auth...)
	if taken.resp.StatusCode != 200 {
		t.Fatalf("stream: %d", taken.resp.StatusCode)
	}
	refused := func() bool {
		m := send(t, "GET", s.url+"/metrics", "")
		return strings.Contains(m.body, `route="notify"`) && strings.Contains(m.body, `code="429"`)
	}
	if refused() {
		t.Fatal("a stream was refused before the hold")
	}
	rt := newClient(t, s.url, &httpapi.ClientConfig{Token: writerToken})
	ctx := context.Background()
	key := protocol.Key{Namespace: "scan", Name: "k"}
	h, err := protocol.Hold(ctx, rt, protocol.AcquireRequest{Key: key, Owner: "w", TTL: holdTTL},
		&protocol.HoldConfig{RenewEvery: every})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h.Release(ctx) }()
	deadline := time.Now().Add(bound)
	for !refused() {
		if time.Now().After(deadline) {
			t.Fatalf("the hold's subscription was not refused within %v", bound)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The cap lets a stream in again.
	_ = taken.resp.Body.Close()
	start := time.Now()
	if _, err := s.rt.Revoke(ctx, protocol.RevokeRequest{Key: key, Actor: "op", Reason: "test", Token: h.Token()}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Context().Done():
		t.Logf("revoke to the hold's context done: %v", time.Since(start))
	case <-time.After(bound):
		t.Fatalf("the hold did not hear of the revoke within %v (renewals every %v): its refused subscription was not made again", bound, every)
	}
	if cause := context.Cause(h.Context()); !errors.Is(cause, protocol.ErrLeaseLost) {
		t.Fatalf("the hold's context ended with %v, want a loss", cause)
	}
}
