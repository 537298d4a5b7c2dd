package memstore_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler/schedulertest"
)

// TestScheduler runs the scheduler suite on one in-memory store per case,
// each worker on a handle of its own.
//
// It also holds the suite to its Factory doc: the cases run one after the
// other, so that no two are ever under way at once.
func TestScheduler(t *testing.T) {
	var running atomic.Int32
	schedulertest.Run(t, func(t *testing.T) schedulertest.Harness {
		if n := running.Add(1); n > 1 {
			t.Errorf("case %s started while %d other cases of the suite ran: the Factory doc says one at a time", t.Name(), n-1)
		}
		t.Cleanup(func() { running.Add(-1) })
		store := memstore.NewStore(nil)
		return schedulertest.Harness{
			NewStore: func(t *testing.T) protocol.Store {
				rt := protocol.New(store.Handle(), nil)
				t.Cleanup(func() { _ = rt.Close(context.Background()) })
				return rt
			},
			Resource: schedulertest.MemResource(),
		}
	})
}
