package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/internal/testkit/scalebench"
	"github.com/leasestore/leasestore/protocol"
)

// BenchmarkScale measures list, list --owner, get and acquire on N keys of
// which 99% expired and were set aside by the sweeper, beside the same on N
// keys none of which expired, the two in turn (see package scalebench).
// Sizes: LEASESTORE_BENCH_SCALE.
func BenchmarkScale(b *testing.B) {
	for _, n := range scalebench.Sizes(b) {
		var stores []protocol.Backend
		for _, fixture := range scalebench.Fixtures {
			dsn := pgtest.MigratedDSN(b)
			be := openBackend(b, dsn, nil)
			raw := rawPool(b, dsn)
			// Live keys are spread among the dead ones: every 100th name.
			fill, cancel := context.WithTimeout(context.Background(), time.Hour)
			if _, err := raw.Exec(fill, fmt.Sprintf(`
INSERT INTO leasestore_leases (namespace, name, owner, token, acquired_at, renewed_at, expires_at, version, swept_token)
SELECT 'ns', 'key-' || lpad(i::text, 9, '0'), 'w' || (i / 100 %% 97), i,
       now() - interval '2 hours', now() - interval '2 hours',
       CASE WHEN i %% 100 = 0 OR NOT %[2]t THEN now() + interval '1 day' ELSE now() - interval '1 minute' END, 1,
       CASE WHEN i %% 100 = 0 OR NOT %[2]t THEN NULL ELSE i END
FROM generate_series(1, %[1]d) AS i`, n, fixture == "dead")); err != nil {
				b.Fatal(err)
			}
			if _, err := raw.Exec(fill, "VACUUM ANALYZE leasestore_leases"); err != nil {
				b.Fatal(err)
			}
			cancel()
			mustExec(b, raw, fmt.Sprintf("SELECT setval('leasestore_fencing_seq', %d)", n))
			stores = append(stores, be)
		}
		scalebench.Run(b, stores, n)
	}
}
