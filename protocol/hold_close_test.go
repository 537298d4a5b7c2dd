package protocol_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// silentBackend is a Backend that does not signal (its Subscribe is
// hidden): a Runtime over it cannot tell a holder of a revoke.
type silentBackend struct{ protocol.Backend }

// A Runtime.Close ends every Held of that Runtime at once, whether or not
// its backend signals: the lease is renewed no more, so its holder hears
// the end now (closed, as every operation after Close answers), not at
// its next renewal, a third of the TTL later.
func TestHoldHearsRuntimeCloseAtOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		backend func() protocol.Backend
	}{
		{"signalling", func() protocol.Backend { return memstore.New(nil) }},
		{"silent", func() protocol.Backend { return silentBackend{memstore.New(nil)} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			rt := protocol.New(tc.backend(), nil)
			h, err := protocol.Hold(ctx, rt, protocol.AcquireRequest{Key: holdKey(t), Owner: "w1", TTL: time.Minute}, nil)
			if err != nil {
				t.Fatal(err)
			}
			closed := time.Now()
			if err := rt.Close(ctx); err != nil {
				t.Fatalf("close: %v", err)
			}
			const bound = time.Second
			select {
			case <-h.Context().Done():
			case <-time.After(bound - time.Since(closed)):
				t.Fatalf("the Held's context was not cancelled within %v of Runtime.Close (TTL 1m: the next renewal is 20s away)", bound)
			}
			select {
			case <-h.Done():
			case <-time.After(bound):
				t.Fatalf("the Held's Done was not closed within %v of its context's end", bound)
			}
			cause := context.Cause(h.Context())
			if !errors.Is(cause, protocol.ErrLeaseLost) || !errors.Is(cause, protocol.ErrClosed) {
				t.Fatalf("cause %v, want one matching ErrLeaseLost and ErrClosed", cause)
			}
			if st := protocol.StatusOf(cause); st != protocol.StatusClosed {
				t.Errorf("status of the cause %q, want %q", st, protocol.StatusClosed)
			}
			if err := h.Release(ctx); !errors.Is(err, protocol.ErrClosed) {
				t.Errorf("release after Close: %v, want the loss (closed)", err)
			}
		})
	}
}
