package protocol_test

import (
	"context"
	"errors"
	"strings"
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
