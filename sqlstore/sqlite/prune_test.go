package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/prunerace"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// Two prunes with one request id at once (a retry while the first still
// runs): one prunes and records, the other answers invalid, as a prune
// whose id is already in the trail does. The second answered unavailable
// with the trigger's "replacing a record refused".
func TestConcurrentPrunesWithOneRequestID(t *testing.T) {
	ctx := ctxT(t)
	clock := newClock()
	b := open(t, migratedFile(t), clock)
	res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "w", TTL: time.Second, RequestID: "a"})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	clock.Advance(time.Minute)
	req := audit.PruneRequest{Before: clock.Now(), Actor: "ops", RequestID: "prune-1"}

	release := sqlite.HoldWriter(b)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = b.PruneAudit(ctx, req)
		}()
	}
	for sqlite.WriteQueueLen(b) < 2 {
		time.Sleep(time.Millisecond)
	}
	release()
	wg.Wait()
	var ok, invalid int
	for _, err := range errs {
		var pe *protocol.Error
		switch {
		case err == nil:
			ok++
		case errors.As(err, &pe) && pe.Status == protocol.StatusInvalid:
			invalid++
		default:
			t.Errorf("prune: %v; want success or invalid (the request id was used)", err)
		}
	}
	if ok != 1 || invalid != 1 {
		t.Fatalf("prunes with one request id: %d succeeded, %d invalid (%v); want one of each", ok, invalid, errs)
	}
}

// TestPruneSameRequestIDBetweenBatches: a prune of several batches is held
// between its first and second batch, and a prune with the same request id
// (a client retrying the first, which timed out) runs meanwhile. Exactly
// one of them removes records, and its record (the only prune record under
// that id) counts every record removed; the other removes nothing and is
// refused as a use of the id. Before, the first prune's record was written
// only with its last batch: the second passed the look-up of the id,
// removed the rest and recorded only those, and the first then answered
// invalid ("already used") having removed its first batch, which no record
// counted. Not parallel: it sets the package's batch size.
func TestPruneSameRequestIDBetweenBatches(t *testing.T) {
	b, gate, clock := heldPruneStore(t, migratedFile(t))
	prunerace.Run(t, ctxT(t), b, b, gate, audit.PruneRequest{Before: clock.Now(), Actor: "ops", RequestID: "prune-once"}, heldPruneRecords)
}

// TestPruneCutOffFreesItsRequestID: a prune whose context ends between its
// batches frees its claim on the request id, so that the prune sent again
// with that id runs and removes the rest, instead of being refused as a
// use of the id. Not parallel: it sets the package's batch size.
func TestPruneCutOffFreesItsRequestID(t *testing.T) {
	b, gate, clock := heldPruneStore(t, migratedFile(t))
	prunerace.RunCutOff(t, ctxT(t), b, gate, audit.PruneRequest{Before: clock.Now(), Actor: "ops", RequestID: "prune-cut-off"}, heldPruneRecords, 2)
}

// TestPruneThatDiedKeepsItsRequestIDUsed: a prune that can neither go on
// nor free its claim after its first batch (its backend closed under it,
// as when its process dies) leaves the claim: a prune with that request
// id, from another handle, is refused as a use of the id and removes
// nothing. Not parallel: it sets the package's batch size.
func TestPruneThatDiedKeepsItsRequestIDUsed(t *testing.T) {
	path := migratedFile(t)
	b, gate, clock := heldPruneStore(t, path)
	other := open(t, path, clock)
	prunerace.RunAbandoned(t, ctxT(t), b, other, gate, audit.PruneRequest{Before: clock.Now(), Actor: "ops", RequestID: "prune-died"},
		func() { _ = b.Close(context.Background()) })
}

// heldPruneRecords is how many records heldPruneStore writes.
const heldPruneRecords = 7

// heldPruneStore opens path with a manual clock and a prune batch of 2
// records, a prune held by the returned gate after its first batch, and
// writes heldPruneRecords records older than the clock's time, of leases
// expired by then (a prune keeps a live lease's acquire).
func heldPruneStore(t *testing.T, path string) (*sqlite.Backend, *prunerace.Gate, *testClock) {
	t.Helper()
	ctx := ctxT(t)
	clock := newClock()
	gate := prunerace.NewGate()
	b, err := sqlite.Open(ctx, path, sqlite.WithPruneBatchHook(sqlite.WithTestClock(nil, clock.Now), gate.Between))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	sqlite.SetPruneBatch(t, 2)
	for i := range heldPruneRecords {
		res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key(fmt.Sprint("k", i)), Owner: "w", TTL: time.Second, RequestID: fmt.Sprint("a", i)})
		wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	}
	clock.Advance(time.Minute)
	return b, gate, clock
}
