package memstore_test

import (
	"context"
	"testing"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/scheduler/schedulertest"
)

// TestScheduler runs the scheduler suite on one in-memory store per case,
// each worker on a handle of its own.
func TestScheduler(t *testing.T) {
	schedulertest.Run(t, func(t *testing.T) schedulertest.Harness {
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
