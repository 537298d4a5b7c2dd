package protocol_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/leasestore/leasestore/memstore"
	"github.com/leasestore/leasestore/protocol"
)

// TestRenewManyRefusedAsWholeIsObserved: Config.Observer "is called once
// per operation", and every other refusal (an invalid acquire, a RenewMany
// member) reaches it with status invalid, so leasestore_operations_total
// counts it. A RenewMany of more than MaxRenewMany requests is refused as
// invalid without the observer hearing of it: a client looping on such
// calls shows in no metric.
func TestRenewManyRefusedAsWholeIsObserved(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var seen []protocol.OperationEvent
	rt := protocol.New(memstore.New(nil), &protocol.Config{Observer: protocol.ObserverFunc(func(_ context.Context, ev protocol.OperationEvent) {
		mu.Lock()
		seen = append(seen, ev)
		mu.Unlock()
	})})
	defer rt.Close(ctx)
	_, err := rt.RenewMany(ctx, make([]protocol.RenewRequest, protocol.MaxRenewMany+1))
	if !errors.Is(err, protocol.ErrInvalid) {
		t.Fatalf("RenewMany of %d: %v; want invalid", protocol.MaxRenewMany+1, err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, ev := range seen {
		if ev.Op == protocol.OpRenew && ev.Status == protocol.StatusInvalid {
			return
		}
	}
	t.Errorf("RenewMany refused as a whole: observer saw %v; want a renew event with status invalid", seen)
}
