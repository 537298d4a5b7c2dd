package protocol_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// quietStore is a Store that does not signal (no Notifier): a holder
// learns of a revoke from its next renewal.
type quietStore struct{ protocol.Store }

// A lease lost to a refused renewal says so once: the cause reads
// "lease: lost: renew NS/KEY: not_found: ...", not "lease: lost: lease:
// renew ...", and still matches ErrLeaseLost and the renewal's status.
func TestHoldLossSaysLeaseOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := protocol.New(memstore.New(nil), nil)
	defer rt.Close(ctx)
	k := holdKey(t)
	h, err := protocol.Hold(ctx, quietStore{rt}, protocol.AcquireRequest{Key: k, Owner: "w1", TTL: time.Second},
		&protocol.HoldConfig{RenewEvery: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Revoke(ctx, protocol.RevokeRequest{Key: k, Actor: "op", Reason: "stuck"}); err != nil {
		t.Fatal(err)
	}
	<-h.Done()
	cause := context.Cause(h.Context())
	if !errors.Is(cause, protocol.ErrLeaseLost) || !errors.Is(cause, protocol.ErrNotFound) {
		t.Fatalf("cause %v, want lost with not_found", cause)
	}
	var pe *protocol.Error
	if !errors.As(cause, &pe) {
		t.Fatalf("cause %v carries no *protocol.Error", cause)
	}
	if msg := cause.Error(); strings.Count(msg, "lease:") != 1 || !strings.HasPrefix(msg, "lease: lost: renew ") {
		t.Errorf("cause reads %q, want \"lease: lost: renew ...\" with one \"lease:\"", msg)
	}
}

// leaselessRenew answers every successful renew without its lease: a
// backend (or a server) that answers renewed with "lease": null.
type leaselessRenew struct {
	protocol.Backend
	renews atomic.Int64
}

func (b *leaselessRenew) Renew(ctx context.Context, req protocol.RenewRequest) (protocol.Result, error) {
	res, err := b.Backend.Renew(ctx, req)
	b.renews.Add(1)
	res.Lease = nil
	return res, err
}

// A renewal that answered renewed is a renewal, with or without the
// lease in its answer: the holder keeps the lease, and never ends its
// context with a cause whose text cannot be read.
func TestHoldKeepsALeaseRenewedWithoutALeaseInTheAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := &leaselessRenew{Backend: memstore.New(nil)}
	rt := protocol.New(b, nil)
	defer rt.Close(ctx)
	h, err := protocol.Hold(ctx, rt, protocol.AcquireRequest{Key: holdKey(t), Owner: "w1", TTL: time.Minute},
		&protocol.HoldConfig{RenewEvery: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(ctx)
	waitFor(t, "three renewals", func() bool { return b.renews.Load() >= 3 || h.Context().Err() != nil })
	if h.Context().Err() != nil {
		text := func() (s string) {
			defer func() {
				if p := recover(); p != nil {
					s = fmt.Sprintf("(its Error method panicked: %v)", p)
				}
			}()
			return context.Cause(h.Context()).Error()
		}()
		t.Fatalf("the holder's context ended after renewals that answered renewed: cause %s", text)
	}
}
