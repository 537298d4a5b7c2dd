package postgres_test

import (
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// A connection keeps the generic plan it made of a statement after five
// executions, until the tables' statistics change. Made while the tables
// were analyzed empty (a fresh deployment once autovacuum first analyzed
// them, or a trail pruned to nothing), a plan that scans them in full
// is the cheapest; as they grow, every acquire and release read the whole
// trail for its request id (a time that grows with the trail) until autovacuum
// analyzed them again. The backend's connections must not read the trail
// or the leases in full whatever the statistics said when the plan was
// made. (Such a plan may still find the key's row through the live index
// instead of the primary key, reading the namespace's entries in it: not
// a full scan, but not a key look-up either.)
func TestPlansIgnoreStatisticsOfEmptyTables(t *testing.T) {
	dsn := pgtest.MigratedDSN(t)
	admin := rawPool(t, dsn)
	mustExec(t, admin, `ANALYZE leasestore_leases`)
	mustExec(t, admin, `ANALYZE leasestore_audit`)
	b := openBackend(t, dsn, &postgres.Config{MaxConns: 2, NoCoalescing: true})
	ctx := ctxT(t)
	for i := range 10 { // past the plan cache's five custom plans
		k := key("early-" + string(rune('a'+i)))
		res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: "o", TTL: time.Minute, RequestID: protocol.RandomRequestID()})
		wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
		res, err = b.Release(ctx, protocol.ReleaseRequest{Key: k, Owner: "o", Token: res.Lease.Token, RequestID: protocol.RandomRequestID()})
		wantStatus(t, "release", res, err, protocol.StatusReleased)
	}
	// Growth before the next ANALYZE (autovacuum is not that fast).
	mustExec(t, admin, `INSERT INTO leasestore_audit (id, at, op, namespace, name, owner, token, request_id, actor, reason,
		status, version, params_hash)
		SELECT -i, now(), 'acquire', 'ns', 'grown-' || i, 'o', i, 'grown-' || i, 'o', '', 'acquired', 1, ''
		FROM generate_series(1, 20000) AS i`)
	mustExec(t, admin, `INSERT INTO leasestore_leases (namespace, name, owner, token, acquired_at, renewed_at, expires_at, version)
		SELECT 'ns', 'grown-' || i, 'o', i, now(), now(), now(), 1 FROM generate_series(1, 20000) AS i`)

	conn, err := b.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, c := range []struct {
		op     protocol.Op
		params string
	}{
		{protocol.OpAcquire, `('ns', 'probe', 'probe-acquire', NULL, 1, 'o', '1 minute', '0', 1, '')`},
		{protocol.OpRelease, `('ns', 'early-a', NULL, 'o', 1, 1, 'probe-release', 1, '')`},
	} {
		var name string
		var generic int64
		if err := conn.QueryRow(ctx, `SELECT name, generic_plans FROM pg_prepared_statements WHERE statement = $1`,
			postgres.ChangeStatementSQL(c.op)).Scan(&name, &generic); err != nil {
			t.Fatalf("%s: the connection's prepared statement: %v", c.op, err)
		}
		if generic == 0 {
			t.Fatalf("%s: the connection made no generic plan: the case this test is about did not arise", c.op)
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := tx.Query(ctx, `EXPLAIN (ANALYZE, COSTS OFF) EXECUTE "`+name+`"`+c.params)
		if err != nil {
			t.Fatalf("%s: %v", c.op, err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("%s: %v", c.op, err)
		}
		_ = tx.Rollback(ctx)
		text := strings.Join(plan, "\n")
		// With -v the plan and its execution time are shown:
		// docs/postgres-settings.md quotes them.
		t.Logf("%s, the connection's generic plan after growth:\n%s", c.op, text)
		for _, table := range []string{"leasestore_audit", "leasestore_leases"} {
			if strings.Contains(text, "Seq Scan on "+table+" ") {
				t.Errorf("%s: after growth the connection's generic plan still scans %s in full:\n%s", c.op, table, text)
			}
		}
	}
}

// Health (every readiness probe of a served store), Open, the sequence's
// repair and fencing raise read the greatest token in leasestore_leases.
// Read by a full scan, a health check took about 0.3 s at 2 million rows
// and, at that rate, about 1.5 s at ten million (not measured), longer
// than a readiness probe waits by default; the token index (migration 6)
// answers it from one page. The table is grown and analyzed, so the
// planner weighs a scan at its real cost.
func TestGreatestTokenIsReadWithoutAFullScan(t *testing.T) {
	dsn := pgtest.MigratedDSN(t)
	admin := rawPool(t, dsn)
	mustExec(t, admin, `INSERT INTO leasestore_leases (namespace, name, owner, token, acquired_at, renewed_at, expires_at, version)
		SELECT 'ns', 'grown-' || i, 'o', i, now(), now(), now(), 1 FROM generate_series(1, 20000) AS i`)
	mustExec(t, admin, `SELECT setval('leasestore_fencing_seq', 20000)`)
	mustExec(t, admin, `ANALYZE leasestore_leases`)
	b := openBackend(t, dsn, &postgres.Config{MaxConns: 2, NoCoalescing: true})
	ctx := ctxT(t)
	if err := b.Health(ctx); err != nil {
		t.Fatalf("health: %v", err)
	}
	plans, err := b.TokenReadPlans(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"settings", "repair", "raise"} {
		plan := plans[name]
		if !strings.Contains(plan, "leasestore_leases_token") {
			t.Errorf("%s: the plan does not read the token index:\n%s", name, plan)
		}
		if strings.Contains(plan, "Seq Scan on leasestore_leases ") {
			t.Errorf("%s: the plan reads leasestore_leases in full:\n%s", name, plan)
		}
	}
}
