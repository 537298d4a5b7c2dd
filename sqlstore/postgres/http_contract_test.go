package postgres_test

import (
	"context"
	"testing"

	"github.com/leasestore/leasestore/contract"
	"github.com/leasestore/leasestore/internal/testkit/httpcontract"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// TestContractOverHTTP runs the contract suite through the HTTP API: each
// case's two handles are httpapi clients of two servers on loopback ports,
// each serving a backend with a pool of its own on one fresh schema.
func TestContractOverHTTP(t *testing.T) {
	contract.Run(t, func(t *testing.T, clock *contract.Clock) contract.Harness {
		dsn := pgtest.MigratedDSN(t)
		open := func() *postgres.Backend {
			b, err := postgres.Open(context.Background(), dsn, postgres.WithTestClock(&postgres.Config{MaxConns: 8}, clock.Now))
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			// Closing again is a no-op, and makes sure no pool outlives
			// the schema if the suite fails early.
			t.Cleanup(func() { _ = b.Close(context.Background()) })
			return b
		}
		first, second := open(), open()
		return httpcontract.Harness(t, first, second, first)
	})
}

// TestWaitOverHTTPIsWoken: a waiter over HTTP is woken by a release
// through another server (a pool of its own, as another process's) on the
// schema, not by its 30s re-check.
func TestWaitOverHTTPIsWoken(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	httpcontract.Woken(t, openBackend(t, dsn, nil), openBackend(t, dsn, nil))
}
