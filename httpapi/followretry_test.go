package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/protocol"
)

// followRetryPolls is the bound docs/http-api.md gives: after the follow
// route answered 404, the client's Follow tries the stream again after
// this many polls.
const followRetryPolls = 25

// TestFollowStreamsAgainAfterATransient404: a reverse proxy in front of
// the server answers the follow route 404 once (as during a deploy), then
// passes it. The client's Follow falls back to polling, tries the stream
// again within followRetryPolls polls, and streams from then on, each
// record once. It polled for the rest of its life.
func TestFollowStreamsAgainAfterATransient404(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	hold(t, s.rt, protocol.Key{Namespace: "scan", Name: "before"}, "w")
	target, err := url.Parse(s.url)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	// A request the test's end cancels is no news.
	rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) }
	var (
		mu             sync.Mutex
		seen           []string              // the routes the proxy saw: "follow 404", "poll", "follow"
		follows, polls int                   // polls: before the follow route passed
		streaming      = make(chan struct{}) // closed when the proxy passes the follow route
		tooMany        = make(chan struct{}) // closed at more polls than the bound before that
	)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		switch r.URL.Path {
		case "/v1/audit/follow":
			if follows++; follows == 1 {
				seen = append(seen, "follow 404")
				mu.Unlock()
				http.NotFound(w, r) // the proxy's page, not the server's JSON
				return
			}
			seen = append(seen, "follow")
			if follows == 2 {
				close(streaming)
			}
		case "/v1/audit":
			seen = append(seen, "poll")
			if follows < 2 {
				if polls++; polls == followRetryPolls+1 {
					close(tooMany)
				}
			}
		}
		mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	routes := func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(seen, ",")
	}

	c, err := httpapi.NewClient(proxy.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// From a1.0 (the trail's start: it was never pruned), so that the
	// follow route is the first the proxy sees.
	next, stop := iterPull(c.Follow(ctx, audit.Query{Namespace: "scan", Cursor: audit.EncodeCursor(0)}))
	if rec := mustNext(t, next); rec.Key != "before" {
		stop()
		t.Fatalf("first record %+v", rec)
	}
	// The follow runs only while its records are asked for: ask for the
	// next one while the proxy watches.
	type pulled struct {
		rec audit.Record
		err error
		ok  bool
	}
	pending := make(chan pulled, 1)
	go func() {
		rec, err, ok := next()
		pending <- pulled{rec, err, ok}
	}()
	defer func() {
		cancel()
		<-pending // ends once ctx does, when not received below
		stop()
	}()
	select {
	case <-streaming:
	case <-tooMany:
		t.Fatalf("the proxy saw %d polls after the follow route's 404 and no follow request since: the client polls for ever (routes %s)",
			followRetryPolls+1, routes())
	case <-ctx.Done():
		t.Fatalf("neither the follow route again nor %d polls within a minute: routes %s", followRetryPolls+1, routes())
	}
	got := routes()
	if polls := strings.Count(got, "poll"); !strings.HasPrefix(got, "follow 404,poll") || polls > followRetryPolls {
		t.Fatalf("routes %s: want the 404, then at most %d polls, then the follow route", got, followRetryPolls)
	}
	// The record of the next change comes through the stream (no poll
	// after the follow route passed), and "before" is not repeated.
	hold(t, s.rt, protocol.Key{Namespace: "scan", Name: "after"}, "w")
	var p pulled
	select {
	case p = <-pending:
		pending <- p // for the deferred receive
	case <-time.After(10 * time.Second):
		t.Fatalf("no record within 10s of the acquire of after (routes %s)", routes())
	}
	if p.err != nil || !p.ok || p.rec.Key != "after" {
		t.Fatalf("the record after the switch: %+v %v (more: %v), want the acquire of after (routes %s)", p.rec, p.err, p.ok, routes())
	}
	if now := routes(); now != got {
		t.Fatalf("routes after the switch to the stream: %s, want no more than %s", now, got)
	}
}
