package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/protocol"
)

// TestSubscriptionEndsWhenItsTokenIsRefused: a notification stream whose
// token the server no longer takes (a reload removed it: 401, or narrowed
// its namespaces: 403) cannot be mended by reconnecting, any more than a
// malformed event can. The client's subscription is signalled once and
// ends, as after a malformed event, and sends at most one request more; it
// reconnected for ever, every 5 s once its backoff grew, each answered 401
// or 403 again. Both when the server ends the stream at the reload (an end
// event of status unauthorized or forbidden) and when the connection
// breaks after the token changed without one.
func TestSubscriptionEndsWhenItsTokenIsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, tokens string
		endEvent     bool // the server hears of the reload (TokensReloaded)
	}{
		{"removed", adminToken + " admin *\n", true},
		{"narrowed", readerToken + " reader other\n", true},
		{"removed, no end event", adminToken + " admin *\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var current atomic.Pointer[httpapi.Tokens]
			current.Store(mustTokens(t))
			s := newServer(t, &httpapi.Config{Tokens: current.Load})
			var notifies atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.HasPrefix(r.URL.Path, "/v1/notify/") {
					notifies.Add(1)
				}
				s.h.ServeHTTP(w, r)
			}))
			t.Cleanup(srv.Close)
			c, err := httpapi.NewClient(srv.URL, &httpapi.ClientConfig{Token: readerToken})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close(t.Context()) })
			ch, cancel, err := c.Subscribe(t.Context(), protocol.Key{Namespace: "scan", Name: "k"})
			if err != nil {
				t.Fatal(err)
			}
			defer cancel()
			next, err := httpapi.ParseTokens(strings.NewReader(tc.tokens))
			if err != nil {
				t.Fatal(err)
			}
			current.Store(next)
			before := notifies.Load()
			if tc.endEvent {
				s.h.TokensReloaded()
			} else {
				srv.CloseClientConnections()
			}
			select {
			case <-ch:
			case <-time.After(5 * time.Second):
				t.Fatal("the subscription was not signalled when its stream ended")
			}
			time.Sleep(2500 * time.Millisecond) // the backoff's first five pauses: 1.55 s
			if n := notifies.Load() - before; n > 1 {
				t.Fatalf("after its token was refused the subscription sent %d requests in 2.5s, each refused again: "+
					"want at most one (a 401 or 403 cannot be mended by reconnecting)", n)
			}
		})
	}
}

// TestFollowEndsWhenItsTokenIsRefused: the audit follow ends, with one
// error matching httpapi.ErrUnauthorized, when the server refuses the
// client's token, at its first request or at a reload that removed it; it
// does not reconnect, as a subscription does not
// (TestSubscriptionEndsWhenItsTokenIsRefused).
func TestFollowEndsWhenItsTokenIsRefused(t *testing.T) {
	t.Parallel()
	var current atomic.Pointer[httpapi.Tokens]
	current.Store(mustTokens(t))
	s := newServer(t, &httpapi.Config{Tokens: current.Load})
	var follows atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/audit/follow" {
			follows.Add(1)
		}
		s.h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	hold(t, s.rt, protocol.Key{Namespace: "scan", Name: "k"}, "w")
	for _, tc := range []struct {
		what, token string
		reload      bool
	}{
		{"a wrong token", "wrong-token-0123456789", false},
		{"a token a reload removes", readerToken, true},
	} {
		c, err := httpapi.NewClient(srv.URL, &httpapi.ClientConfig{Token: tc.token})
		if err != nil {
			t.Fatal(err)
		}
		follows.Store(0)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		var errs []error
		// From a1.0 (the trail's start: it was never pruned), so that the
		// stream, not a first read of the start, meets the refusal.
		for rec, err := range c.Follow(ctx, audit.Query{Namespace: "scan", Cursor: audit.EncodeCursor(0)}) {
			switch {
			case err != nil:
				errs = append(errs, err)
			case tc.reload && rec.Key == "k" && len(errs) == 0:
				next, perr := httpapi.ParseTokens(strings.NewReader(adminToken + " admin *\n"))
				if perr != nil {
					t.Fatal(perr)
				}
				current.Store(next)
				s.h.TokensReloaded()
			}
		}
		ended := ctx.Err() == nil
		cancel()
		_ = c.Close(t.Context())
		if !ended || len(errs) != 1 || !errors.Is(errs[0], httpapi.ErrUnauthorized) || follows.Load() != 1 {
			t.Fatalf("follow with %s: ended by itself %v, errors %v, %d follow requests; want it to end at one error "+
				"matching ErrUnauthorized after one request", tc.what, ended, errs, follows.Load())
		}
	}
}
