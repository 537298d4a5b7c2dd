package postgres_test

import (
	"context"
	"testing"

	"github.com/leasestore/leasestore/contract"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// TestContract runs the backend contract suite. Each subtest gets a fresh
// schema; its two handles are two backends with separate pools, as two
// processes would have, sharing the suite's clock.
// TestContract runs the suite with coalescing on, each handle sending one
// round trip at a time, so that the suite's concurrent cases go to the
// server in batches.
func TestContract(t *testing.T) {
	contract.Run(t, func(t *testing.T, clock *contract.Clock) contract.Harness {
		dsn := pgtest.MigratedDSN(t)
		open := func() *postgres.Backend {
			b, err := postgres.Open(context.Background(), dsn, postgres.WithTestClock(&postgres.Config{MaxConns: 8, MaxInFlight: 1}, clock.Now))
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			// The suite closes the handles; closing again is a no-op, and
			// makes sure no pool outlives the schema if the suite fails early.
			t.Cleanup(func() { _ = b.Close(context.Background()) })
			return b
		}
		first, second := open(), open()
		return contract.Harness{Backend: first, Second: second, Audit: first}
	})
}
