package protocol_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// TestHoldRefusesNegativeWaitRecheck: HoldConfig's doc says Hold refuses,
// as invalid and before acquiring anything, a negative duration in its
// config. Wait.Recheck is one of its durations; a negative one is taken
// silently (as the default) and the key is acquired.
func TestHoldRefusesNegativeWaitRecheck(t *testing.T) {
	ctx := context.Background()
	rt := protocol.New(memstore.New(nil), nil)
	defer rt.Close(ctx)
	key := protocol.Key{Namespace: "review", Name: "hold-recheck"}
	h, err := protocol.Hold(ctx, rt, protocol.AcquireRequest{Key: key, Owner: "w", TTL: time.Minute},
		&protocol.HoldConfig{Wait: &protocol.WaitConfig{Recheck: -time.Second}})
	if h != nil {
		defer h.Release(ctx)
	}
	if !errors.Is(err, protocol.ErrInvalid) {
		t.Errorf("Hold with Wait.Recheck -1s: err %v; want one matching ErrInvalid naming the recheck", err)
	}
	if res, err := rt.Get(ctx, protocol.GetRequest{Key: key}); err == nil {
		t.Errorf("Hold with Wait.Recheck -1s acquired the key (token %d); want nothing acquired", res.Lease.Token)
	}
}
