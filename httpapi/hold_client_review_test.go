package httpapi_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasestore/leasestore/httpapi"
	"github.com/leasestore/leasestore/protocol"
)

// Hold over the client (docs/http-api.md: "AcquireWait or Hold over the
// client") of a key someone else holds answers the conflict, as over a
// Runtime: the client, a protocol.Backend, answers 409 as a Result with a
// nil error carrying the holder's lease, which Hold must not take for an
// acquire, handing back a Held with the other holder's fencing token.
func TestHoldOverTheClientOfAHeldKeyIsAConflict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newServer(t, nil)
	k := protocol.Key{Namespace: "ns", Name: "job"}
	if _, err := s.rt.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "w1", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	c, err := httpapi.NewClient(s.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	h, err := protocol.Hold(ctx, c, protocol.AcquireRequest{Key: k, Owner: "w2", TTL: time.Hour}, nil)
	if h != nil {
		defer h.Release(ctx)
		t.Fatalf("Hold by w2 over the client of a key w1 holds returned a Held (error %v) with token %d, owner %s: "+
			"the conflict was taken for an acquire; want an error matching ErrConflict", err, h.Token(), h.Lease().Owner)
	}
	if !errors.Is(err, protocol.ErrConflict) {
		t.Fatalf("Hold by w2 of a key w1 holds: %v, want an error matching ErrConflict", err)
	}
}
