package memstore_test

import (
	"context"
	"fmt"
	"sync"
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
	store := memstore.NewStore(nil)
	const handles = 3
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		hist lincheck.History
	)
	for i := range handles {
		rt := protocol.New(store.Handle(), nil)
		defer rt.Close(context.Background())
		rec := lincheck.NewRecorder(fmt.Sprintf("h%d", i), nil)
		w := &lincheck.Workload{Store: rt, Recorder: rec, Clients: 2, Ops: 1000,
			ShortTTL: 10 * time.Millisecond, Keys: []string{"k0", "k1", "k2", "k3"}, LoseAnswers: 0.05}
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
	res, err := lincheck.Check(&hist, &lincheck.CheckOptions{Name: t.Name()})
	t.Logf("history: %v", res)
	if err != nil {
		t.Fatal(err)
	}
	if res.Operations < 3000 {
		t.Fatalf("%d operations, want 3000", res.Operations)
	}
}
