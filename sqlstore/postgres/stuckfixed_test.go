package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// Contract v3: a member waiting on its key delays no member on another
// key. With a fixed limit of round trips in flight (Config.MaxInFlight: 2,
// as TestStuckKeyDelaysNoOtherKey's "coalescing" case) whose two slots
// are held by operations whose keys another session keeps locked, an
// operation on a free key still goes, as it does with the adaptive limit
// (TestStuckSlotsHoldNoOneUp); not when a stuck one gives up.
func TestStuckSlotsHoldNoOneUpWithAFixedLimit(t *testing.T) {
	t.Parallel()
	b, key, unstick := stuckSlots(t, &postgres.Config{MaxInFlight: 2, MaxConns: 4})
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("free"), Owner: "o", TTL: time.Minute,
		RequestID: protocol.RandomRequestID()})
	cancel()
	took := time.Since(start)
	unstick()
	if err != nil || res.Status != protocol.StatusAcquired || took > 2*time.Second {
		t.Fatalf("acquire of a free key behind two operations waiting on their keys: %s %v after %v, want acquired well under 2s",
			res.Status, err, took.Round(time.Millisecond))
	}
}
