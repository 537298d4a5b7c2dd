package protocol_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// answersLate takes each acquire at once but answers it only after delay
// (a store whose answers queue behind others, a slow link back); renewed
// is closed when a renewal succeeds.
type answersLate struct {
	protocol.Backend
	delay   time.Duration
	renewed chan struct{}
	once    atomic.Bool
}

func (b *answersLate) Acquire(ctx context.Context, req protocol.AcquireRequest) (protocol.Result, error) {
	res, err := b.Backend.Acquire(ctx, req)
	time.Sleep(b.delay)
	return res, err
}

func (b *answersLate) Renew(ctx context.Context, req protocol.RenewRequest) (protocol.Result, error) {
	res, err := b.Backend.Renew(ctx, req)
	if err == nil && b.once.CompareAndSwap(false, true) {
		close(b.renewed)
	}
	return res, err
}

// An acquire answered late leaves the lease less than the TTL by the
// local clock (it runs from when the acquire was sent): the Held renews
// it at once when a renewal is already due by then, instead of a whole
// interval after Hold returned, which here is when the lease runs out.
func TestHoldRenewsALateAnsweredAcquireInTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ttl = 3 * time.Second
	b := &answersLate{Backend: memstore.New(nil), delay: 2 * ttl / 3, renewed: make(chan struct{})}
	rt := protocol.New(b, nil)
	defer rt.Close(ctx)
	h, err := protocol.Hold(ctx, rt, protocol.AcquireRequest{Key: holdKey(t), Owner: "w1", TTL: ttl}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(ctx)
	select {
	case <-b.renewed:
	case <-h.Context().Done():
		t.Fatalf("lost with no renewal tried, the acquire answered with a third of the TTL left: %v", context.Cause(h.Context()))
	}
	if err := h.Context().Err(); err != nil {
		t.Fatalf("the lease renewed in time is lost: %v", context.Cause(h.Context()))
	}
}
