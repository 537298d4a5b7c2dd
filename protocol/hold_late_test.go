package protocol_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// answersLate takes each acquire at once but answers it only after delay
// (a store whose answers queue behind others, a slow link back).
type answersLate struct {
	protocol.Backend
	renewSignal
	delay time.Duration
}

func (b *answersLate) Acquire(ctx context.Context, req protocol.AcquireRequest) (protocol.Result, error) {
	res, err := b.Backend.Acquire(ctx, req)
	time.Sleep(b.delay)
	return res, err
}

func (b *answersLate) Renew(ctx context.Context, req protocol.RenewRequest) (protocol.Result, error) {
	return b.noteRenew(b.Backend.Renew(ctx, req))
}

// An acquire answered late leaves the lease less than the TTL by the
// local clock (it runs from when the acquire was sent): the Held renews
// it at once when a renewal is already due by then, instead of a whole
// interval after Hold returned, which here is when the lease runs out.
func TestHoldRenewsALateAnsweredAcquireInTime(t *testing.T) {
	t.Parallel()
	const ttl = 3 * time.Second
	b := &answersLate{Backend: memstore.New(nil), renewSignal: newRenewSignal(), delay: 2 * ttl / 3}
	holdUntilRenewed(t, b, &b.renewSignal, ttl, func() string {
		return "lost with no renewal tried, the acquire answered with a third of the TTL left"
	})
}
