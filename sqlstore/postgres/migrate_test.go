package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// objectsPresent counts which of leasestore's objects exist in the schema of
// dsn's connections.
func objectsPresent(t *testing.T, dsn string) int {
	t.Helper()
	return count(t, rawPool(t, dsn), `SELECT
		(to_regclass('leasestore_leases') IS NOT NULL)::int +
		(to_regclass('leasestore_audit') IS NOT NULL)::int +
		(to_regclass('leasestore_fencing_seq') IS NOT NULL)::int +
		(to_regprocedure('leasestore_audit_refuse()') IS NOT NULL)::int +
		(to_regprocedure('leasestore_outcome(text, text, text)') IS NOT NULL)::int +
		(to_regclass('leasestore_compat') IS NOT NULL)::int +
		(to_regprocedure('leasestore_outcome_fresh(text, text, text)') IS NOT NULL)::int`)
}

func TestMigrationsUpDownUp(t *testing.T) {
	dsn := pgtest.DSN(t)
	db := sqlDB(t, dsn)
	ctx := ctxT(t)
	for round := range 2 {
		res, err := migrations.Up(ctx, migrations.Postgres, db)
		if err != nil {
			t.Fatalf("round %d: up: %v", round, err)
		}
		if len(res) != migrations.LatestVersion {
			t.Fatalf("round %d: up applied %d migrations, want %d", round, len(res), migrations.LatestVersion)
		}
		if n := objectsPresent(t, dsn); n != 7 {
			t.Fatalf("round %d: %d of 7 objects after up", round, n)
		}
		b, err := postgres.Open(ctx, dsn, nil)
		if err != nil {
			t.Fatalf("round %d: open after up: %v", round, err)
		}
		r, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute, RequestID: "a"})
		wantStatus(t, "acquire", r, err, protocol.StatusAcquired)
		if r.Lease.Token != 1 {
			t.Fatalf("round %d: first token %d, want 1 on a fresh schema", round, r.Lease.Token)
		}
		_ = b.Close(ctx)

		st, err := migrations.Status(ctx, migrations.Postgres, db)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range st {
			if s.State != "applied" {
				t.Fatalf("round %d: migration %d is %s", round, s.Source.Version, s.State)
			}
		}
		for range migrations.LatestVersion {
			if _, err := migrations.Down(ctx, migrations.Postgres, db, migrations.DestroyData()); err != nil {
				t.Fatalf("round %d: down: %v", round, err)
			}
		}
		if n := objectsPresent(t, dsn); n != 0 {
			t.Fatalf("round %d: %d objects remain after down", round, n)
		}
		if _, err := postgres.Open(ctx, dsn, nil); err == nil {
			t.Fatalf("round %d: open after down succeeded", round)
		}
	}
	if _, err := migrations.Up(ctx, migrations.Postgres, db); err != nil {
		t.Fatal(err)
	}
	openOK(t, dsn)
}

// TestConcurrentMigrators runs two migrations of one schema at once, each
// on its own connection pool, as two deploys would: both succeed, and the
// schema is migrated once.
func TestConcurrentMigrators(t *testing.T) {
	dsn := pgtest.DSN(t)
	dbs := []*sql.DB{sqlDB(t, dsn), sqlDB(t, dsn)}
	var (
		wg      sync.WaitGroup
		errs    = make([]error, len(dbs))
		applied = make([]int, len(dbs))
		start   = make(chan struct{})
	)
	for i := range dbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := migrations.Up(ctx, migrations.Postgres, dbs[i])
			errs[i], applied[i] = err, len(res)
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("migrator %d: %v", i, err)
		}
	}
	if applied[0]+applied[1] != migrations.LatestVersion {
		t.Fatalf("the migrators applied %v migrations, want %d in all", applied, migrations.LatestVersion)
	}
	raw := rawPool(t, dsn)
	if n := count(t, raw, "SELECT count(*) FROM "+migrations.VersionTable+" WHERE version_id = $1", migrations.LatestVersion); n != 1 {
		t.Fatalf("version %d recorded %d times, want once", migrations.LatestVersion, n)
	}
	if n := objectsPresent(t, dsn); n != 7 {
		t.Fatalf("%d of 7 objects", n)
	}
	openOK(t, dsn)
}

// TestReadAuditHoldsBackBehindAnOpenWriter: a follower reads only below the
// oldest transaction in progress, so a record whose writer has not
// committed holds back every later one, and so does any transaction with
// an id that began before them (the follower cannot tell whether it will
// write the trail): the page says HeldBack instead of skipping.
func TestReadAuditHoldsBackBehindAnOpenWriter(t *testing.T) {
	dsn := pgtest.MigratedDSN(t)
	b := openBackend(t, dsn, nil)
	ctx := ctxT(t)

	// An unrelated transaction with a transaction id, open for a while.
	bystander, err := rawConn(t, dsn).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = bystander.Rollback(context.Background()) }()
	mustExec(t, bystander, "SELECT pg_current_xact_id()")

	writer, err := rawConn(t, dsn).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = writer.Rollback(context.Background()) }()
	mustExec(t, writer, `INSERT INTO leasestore_audit (id, at, op, namespace, name, owner, token, request_id, actor,
		reason, status, version, params_hash, expires_at)
		VALUES (pg_current_xact_id()::text::bigint, now(), 'acquire', 'ns', 'early', 'w', 1000, 'early', 'w', '',
		'acquired', 1, 'x', now() + interval '1 minute')`)

	res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("late"), Owner: "o", TTL: time.Minute, RequestID: "late"})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	page, err := b.ReadAudit(ctx, audit.Query{Namespace: "ns", Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Records) != 0 || !page.HeldBack {
		t.Fatalf("follower read %+v (held back %v) while an earlier record was uncommitted, want nothing yet, held back",
			page.Records, page.HeldBack)
	}
	// A plain read sees what is committed: the caller's own write.
	page, err = b.ReadAudit(ctx, audit.Query{Namespace: "ns"})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Records) != 1 || page.Records[0].RequestID != "late" {
		t.Fatalf("plain read %+v, want the committed late record", page.Records)
	}

	if err := writer.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// The bystander began before both: still nothing.
	page, err = b.ReadAudit(ctx, audit.Query{Namespace: "ns", Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Records) != 0 || !page.HeldBack {
		t.Fatalf("follower read %+v (held back %v) behind an older open transaction, want nothing yet, held back",
			page.Records, page.HeldBack)
	}
	if err := bystander.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// Now the follower gets both, in id order. Other tests share the
	// server, and their transactions may hold the horizon back for a
	// moment: read again, as a follower does; it must never see the late
	// record without the early one.
	deadline := time.Now().Add(10 * time.Second)
	for {
		page, err = b.ReadAudit(ctx, audit.Query{Namespace: "ns", Follow: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Records) > 0 && page.Records[0].RequestID != "early" {
			t.Fatalf("follower read %+v: the late record without the early one", page.Records)
		}
		if len(page.Records) == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(page.Records) != 2 || page.Records[0].RequestID != "early" || page.Records[1].RequestID != "late" ||
		page.Records[0].ID >= page.Records[1].ID || page.HeldBack {
		t.Fatalf("read %+v (held back %v), want the early then the late record", page.Records, page.HeldBack)
	}
	// Paging by cursor resumes after the last record seen.
	page, err = b.ReadAudit(ctx, audit.Query{Namespace: "ns", Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Records) != 1 || page.NextCursor == "" {
		t.Fatalf("first page %+v", page)
	}
	next, err := b.ReadAudit(ctx, audit.Query{Namespace: "ns", Limit: 1, Cursor: page.NextCursor})
	if err != nil {
		t.Fatal(err)
	}
	if len(next.Records) != 1 || next.Records[0].RequestID != "late" || next.NextCursor != "" {
		t.Fatalf("second page %+v", next)
	}
}

// leasectl migrate status and down on a schema that was never migrated
// must not write: goose would create its version table on first contact,
// which is migrating implicitly.
func TestStatusAndDownOfAnUnmigratedSchemaWriteNothing(t *testing.T) {
	dsn := pgtest.DSN(t)
	db := sqlDB(t, dsn)
	ctx := ctxT(t)
	st, err := migrations.Status(ctx, migrations.Postgres, db)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != migrations.LatestVersion || st[0].State != "pending" {
		t.Fatalf("status of an empty schema: %+v", st)
	}
	if _, err := migrations.Down(ctx, migrations.Postgres, db); !errors.Is(err, migrations.ErrNothingApplied) {
		t.Fatalf("down on an empty schema: %v, want ErrNothingApplied", err)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_catalog.pg_class c
		JOIN pg_catalog.pg_namespace s ON s.oid = c.relnamespace WHERE s.nspname = current_schema()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("status and down created %d relations in an unmigrated schema", n)
	}
}

// Migration 9's leasestore_outcome_fresh, which every change statement
// names, may be executed by whoever may execute leasestore_outcome: where
// the schema's owner makes new functions private (ALTER DEFAULT PRIVILEGES
// ... REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC) and granted the store's
// functions to the application's role by hand, that role serves schema 9
// as it served 8 (without the grant every change failed: permission denied
// for function leasestore_outcome_fresh).
func TestFreshOutcomeHasTheOutcomesGrants(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	ownerDSN := pgtest.RoleDSN(t, dsn)
	ctx := ctxT(t)
	owner := rawConn(t, ownerDSN)
	mustExec(t, owner, "ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC")
	p, err := migrations.NewProvider(ctx, migrations.Postgres, sqlDB(t, ownerDSN))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 8); err != nil {
		t.Fatal(err)
	}
	appDSN := pgtest.GrantedRoleDSN(t, dsn, grantTables, grantSeqUsage)
	u, err := url.Parse(appDSN)
	if err != nil {
		t.Fatal(err)
	}
	app := u.User.Username()
	mustExec(t, owner, "GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA "+pgx.Identifier{schemaOf(t, dsn)}.Sanitize()+
		" TO "+pgx.Identifier{app}.Sanitize())
	if _, err := p.Up(ctx); err != nil { // through version 9, which made leasestore_outcome_fresh
		t.Fatal(err)
	}
	may := func(role string) bool {
		var ok bool
		if err := owner.QueryRow(ctx, `SELECT has_function_privilege($1, 'leasestore_outcome_fresh(text, text, text)', 'EXECUTE')`,
			role).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !may(app) {
		t.Fatal("the role that may execute leasestore_outcome may not execute leasestore_outcome_fresh")
	}
	other := pgtest.GrantedRoleDSN(t, dsn, grantTables)
	if u, err = url.Parse(other); err != nil {
		t.Fatal(err)
	}
	if may(u.User.Username()) {
		t.Fatal("a role that may not execute leasestore_outcome may execute leasestore_outcome_fresh")
	}
	b := openBackend(t, appDSN, nil)
	res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute, RequestID: "a1"})
	wantStatus(t, "acquire as the application's role", res, err, protocol.StatusAcquired)
	res, err = b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "p", TTL: time.Minute, RequestID: "a2"})
	wantStatus(t, "acquire of a held key as the application's role", res, err, protocol.StatusConflict)
}
