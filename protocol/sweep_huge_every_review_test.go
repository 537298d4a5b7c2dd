package protocol_test

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// TestNewWithHugeSweepEvery: SweepConfig.Every is the pause between
// sweeps, with up to a fifth of it added or taken at random. A very long
// pause (a sweep "once a century or so", or math.MaxInt64) must mean
// rare sweeps, not a panic in New (the random spread overflows) nor a
// sweep after every operation.
func TestNewWithHugeSweepEvery(t *testing.T) {
	for _, every := range []time.Duration{200 * 365 * 24 * time.Hour, math.MaxInt64} {
		t.Run(fmt.Sprint(every), func(t *testing.T) {
			ctx := context.Background()
			var sweeps atomic.Int64
			var rt *protocol.Runtime
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("New with SweepConfig.Every %v panicked: %v", every, p)
					}
				}()
				rt = protocol.New(memstore.New(nil), &protocol.Config{
					Sweep: &protocol.SweepConfig{Every: every},
					Observer: protocol.ObserverFunc(func(_ context.Context, ev protocol.OperationEvent) {
						if ev.Op == protocol.OpSweep {
							sweeps.Add(1)
						}
					}),
				})
			}()
			key := protocol.Key{Namespace: "review", Name: "sweep"}
			for range 5 {
				_, _ = rt.Get(ctx, protocol.GetRequest{Key: key})
			}
			if err := rt.Close(ctx); err != nil { // waits for a sweep in flight
				t.Fatal(err)
			}
			if n := sweeps.Load(); n != 0 {
				t.Errorf("SweepConfig.Every %v: %d sweeps ran within 5 operations; want none", every, n)
			}
		})
	}
}
