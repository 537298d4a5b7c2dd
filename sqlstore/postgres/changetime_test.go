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
// is the judge (no injected clock). Statements alone, and coalesced
// batches (MaxInFlight 2, so batches form): a batch reads each member's
// time after it holds the member's key; read once as now(), the
// transaction's start, it recorded acquires before the release they
// followed.
func TestChangeTimesFollowLockWaits(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	for _, c := range []struct {
		name string
		cfg  postgres.Config
	}{
		{"alone", postgres.Config{NoCoalescing: true}},
		{"coalesced", postgres.Config{MaxInFlight: 2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg1, cfg2 := c.cfg, c.cfg
			a, b := openBackend(t, dsn, &cfg1), openBackend(t, dsn, &cfg2)
			ns := "times-" + c.name // advisory locks are shared by every schema
			changetimes.Contend(t, []changetimes.Handle{a, b}, ns, 2*time.Second)
			changetimes.Check(t, a, ns)
		})
	}
}
