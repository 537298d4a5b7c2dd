package memstore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/contract/lincheck"
	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// TestLinearizable runs the lincheck workload on one store from several
// handles, each with its own Runtime and two goroutine clients, as separate
// services would share a store, and checks the merged history.
func TestLinearizable(t *testing.T) {
	t.Parallel()
	checkLinearizable(t, nil)
}

// TestLinearizableWhileSweeping is TestLinearizable with every runtime
// sweeping ended leases every few milliseconds with no grace.
func TestLinearizableWhileSweeping(t *testing.T) {
	t.Parallel()
	checkLinearizable(t, &protocol.SweepConfig{Every: 3 * time.Millisecond, Grace: time.Nanosecond})
}

func checkLinearizable(t *testing.T, sweep *protocol.SweepConfig) {
	store := memstore.NewStore(nil)
	var swept atomic.Int64
	observer := protocol.ObserverFunc(func(_ context.Context, ev protocol.OperationEvent) {
		if ev.Op == protocol.OpSweep {
			swept.Add(int64(ev.Items))
		}
	})
	const handles = 3
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		hist lincheck.History
	)
	for i := range handles {
		rt := protocol.New(store.Handle(), &protocol.Config{Sweep: sweep, Observer: observer})
		defer rt.Close(context.Background())
		rec := lincheck.NewRecorder(fmt.Sprintf("h%d", i), nil)
		w := &lincheck.Workload{Store: rt, Recorder: rec, Clients: 2, Ops: 1000,
			ShortTTL: 10 * time.Millisecond, Keys: []string{"k0", "k1", "k2", "k3"}, LoseAnswers: 0.05,
			LockDelay: 10 * time.Millisecond}
		wg.Go(func() {
			stats, err := w.Run(t.Context())
			if err != nil {
				t.Error(err)
			}
			t.Logf("%s: %v", rec.Process(), stats)
			mu.Lock()
			defer mu.Unlock()
			hist.Merge(rec.History())
		})
	}
	wg.Wait()
	opts := &lincheck.CheckOptions{Name: t.Name()}
	if sweep != nil {
		opts.Sweeping, opts.SweepGrace = true, sweep.Grace
	}
	res, err := lincheck.Check(&hist, opts)
	t.Logf("history: %v", res)
	if err != nil {
		t.Fatal(err)
	}
	// Each change wrote its record, and nothing else did.
	if err := lincheck.CheckAudit(t.Context(), &hist, store.Handle()); err != nil {
		t.Fatal(err)
	}
	if res.Operations < 3000 {
		t.Fatalf("%d operations, want 3000", res.Operations)
	}
	if sweep != nil && swept.Load() == 0 {
		t.Fatal("no lease was swept: the run did not test sweeping")
	}
}
