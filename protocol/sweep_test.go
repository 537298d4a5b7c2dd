package protocol_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/contract"
	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// The runtime sweeps a backend that implements protocol.Sweeper in the
// background: rows of leases that ended more than the grace ago go, in
// batches, each reported to the observer with the rows it removed; live
// leases stay; Close stops the sweep (goleak checks).
func TestRuntimeSweepsInTheBackground(t *testing.T) {
	clock := contract.NewClock()
	var (
		mu      sync.Mutex
		removed int
		batches atomic.Int64
	)
	obs := protocol.ObserverFunc(func(_ context.Context, ev protocol.OperationEvent) {
		if ev.Op == protocol.OpSweep {
			mu.Lock()
			removed += ev.Items
			mu.Unlock()
			batches.Add(1)
		}
	})
	rt := protocol.New(memstore.New(&memstore.Config{Now: clock.Now}), &protocol.Config{
		Observer: obs,
		Sweep:    &protocol.SweepConfig{Every: 5 * time.Millisecond, Batch: 2, Grace: time.Minute},
	})
	defer rt.Close(context.Background())
	ctx := context.Background()
	for i := range 5 {
		if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: protocol.Key{Namespace: "ns", Name: fmt.Sprintf("k%d", i)},
			Owner: "w", TTL: time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: protocol.Key{Namespace: "ns", Name: "live"}, Owner: "w", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	rows := func() int {
		res, err := rt.List(ctx, protocol.ListRequest{Namespace: "ns", IncludeExpired: true})
		if err != nil {
			t.Fatal(err)
		}
		return len(res.Leases)
	}
	time.Sleep(30 * time.Millisecond)
	if n := rows(); n != 6 {
		t.Fatalf("%d rows before the grace passed, want all 6", n)
	}
	clock.Advance(2 * time.Minute)
	for deadline := time.Now().Add(5 * time.Second); rows() != 1; {
		if time.Now().After(deadline) {
			t.Fatalf("%d rows five seconds after the grace passed, want only the live lease", rows())
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if removed != 5 || batches.Load() < 3 {
		t.Fatalf("the observer saw %d rows removed in %d batches, want 5 in at least 3 (batches of 2)", removed, batches.Load())
	}
}
