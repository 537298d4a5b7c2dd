package postgres_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// cycleKeys is how many keys BenchmarkGuaranteeCost cycles through. Each
// starts as a tombstone, as a key a deployment uses again does: an acquire
// updates the key's row, where the raw pair inserts one.
const cycleKeys = 4096

// BenchmarkGuaranteeCost prices what the backend's acquire and release do
// beyond the raw pair, on one connection (no coalescing): an op is one
// cycle, an acquire and its release, through the backend's own path (the
// same Go work) with the statements as they are (full), with one part cut
// out (without=PART, see postgres.PartKeyLock and the others; live-indexes
// drops the two indexes lists and the sweeper read), with all of them cut,
// and the raw pair beside them. pg-cpu-us/op is the figure to compare: the
// server's CPU per cycle, much steadier than wall time on a shared
// machine; a part's price is full minus without=PART. Each cut removes a
// guarantee, so none of these variants is a configuration: they only say
// where the time goes.
//
//	go test -run '^$' -bench GuaranteeCost -benchtime 3000x -count 3 ./sqlstore/postgres/
func BenchmarkGuaranteeCost(b *testing.B) {
	all := []string{postgres.PartKeyLock, postgres.PartRequestCheck, postgres.PartAuditID, postgres.PartWake}
	variants := []struct {
		name     string
		parts    []string
		dropLive bool
	}{
		{name: "full"},
		{name: "without=" + postgres.PartKeyLock, parts: all[0:1]},
		{name: "without=" + postgres.PartRequestCheck, parts: all[1:2]},
		{name: "without=" + postgres.PartAuditID, parts: all[2:3]},
		{name: "without=" + postgres.PartWake, parts: all[3:4]},
		{name: "without=live-indexes", dropLive: true},
		{name: "without=all", parts: all, dropLive: true},
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			env := newCycleEnv(b, v.dropLive)
			cycle := postgres.CycleWithout(v.parts...)
			runWorkers(b, env.b.Pool(), 1, func(_, i int) error {
				ctx, cancel := benchCtx()
				defer cancel()
				return cycle.Run(ctx, env.b, key(fmt.Sprintf("k-%d", i%cycleKeys)), "o")
			})
		})
	}
	b.Run("raw", func(b *testing.B) {
		env := newCycleEnv(b, false)
		ttl := benchInterval(time.Minute)
		runWorkers(b, env.pool, 1, func(_, i int) error {
			ctx, cancel := benchCtx()
			defer cancel()
			name := fmt.Sprintf("k-%d", i%cycleKeys)
			var (
				owner   string
				token   int64
				a, r, e time.Time
			)
			if err := env.pool.QueryRow(ctx, rawAcquireSQL, "ns", name, "o", ttl, protocol.RandomRequestID(), "").
				Scan(&owner, &token, &a, &r, &e); err != nil {
				return fmt.Errorf("raw acquire of %s: %w", name, err)
			}
			if err := env.pool.QueryRow(ctx, rawReleaseSQL, "ns", name, "o", token, protocol.RandomRequestID(), "").
				Scan(&owner, &token, &a, &r, &e); err != nil {
				return fmt.Errorf("raw release of %s: %w", name, err)
			}
			return nil
		})
	})
}

// newCycleEnv is a benchmark schema whose cycleKeys keys are tombstones
// (for the raw pair, which deletes on release, the keys are absent) and
// whose trail holds 20,000 records, its statistics analyzed; with
// dropLive, without the live indexes.
func newCycleEnv(b *testing.B, dropLive bool) benchEnv {
	b.Helper()
	env := newBenchEnv(b, 1)
	ctx, cancel := benchCtx()
	defer cancel()
	// A trail already holding records (ids below any the statements make)
	// and its statistics, as a store in use has: see
	// TestPlansIgnoreStatisticsOfEmptyTables for what plans made on an
	// empty one do.
	steps := []string{`INSERT INTO leasestore_audit (id, at, op, namespace, name, owner, token, request_id, actor, reason,
		status, version, params_hash)
		SELECT -i, now(), 'acquire', 'ns', 'seed-' || i, 'o', i, 'seed-' || i, 'o', '', 'acquired', 1, ''
		FROM generate_series(1, 20000) AS i`}
	if b.Name() != "BenchmarkGuaranteeCost/raw" {
		steps = append(steps, fmt.Sprintf(`INSERT INTO leasestore_leases
			(namespace, name, owner, token, acquired_at, renewed_at, expires_at, version, ended_token, ended_expiry)
			SELECT 'ns', 'k-' || i, 'o', i + 1, now(), now(), now(), 1, i + 1, now()
			FROM generate_series(0, %d) AS i`, cycleKeys-1),
			fmt.Sprintf(`SELECT setval('leasestore_fencing_seq', %d)`, cycleKeys))
	}
	if dropLive {
		steps = append(steps, `DROP INDEX leasestore_leases_live`, `DROP INDEX leasestore_leases_owner_live`)
	}
	steps = append(steps, `ANALYZE leasestore_leases`, `ANALYZE leasestore_audit`)
	for _, sql := range steps {
		if _, err := env.pool.Exec(ctx, sql); err != nil {
			b.Fatalf("%s: %v", sql, err)
		}
	}
	return env
}
