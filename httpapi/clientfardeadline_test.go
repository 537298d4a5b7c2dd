package httpapi_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// TestClientFarDeadline: a caller's deadline further off than a
// time.Duration reaches (400 years: time.Until saturates at about 292)
// is sent as a Request-Timeout the server takes (and cuts to its
// maximum). Rounded up to the millisecond, the saturated duration
// overflowed to a negative Request-Timeout, and every request was
// refused 400 invalid.
func TestClientFarDeadline(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	rt := newClient(t, s.url, nil)
	ctx, cancel := context.WithDeadline(t.Context(), time.Now().AddDate(400, 0, 0))
	defer cancel()
	res, err := rt.Get(ctx, protocol.GetRequest{Key: protocol.Key{Namespace: "ns", Name: "k"}})
	if res.Status != protocol.StatusNotFound || protocol.StatusOf(err) != protocol.StatusNotFound {
		t.Fatalf("get under a deadline 400 years off: %v, %v; want not_found", res.Status, err)
	}
}
