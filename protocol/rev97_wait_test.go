package protocol_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// A wait whose context was cancelled before it began takes nothing: like
// Acquire on a cancelled context (timeout, nothing sent), and as Hold
// without Wait does. AcquireWait's first attempt is sent on a context
// detached from ctx, whose cancellation reaches it only through
// context.AfterFunc's goroutine, so the acquire usually runs first and
// takes the key for a caller that already gave up.
func TestRev97AcquireWaitOnACancelledContextTakesNothing(t *testing.T) {
	t.Parallel()
	rt := protocol.New(memstore.New(nil), nil)
	defer rt.Close(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 20 {
		k := protocol.Key{Namespace: "rev97", Name: "cancelled-" + string(rune('a'+i))}
		res, err := protocol.AcquireWait(ctx, rt, protocol.AcquireRequest{Key: k, Owner: "w", TTL: time.Minute}, nil)
		if res.Status == protocol.StatusAcquired {
			t.Fatalf("attempt %d: AcquireWait on a cancelled context answered %q (%v): it took %s with token %d for a caller that had cancelled",
				i, res.Status, err, k, res.Lease.Token)
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("attempt %d: error %v, want one matching context.Canceled", i, err)
		}
		if got, _ := rt.Get(context.Background(), protocol.GetRequest{Key: k}); got.Status != protocol.StatusNotFound {
			t.Fatalf("attempt %d: after a cancelled wait the key is %q, want not_found", i, got.Status)
		}
	}
}

// Hold with Wait on a cancelled context must not leave a lease behind:
// Hold without Wait answers timeout and writes nothing.
func TestRev97HoldWaitOnACancelledContextTakesNothing(t *testing.T) {
	t.Parallel()
	rt := protocol.New(memstore.New(nil), nil)
	defer rt.Close(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	k := protocol.Key{Namespace: "rev97", Name: "hold-cancelled"}
	if _, err := protocol.Hold(ctx, rt, protocol.AcquireRequest{Key: k, Owner: "w", TTL: time.Minute}, nil); err == nil {
		t.Fatal("Hold without Wait on a cancelled context succeeded")
	}
	h, err := protocol.Hold(ctx, rt, protocol.AcquireRequest{Key: k, Owner: "w", TTL: time.Minute},
		&protocol.HoldConfig{Wait: &protocol.WaitConfig{}})
	if err == nil {
		<-h.Done()
		got, _ := rt.Get(context.Background(), protocol.GetRequest{Key: k})
		h.Release(context.Background())
		t.Fatalf("Hold with Wait on a cancelled context returned a Held (token %d) and the key is %q: a lease written for a caller that had cancelled",
			h.Token(), got.Status)
	}
}
