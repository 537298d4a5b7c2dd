package postgres_test

import (
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/changetimes"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// The time a change records is the time it takes effect, after any wait
// for its key: under contention on two keys (12 callers on two handles,
// leases released or left to expire, a sweeper with grace 0 removing
// ended rows), every acquire in the trail starts at or after the end of
// the key's previous lease (its release or revoke, else its expiry), and
// each record's times agree with the lease it wrote. The server's clock
// is the judge (no injected clock). Statements alone: a coalesced batch
// reads its time once, as now(), before it takes its keys (the batch
// function's own case).
func TestChangeTimesFollowLockWaits(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	cfg1, cfg2 := postgres.Config{NoCoalescing: true}, postgres.Config{NoCoalescing: true}
	a, b := openBackend(t, dsn, &cfg1), openBackend(t, dsn, &cfg2)
	const ns = "times-alone" // advisory locks are shared by every schema
	changetimes.Contend(t, []changetimes.Handle{a, b}, ns, 2*time.Second)
	changetimes.Check(t, a, ns)
}
