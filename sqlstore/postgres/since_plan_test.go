package postgres_test

import (
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
)

// TestSinceStartChecksThroughBothBRINIndexes: the since read's check that
// no record at or before the id its search found is at or after the time
// reads the block ranges that both BRIN indexes (times, ids: migration 12)
// leave, whether the plan is made with the values or generic (as a
// connection keeps it after five executions), never the primary key in id
// order or every record since the time. On a trail of 200,000 records
// analyzed, where the primary key looks cheap to the planner.
func TestSinceStartChecksThroughBothBRINIndexes(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	raw := rawPool(t, dsn)
	ctx := ctxT(t)
	if _, err := raw.Exec(ctx, `
		INSERT INTO leasestore_audit (id, at, op, namespace, name, owner, token, request_id, actor, reason,
		                              status, version, params_hash, expires_at, acquired_at, renewed_at)
		SELECT i, now() - ((200000 - i) * interval '10 milliseconds'), 'renew', 'bench', 'k' || (i % 1000), 'w',
		       i, 'r' || i, 'w', '', 'renewed', 1, md5(i::text), now(), now(), now()
		FROM generate_series(1, 200000) AS i`); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(ctx, "VACUUM ANALYZE leasestore_audit"); err != nil {
		t.Fatal(err)
	}
	b := openBackend(t, dsn, nil)
	for _, generic := range []bool{false, true} {
		for _, back := range []time.Duration{5 * time.Minute, 20 * time.Minute} {
			plan, err := b.SinceStartPlan(ctx, time.Now().Add(-back), generic)
			if err != nil {
				t.Fatal(err)
			}
			_, check, ok := strings.Cut(plan, "Aggregate")
			if !ok || !strings.Contains(check, "BitmapAnd") ||
				!strings.Contains(check, "Bitmap Index Scan on leasestore_audit_at_brin") ||
				!strings.Contains(check, "Bitmap Index Scan on leasestore_audit_id_brin") ||
				strings.Contains(check, "leasestore_audit_pkey") {
				t.Errorf("plan (generic: %v) of a read since %v ago: the check does not read through both BRIN indexes:\n%s", generic, back, plan)
			}
		}
	}
}
