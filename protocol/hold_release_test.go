package protocol_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// The usual shutdown: the context given to Hold comes from
// signal.NotifyContext, the signal cancels it, and the deferred
// h.Release(ctx) still releases the lease instead of leaving it to expire.
func TestHoldReleaseAfterTheContextIsCancelled(t *testing.T) {
	t.Parallel()
	rt := protocol.New(memstore.New(nil), nil)
	defer rt.Close(context.Background())
	k := holdKey(t)
	ctx, cancel := context.WithCancel(context.Background())
	h, err := protocol.Hold(ctx, rt, protocol.AcquireRequest{Key: k, Owner: "w1", TTL: time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cancel() // Ctrl-C
	<-h.Context().Done()
	if err := h.Release(ctx); err != nil {
		t.Fatalf("Release with the cancelled context: %v, want the lease released", err)
	}
	if _, err := rt.Get(context.Background(), protocol.GetRequest{Key: k}); !errors.Is(err, protocol.ErrNotFound) {
		t.Fatalf("Get after Release = %v, want not_found: the lease was left to expire", err)
	}
}

// hangingRelease never answers a release until its context ends.
type hangingRelease struct{ protocol.Backend }

func (hangingRelease) Release(ctx context.Context, _ protocol.ReleaseRequest) (protocol.Result, error) {
	<-ctx.Done()
	return protocol.Result{}, ctx.Err()
}

// Release on a cancelled context is still bounded: by the renewal timeout.
func TestHoldReleaseAfterCancelIsBounded(t *testing.T) {
	t.Parallel()
	rt := protocol.New(hangingRelease{memstore.New(nil)}, nil)
	defer rt.Close(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	h, err := protocol.Hold(ctx, rt, protocol.AcquireRequest{Key: holdKey(t), Owner: "w1", TTL: time.Minute},
		&protocol.HoldConfig{RenewTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	start := time.Now()
	err = h.Release(ctx)
	if !errors.Is(err, protocol.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Release = %v, want timeout from the release's own bound", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Release took %v; want it bounded by the renewal timeout", d)
	}
}
