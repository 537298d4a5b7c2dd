package sqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/scalebench"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// BenchmarkScale measures list, list --owner, get and acquire on N keys of
// which 99% expired and were set aside by the sweeper, beside the same on N
// keys none of which expired, the two in turn (see package scalebench).
// Sizes: LEASESTORE_BENCH_SCALE.
func BenchmarkScale(b *testing.B) {
	for _, n := range scalebench.Sizes(b) {
		var stores []protocol.Backend
		for _, fixture := range scalebench.Fixtures {
			path := migratedFile(b)
			raw, err := sqlite.OpenDB(path)
			if err != nil {
				b.Fatal(err)
			}
			now := time.Now().UnixMicro()
			if _, err := raw.ExecContext(context.Background(), `
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?2)
INSERT INTO leasestore_leases (namespace, name, owner, token, acquired_at, renewed_at, expires_at, version, swept_token)
SELECT 'ns', printf('key-%09d', i), 'w' || (i / 100 % 97), i, ?1 - 7200000000, ?1 - 7200000000,
       CASE WHEN i % 100 = 0 OR NOT ?3 THEN ?1 + 86400000000 ELSE ?1 - 60000000 END, 1,
       CASE WHEN i % 100 = 0 OR NOT ?3 THEN NULL ELSE i END
FROM n`, now, n, fixture == "dead"); err != nil {
				b.Fatal(err)
			}
			if _, err := raw.ExecContext(ctxT(b), `UPDATE leasestore_fencing SET last_token = ?`, n); err != nil {
				b.Fatal(err)
			}
			_ = raw.Close()
			stores = append(stores, open(b, path, nil))
		}
		scalebench.Run(b, stores, n)
	}
}
