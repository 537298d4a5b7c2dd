package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/protocol"
)

// protocol.WatchLease through a Client that was closed returns at once, as
// its doc says of a closed store, instead of subscribing again every few
// seconds until its context ends.
func TestWatchLeaseOnAClosedClientReturnsAtOnce(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	c, err := httpapi.NewClient(s.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := c.Acquire(ctx, protocol.AcquireRequest{Key: protocol.Key{Namespace: "scan", Name: "k"}, Owner: "w",
		TTL: time.Minute, RequestID: "r1"})
	if err != nil || res.Lease == nil {
		t.Fatalf("acquire: %+v %v", res, err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	start := time.Now()
	protocol.WatchLease(wctx, c, *res.Lease, time.Second, func(why error) { t.Errorf("lost: %v", why) })
	if took := time.Since(start); took > time.Second {
		t.Fatalf("WatchLease on a closed client returned after %v (its context's end), want at once: it kept "+
			"subscribing through a closed client", took.Round(100*time.Millisecond))
	}
}

// protocol.WatchLease through a Client whose server sends a subscribed
// event the client cannot read (a server of another protocol, which sends
// it again on every subscription) returns at once: the subscription cannot
// be made, and the holder's renewals tell the loss. It subscribed again
// every few seconds until its context ended.
func TestWatchLeaseStopsAtAMalformedSubscribedEvent(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: subscribed\ndata: {\"status\":\n\n")
	}))
	defer srv.Close()
	c := newClient(t, srv.URL, nil)
	l := protocol.Lease{Key: protocol.Key{Namespace: "scan", Name: "k"}, Owner: "w", Token: 1}
	wctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	protocol.WatchLease(wctx, c, l, time.Second, func(why error) { t.Errorf("lost: %v", why) })
	if took := time.Since(start); took > time.Second || requests.Load() != 1 {
		t.Fatalf("WatchLease returned after %v and %d subscriptions, want at once after one: it kept subscribing "+
			"to a server whose subscribed event it cannot read", took.Round(100*time.Millisecond), requests.Load())
	}
}
