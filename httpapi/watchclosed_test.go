package httpapi_test

import (
	"context"
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
