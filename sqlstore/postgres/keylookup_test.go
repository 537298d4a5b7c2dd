package postgres_test

import (
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
)

// TestKeyChangesDoNotScanTheOwnersRows: renew and release name the key and
// its holder. They must find the row through the key (the primary key),
// whatever the planner knows of the table: the owner index, which serves
// lists by owner, holds the key after a column it cannot use for a key
// look-up, so a statement that went through it read every row the owner
// ever had in the namespace (tombstones included). It did on a table that
// was never analyzed, as under autovacuum=off: a worker that had released
// 12,500 keys read 12,500 index entries for each renew and release.
func TestKeyChangesDoNotScanTheOwnersRows(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	raw := rawPool(t, dsn)
	// Never analyzed, as on a server with autovacuum off.
	mustExec(t, raw, `ALTER TABLE leasestore_leases SET (autovacuum_enabled = false)`)
	// 100,000 keys that 8 workers took and released: tombstones that keep
	// their holder's name, 12,500 for each worker. (The planner's choice
	// depends on the table's size: on 20,000 rows it took the primary key.)
	mustExec(t, raw, `INSERT INTO leasestore_leases (namespace, name, owner, token, acquired_at, renewed_at, expires_at, version)
		SELECT 'ns', 'job-' || i, 'worker-' || (i % 8), i, now() - interval '1 min', now() - interval '1 min',
		       now() + interval '1 min', 1
		FROM generate_series(1, 100000) AS i`)
	mustExec(t, raw, `UPDATE leasestore_leases SET ended_token = token, ended_expiry = expires_at, expires_at = now()`)
	mustExec(t, raw, "SELECT setval('leasestore_fencing_seq', 100000)")
	b := openBackend(t, dsn, nil)
	ctx := ctxT(t)
	const owner = "worker-1"
	live := key("job-live")
	res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: live, Owner: owner, TTL: time.Minute, RequestID: "a-live"})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)

	for _, op := range []protocol.Op{protocol.OpRenew, protocol.OpRelease} {
		for _, mode := range []string{"auto", "force_generic_plan", "force_custom_plan"} {
			plan, err := b.KeyChangePlan(ctx, op, live, owner, res.Lease.Token, mode)
			if err != nil {
				t.Fatalf("%s plan (%s): %v", op, mode, err)
			}
			st := readPlan(t, plan)
			blocks, indexes := st.blocks, st.indexes
			for _, ix := range indexes {
				if strings.HasPrefix(ix, "leasestore_leases") && ix != "leasestore_leases_pkey" {
					t.Errorf("%s (plan_cache_mode %s) found the key through %s; want leasestore_leases_pkey", op, mode, ix)
				}
			}
			if blocks > 40 {
				t.Errorf("%s (plan_cache_mode %s) touched %d blocks through %v; want a handful", op, mode, blocks, indexes)
			}
		}
	}
}
