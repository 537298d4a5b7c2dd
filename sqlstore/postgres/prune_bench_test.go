package postgres_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// BenchmarkPruneBesideLiveLeases prunes a trail of 200,000 records of
// ended leases up to the store's time, with 0 or 50,000 live leases whose
// acquire records lie before the cut-off, at the front of the trail, and
// stay (a retry of the acquire replays from them). Each op is one whole
// prune on a fresh, analyzed schema filled with raw rows (the triggers
// allow INSERT); removed-ns/op is its time per record removed.
//
//	LEASESTORE_TEST_POSTGRES_DSN=... go test -run '^$' -bench PruneBesideLiveLeases -benchtime 1x -count 3 ./sqlstore/postgres/
func BenchmarkPruneBesideLiveLeases(b *testing.B) {
	if os.Getenv(pgtest.EnvDSN) == "" {
		b.Skipf("set %s to run the PostgreSQL benchmarks", pgtest.EnvDSN)
	}
	const removed = 200_000
	for _, kept := range []int{0, 50_000} {
		b.Run(fmt.Sprintf("removed=%d/kept=%d", removed, kept), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				dsn := pgtest.MigratedDSN(b)
				raw := rawPool(b, dsn)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				for _, q := range []string{
					`INSERT INTO leasestore_leases (namespace, name, owner, token, acquired_at, renewed_at, expires_at, version)
					 SELECT 'bench', 'live' || i, 'w', i, now() - interval '1 hour', now() - interval '1 hour', now() + interval '1 hour', 1
					 FROM generate_series(1, $1::bigint) AS i`,
					`INSERT INTO leasestore_audit (id, at, op, namespace, name, owner, token, request_id, actor, reason,
					                              status, version, params_hash, expires_at, acquired_at, renewed_at)
					 SELECT i, now() - interval '1 hour', 'acquire', 'bench', 'live' || i, 'w', i, 'a' || i, 'w', '',
					        'acquired', 1, md5(i::text), now() + interval '1 hour', now() - interval '1 hour', now() - interval '1 hour'
					 FROM generate_series(1, $1::bigint) AS i`,
					`INSERT INTO leasestore_audit (id, at, op, namespace, name, owner, token, request_id, actor, reason,
					                              status, version, params_hash)
					 SELECT $1::bigint + i, now() - interval '1 hour', 'release', 'bench', 'gone' || i, 'w', $1::bigint + i, 'r' || i, 'w', '',
					        'released', 1, md5(i::text)
					 FROM generate_series(1, $2::bigint) AS i`,
					`SELECT setval('leasestore_fencing_seq', $1::bigint + $2::bigint)`,
					`ANALYZE leasestore_leases`,
					`ANALYZE leasestore_audit`,
				} {
					var err error
					if n := countArgs(q); n == 0 {
						_, err = raw.Exec(ctx, q)
					} else if n == 1 {
						_, err = raw.Exec(ctx, q, kept)
					} else {
						_, err = raw.Exec(ctx, q, kept, removed)
					}
					if err != nil {
						b.Fatalf("fill: %v", err)
					}
				}
				be := openBackend(b, dsn, (*postgres.Config)(nil))
				now := time.Now()
				b.StartTimer()
				res, err := be.PruneAudit(ctx, audit.PruneRequest{Before: now, RequestID: protocol.NewRequestID(), Actor: "bench"})
				b.StopTimer()
				cancel()
				if err != nil || res.Removed != removed {
					b.Fatalf("prune: removed %d, %v; want %d", res.Removed, err, removed)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/removed, "removed-ns/op")
		})
	}
}

// countArgs is how many of $1 and $2 q uses.
func countArgs(q string) int {
	switch {
	case strings.Contains(q, "$2"):
		return 2
	case strings.Contains(q, "$1"):
		return 1
	}
	return 0
}
