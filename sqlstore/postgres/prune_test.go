package postgres_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/contract"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/internal/testkit/prunerace"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// TestPruneSameRequestIDBetweenBatches is the SQLite test's twin: a prune
// of several batches is held between its first and second batch (outside
// any transaction), and a prune with the same request id runs meanwhile.
// Exactly one of them removes records, and its record (the only prune
// record under that id) counts every record removed; the other removes
// nothing and is refused as a use of the id. Before, the second passed the
// look-up of the id, removed the rest and recorded only those, and the
// first then failed on the request id's unique constraint, answering
// invalid ("already used") having removed its first batch, which no record
// counted. Not parallel: it sets the package's batch size.
func TestPruneSameRequestIDBetweenBatches(t *testing.T) {
	ctx := ctxT(t)
	clock := contract.NewClock()
	gate := prunerace.NewGate()
	b := openBackend(t, pgtest.MigratedDSN(t), postgres.WithPruneBatchHook(postgres.WithTestClock(nil, clock.Now), gate.Between))
	postgres.SetPruneBatch(t, 2)
	const older = 7 // four batches
	for i := range older {
		res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key(fmt.Sprint("k", i)), Owner: "w", TTL: time.Hour, RequestID: fmt.Sprint("a", i)})
		wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	}
	clock.Advance(time.Minute)
	prunerace.Run(t, ctx, b, b, gate, audit.PruneRequest{Before: clock.Now(), Actor: "ops", RequestID: "prune-once"}, older)
}
