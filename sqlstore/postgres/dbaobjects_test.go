package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/contract"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// What a DBA may do to the store's tables and sequence beyond the settings
// and triggers of rolesettings_test.go and dbachanges_test.go: each is
// made harmless or refused by Open and Health, naming the fix.

// wantRefused fails unless err is unavailable and names fix.
func wantRefused(t *testing.T, what string, err error, fix string) {
	t.Helper()
	if err == nil || !errors.Is(err, protocol.ErrUnavailable) || !strings.Contains(err.Error(), fix) {
		t.Fatalf("%s: %v; want unavailable naming %q", what, err, fix)
	}
}

// eraRowUnseen are the two ways a session comes to see no row of
// leasestore_audit_era: row-level security enabled on the table for a role
// that does not own it (a DBA's common baseline), or the row deleted.
var eraRowUnseen = []struct{ name, ddl string }{
	{"row-level security on the era table", "ALTER TABLE leasestore_audit_era ENABLE ROW LEVEL SECURITY"},
	{"the era's row deleted", "DELETE FROM leasestore_audit_era"},
}

// A change's audit record takes its id from leasestore_audit_era's one
// row. A session that cannot see that row (row-level security enabled on
// the table for a role that does not own it, a DBA's common baseline, or
// the row deleted) must not change a lease without its record: the change
// and its record are one atomic step, and a request id's retry is answered
// from the record. The acquire answered acquired and left no record, and
// its retry after the release acquired the key again with a new token.
func TestChangesAreNeverCommittedWithoutTheirRecord(t *testing.T) {
	t.Parallel()
	for _, c := range eraRowUnseen {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dsn := pgtest.MigratedDSN(t)
			b := openBackend(t, pgtest.GrantedRoleDSN(t, dsn, grantTables, grantSeqUsage), &postgres.Config{NoCoalescing: true})
			owner := rawConn(t, dsn)
			mustExec(t, owner, c.ddl)
			healthErr := b.Health(ctxT(t))
			req := protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute, RequestID: "a1"}
			res, err := b.Acquire(ctxT(t), req)
			if err != nil {
				// Refused: nothing may have changed.
				if n := count(t, owner, "SELECT count(*) FROM leasestore_leases"); n != 0 {
					t.Fatalf("the refused acquire (%v) left %d rows", err, n)
				}
				return
			}
			wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
			if n := count(t, owner, "SELECT count(*) FROM leasestore_audit WHERE request_id = 'a1'"); n != 1 {
				rel, rerr := b.Release(ctxT(t), protocol.ReleaseRequest{Key: key("k"), Owner: "o", Token: res.Lease.Token, RequestID: "r1"})
				again, aerr := b.Acquire(ctxT(t), req)
				t.Fatalf("the acquire answered acquired (token %d) and the trail holds %d records of it (health: %v); "+
					"after a release (%s, %v) its retry answered %s token %d replayed=%v (%v)",
					res.Lease.Token, n, healthErr, rel.Status, rerr, again.Status, again.Lease.Token, again.Replayed, aerr)
			}
		})
	}
}

// The coalesced path of TestChangesAreNeverCommittedWithoutTheirRecord:
// acquires queued into one batch, after leasestore_audit_era's row was
// deleted, each failed in the batch function (their members could not
// write a record) and ran again alone, where each was committed without
// its record. Each must fail in the batch itself, naming the era's row,
// and leave nothing. The keys are the test's own: advisory locks are the
// database's.
func TestCoalescedChangesAreNeverCommittedWithoutTheirRecord(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	b := openBackend(t, dsn, postgres.WithHeldQueue(&postgres.Config{MaxInFlight: 1}))
	owner := rawConn(t, dsn)
	names := []string{"rec-" + protocol.RandomRequestID()[:12], "rec-" + protocol.RandomRequestID()[:12]}
	ops := []queuedOp{{name: "delete", inline: true, run: func(context.Context) (protocol.Result, error) {
		// After batchOf's blocker read the era's row: it commits with its record.
		mustExec(t, owner, "DELETE FROM leasestore_audit_era")
		return protocol.Result{}, nil
	}}}
	for _, name := range names {
		ops = append(ops, queuedOp{name: name, run: func(ctx context.Context) (protocol.Result, error) {
			return b.Acquire(ctx, protocol.AcquireRequest{Key: key(name), Owner: "o", TTL: time.Minute, RequestID: name})
		}})
	}
	_, _, aloneBefore := postgres.CoalesceStats(b)
	got := batchOf(t, dsn, b, ops...)
	_, _, aloneAfter := postgres.CoalesceStats(b)
	for _, name := range names {
		a := got[name]
		n := count(t, owner, "SELECT count(*) FROM leasestore_audit WHERE request_id = $1", name)
		if a.err == nil && a.res.Status == protocol.StatusAcquired && n != 1 {
			t.Fatalf("%s: the coalesced acquire answered acquired (token %d, replayed=%v) and the trail holds %d records of it",
				name, a.res.Lease.Token, a.res.Replayed, n)
		}
		wantRefused(t, name+": the coalesced acquire without the era's row", a.err, "leasestore_audit_era")
		if rows := count(t, owner, "SELECT count(*) FROM leasestore_leases WHERE name = $1", name); rows != 0 {
			t.Fatalf("%s: the refused acquire left %d rows", name, rows)
		}
	}
	if aloneAfter != aloneBefore {
		t.Fatalf("%d members of the batch ran again alone; want each refused in the batch", aloneAfter-aloneBefore)
	}
}

// Row-level security enabled on the store's tables (a DBA's baseline for
// every table, with no policy for the application role, or a trail made
// "write-only" for it) hides rows from a role that does not own them: the
// holder of a live lease was told its renew found no live lease, and a
// retry of a release that took effect answered not_found instead of its
// replay, while Health answered healthy. Health must refuse it, naming
// the fix; meanwhile no operation may answer from rows it cannot see.
func TestRowLevelSecurityOnTheStoreIsRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, ddl, table string }{
		{"leases, no policy", "ALTER TABLE leasestore_leases ENABLE ROW LEVEL SECURITY", "leasestore_leases"},
		{"trail, insert-only policy", "ALTER TABLE leasestore_audit ENABLE ROW LEVEL SECURITY; " +
			"CREATE POLICY leasestore_write_only ON leasestore_audit FOR INSERT TO PUBLIC WITH CHECK (true)", "leasestore_audit"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dsn := pgtest.MigratedDSN(t)
			b := openBackend(t, pgtest.GrantedRoleDSN(t, dsn, grantTables, grantSeqUsage), &postgres.Config{NoCoalescing: true})
			acq, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute, RequestID: "a1"})
			wantStatus(t, "acquire", acq, err, protocol.StatusAcquired)
			mustExec(t, rawConn(t, dsn), c.ddl)
			rel := protocol.ReleaseRequest{Key: key("k"), Owner: "o", Token: acq.Lease.Token, RequestID: "r1"}
			first, ferr := b.Release(ctxT(t), rel)
			retry, rerr := b.Release(ctxT(t), rel)
			wrong := ""
			switch {
			case ferr == nil && first.Status != protocol.StatusReleased:
				wrong = "the holder's release of its live lease answered " + string(first.Status)
			case ferr == nil && rerr == nil && !retry.Replayed:
				wrong = "the retry of the release answered " + string(retry.Status) + ", not its replay"
			}
			err = b.Health(ctxT(t))
			if err == nil && wrong != "" {
				t.Fatalf("row-level security on %s: %s, and Health answered healthy", c.table, wrong)
			}
			wantRefused(t, "Health with row-level security on "+c.table, err, "ALTER TABLE "+c.table+" DISABLE ROW LEVEL SECURITY")
		})
	}
}

// A DBA's BEFORE INSERT trigger on the trail that moves each record
// elsewhere and returns NULL (the trigger-based partitioning or archiving
// of a growing log table, from before declarative partitioning) makes
// every change commit without its record in the trail: the acquire
// answered acquired, its record was not in leasestore_audit, the retry of
// its request id answered conflict (its own lease) instead of a replay,
// and Health answered healthy. Health must refuse a trigger of its own
// that can change or drop what the store writes, naming it.
func TestForeignTriggersOnTheTrailAreRefused(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	b := openBackend(t, dsn, &postgres.Config{NoCoalescing: true})
	owner := rawConn(t, dsn)
	mustExec(t, owner, `CREATE TABLE dba_audit_archive (LIKE leasestore_audit)`)
	mustExec(t, owner, `CREATE FUNCTION dba_audit_archive() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dba_audit_archive SELECT NEW.*;
    RETURN NULL;
END $$`)
	mustExec(t, owner, `CREATE TRIGGER dba_audit_archive BEFORE INSERT ON leasestore_audit
    FOR EACH ROW EXECUTE FUNCTION dba_audit_archive()`)
	healthErr := b.Health(ctxT(t))
	req := protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute, RequestID: "a1"}
	res, err := b.Acquire(ctxT(t), req)
	if err == nil && res.Status == protocol.StatusAcquired {
		if n := count(t, owner, "SELECT count(*) FROM leasestore_audit WHERE request_id = 'a1'"); n != 1 {
			again, aerr := b.Acquire(ctxT(t), req)
			t.Fatalf("the acquire answered acquired and the trail holds %d records of it; its retry answered %s replayed=%v (%v); health: %v",
				n, again.Status, again.Replayed, aerr, healthErr)
		}
	}
	wantRefused(t, "Health with a BEFORE INSERT trigger on the trail", healthErr, "dba_audit_archive")
}

// Every trigger the migrations make is named leasestore_...: on a schema
// newer than this release's (a rolling deploy migrated first), a release
// that serves it takes such a trigger it does not know for the newer
// migrations' own and serves, while on its own schema version the same
// trigger is refused as any other. A trigger that is disabled fires on no
// write and is accepted.
func TestNewerSchemasOwnTriggersAreServed(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	owner := rawConn(t, dsn)
	mustExec(t, owner, `CREATE FUNCTION test_noop() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$`)
	mustExec(t, owner, `CREATE TRIGGER leasestore_next AFTER INSERT ON leasestore_leases FOR EACH ROW EXECUTE FUNCTION test_noop()`)
	_, err := postgres.Open(ctxT(t), dsn, nil)
	wantRefused(t, "Open of this release's schema with a trigger leasestore_next", err, "DROP TRIGGER leasestore_next ON leasestore_leases")
	mustExec(t, owner, "INSERT INTO leasestore_goose_db_version (version_id, is_applied) VALUES ($1, true)", migrations.LatestVersion+1)
	b := openBackend(t, dsn, nil)
	if err := b.Health(ctxT(t)); err != nil {
		t.Fatalf("health of a newer schema with its trigger leasestore_next: %v", err)
	}
	mustExec(t, owner, `CREATE TRIGGER dba_next AFTER INSERT ON leasestore_leases FOR EACH ROW EXECUTE FUNCTION test_noop()`)
	wantRefused(t, "Health of a newer schema with a trigger dba_next", b.Health(ctxT(t)), "DROP TRIGGER dba_next ON leasestore_leases")
	mustExec(t, owner, `ALTER TABLE leasestore_leases DISABLE TRIGGER dba_next`)
	if err := b.Health(ctxT(t)); err != nil {
		t.Fatalf("health with the trigger dba_next disabled: %v", err)
	}
}

// A DBA's rule on a table of the store (a DO ALSO rule logging changes,
// the way changes were logged before triggers were common) makes every
// acquire fail (SQLSTATE 0A000: INSERT with ON CONFLICT cannot be used
// with a table that has INSERT or UPDATE rules; an INSERT rule on the trail
// fails every change with XX000 "could not find CTE"), while Health answered healthy.
// Health must refuse it, naming the rule to drop.
func TestRulesOnTheStoreAreRefused(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	b := openBackend(t, dsn, &postgres.Config{NoCoalescing: true})
	owner := rawConn(t, dsn)
	mustExec(t, owner, `CREATE TABLE dba_lease_log (at timestamptz NOT NULL DEFAULT now(), name text, token bigint)`)
	mustExec(t, owner, `CREATE RULE dba_lease_log AS ON UPDATE TO leasestore_leases
    DO ALSO INSERT INTO dba_lease_log (name, token) VALUES (NEW.name, NEW.token)`)
	_, acqErr := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute, RequestID: "a1"})
	err := b.Health(ctxT(t))
	if err == nil {
		t.Fatalf("Health answered healthy with a rule on leasestore_leases, while the acquire answered: %v", acqErr)
	}
	wantRefused(t, "Health with a rule on leasestore_leases", err, "DROP RULE dba_lease_log ON leasestore_leases")
}

// ALTER TABLE ... SET UNLOGGED (a DBA's way to cut WAL volume) on the
// trail or the leases table, or ALTER SEQUENCE ... SET UNLOGGED
// (PostgreSQL 15) on the fencing sequence, writes them without WAL: after
// a crash the server empties them (the sequence starts again at 1), and no
// standby has them, so a failover loses them. The trail's records, which
// the request ids' retries are answered from, and the fencing state would
// go with them. Open and Health accepted all three; they must refuse each,
// naming the ALTER that makes it logged again.
func TestUnloggedStoreObjectsAreRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ ddl, fix string }{
		{"ALTER TABLE leasestore_audit SET UNLOGGED", "ALTER TABLE leasestore_audit SET LOGGED"},
		{"ALTER TABLE leasestore_leases SET UNLOGGED", "ALTER TABLE leasestore_leases SET LOGGED"},
		{"ALTER SEQUENCE leasestore_fencing_seq SET UNLOGGED", "ALTER SEQUENCE leasestore_fencing_seq SET LOGGED"},
	} {
		t.Run(c.ddl, func(t *testing.T) {
			t.Parallel()
			dsn := pgtest.MigratedDSN(t)
			b := openBackend(t, dsn, nil)
			mustExec(t, rawConn(t, dsn), c.ddl)
			wantRefused(t, "Health after "+c.ddl, b.Health(ctxT(t)), c.fix)
			ob, err := postgres.Open(ctxT(t), dsn, nil)
			if err == nil {
				_ = ob.Close(context.Background())
			}
			wantRefused(t, "Open after "+c.ddl, err, c.fix)
		})
	}
}

// A REVOKE of a privilege every write needs, while the service runs
// (INSERT on the trail, UPDATE on the leases), makes every write fail
// naming the GRANT, while Health answered healthy (and so /readyz and
// `leasectl health`), as it does not for a read-only role
// (TestReadOnlyRoleIsUnhealthy). Health must refuse it, naming the GRANT.
func TestRevokedWritePrivilegesAreUnhealthy(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ revoke, grant string }{
		{"INSERT ON leasestore_audit", "GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE leasestore_audit"},
		{"UPDATE ON leasestore_leases", "GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE leasestore_leases"},
	} {
		t.Run(c.revoke, func(t *testing.T) {
			t.Parallel()
			dsn := pgtest.MigratedDSN(t)
			roleDSN := pgtest.GrantedRoleDSN(t, dsn, grantTables, grantSeqUsage)
			b := openBackend(t, roleDSN, nil)
			if err := b.Health(ctxT(t)); err != nil {
				t.Fatalf("health before the revoke: %v", err)
			}
			u, err := url.Parse(roleDSN)
			if err != nil {
				t.Fatal(err)
			}
			mustExec(t, rawConn(t, dsn), "REVOKE "+c.revoke+" FROM "+pgx.Identifier{u.User.Username()}.Sanitize())
			_, acqErr := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute, RequestID: "a1"})
			err = b.Health(ctxT(t))
			if err == nil {
				t.Fatalf("Health answered healthy after REVOKE %s, while the acquire answered: %v", c.revoke, acqErr)
			}
			wantRefused(t, "Health after REVOKE "+c.revoke, err, c.grant)
		})
	}
}

// An audit read takes its horizon from leasestore_audit_era's row. A
// session that cannot see that row (row-level security for a role that
// does not own it, or the row deleted) read an empty page with no error
// until the next Health: a follower took the trail for empty, or caught
// up. It must be refused, naming the era's row, as a change is.
func TestAuditReadsWithoutTheEraRowAreRefused(t *testing.T) {
	t.Parallel()
	for _, c := range eraRowUnseen {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dsn := pgtest.MigratedDSN(t)
			b := openBackend(t, pgtest.GrantedRoleDSN(t, dsn, grantTables, grantSeqUsage), nil)
			res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute, RequestID: "a1"})
			wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
			mustExec(t, rawConn(t, dsn), c.ddl)
			for _, q := range []audit.Query{{Namespace: "ns", Limit: 10}, {Namespace: "ns", Key: "k", Limit: 10}, {Namespace: "ns", Limit: 10, Follow: true}} {
				page, err := b.ReadAudit(ctxT(t), q)
				if err == nil {
					t.Fatalf("read %+v after %s: a page of %d records, no error; want unavailable naming leasestore_audit_era", q, c.ddl, len(page.Records))
				}
				wantRefused(t, "read", err, "leasestore_audit_era")
			}
		})
	}
}

// The prune window (leasestore_audit_prune) is opened and closed inside a
// prune's own transactions, so no other session ever sees a row of it. A
// DBA who committed one by hand (to delete a few records without
// leasectl, or a prune's statements replayed in autocommit) left the
// trail's append-only trigger letting every DELETE of the records before
// its cut-off through, from any session of a role that may delete, with
// no prune record and no claim: the last DELETE below shows it, refused
// before the row and let through with it. Open and Health answered
// healthy, and a prune took the row over and deleted it with its own
// window, hiding it. Open and Health must refuse it, naming the table,
// its cut-off and the fix, and a prune must remove nothing, naming it and
// leaving the row for the DBA to see. A prune's own window, uncommitted,
// is no other session's business: Health beside it answers healthy.
func TestCommittedPruneWindowIsRefused(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	dsn := pgtest.MigratedDSN(t)
	clock := contract.NewClock()
	b := openBackend(t, dsn, postgres.WithTestClock(nil, clock.Now))
	threeRecords(t, b, clock)
	cut := clock.Now()
	owner := rawConn(t, dsn)

	// A prune's window, open and uncommitted in another session.
	tx, err := rawConn(t, dsn).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, tx, "INSERT INTO leasestore_audit_prune (id, before) VALUES (1, $1)", cut)
	if err := b.Health(ctx); err != nil {
		t.Fatalf("health beside a prune's uncommitted window: %v", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Exec(ctx, "DELETE FROM leasestore_audit WHERE at < $1", cut); err == nil {
		t.Fatal("a DELETE of audit records went through the append-only trigger with no window")
	}

	mustExec(t, owner, "INSERT INTO leasestore_audit_prune (id, before) VALUES (1, $1)", cut)
	const fix = "DELETE FROM leasestore_audit_prune"
	wantWindow := func(what string, err error) {
		t.Helper()
		wantRefused(t, what, err, fix)
		if s := cut.UTC().Format(time.RFC3339Nano); !strings.Contains(err.Error(), s) {
			t.Fatalf("%s: %v; want the window's cut-off %s named", what, err, s)
		}
	}
	wantWindow("Health with a committed prune window", b.Health(ctx))
	ob, err := postgres.Open(ctx, dsn, nil)
	if err == nil {
		_ = ob.Close(context.Background())
	}
	wantWindow("Open with a committed prune window", err)
	res, err := b.PruneAudit(ctx, audit.PruneRequest{Before: cut, Actor: "ops", RequestID: "p1"})
	if err == nil {
		t.Fatalf("prune beside a committed window: %+v, no error", res)
	}
	wantRefused(t, "prune beside a committed window", err, fix)
	if n := count(t, owner, "SELECT count(*) FROM leasestore_audit"); n != 3 || res.Removed != 0 {
		t.Fatalf("the refused prune removed %d records (the trail holds %d of 3)", res.Removed, n)
	}
	if n := count(t, owner, "SELECT count(*) FROM leasestore_audit_prune WHERE before = $1", cut); n != 1 {
		t.Fatalf("the refused prune left %d rows of the DBA's window, want it untouched", n)
	}

	// Why it matters: with the row committed, a plain DELETE goes through.
	tag, err := owner.Exec(ctx, "DELETE FROM leasestore_audit WHERE at < $1", cut)
	if err != nil || tag.RowsAffected() != 3 {
		t.Fatalf("DELETE through the committed window: %v, %v; want the 3 records gone", tag, err)
	}
}

// A prune writes its own record with its last batch, its id made from
// leasestore_audit_era's row as a change's record is. A session that
// cannot see that row (eraRowUnseen) failed the prune with a generic
// error ("no rows in result set"), having committed its earlier batches,
// which no record counts. It must fail as a change does, naming the era's
// row and the fix, and commit nothing: every record stays. Not parallel:
// it sets the package's batch size (two batches here).
func TestPruneWithoutTheEraRowIsRefused(t *testing.T) {
	for _, c := range eraRowUnseen {
		t.Run(c.name, func(t *testing.T) {
			ctx := ctxT(t)
			dsn := pgtest.MigratedDSN(t)
			clock := contract.NewClock()
			b := openBackend(t, pgtest.GrantedRoleDSN(t, dsn, grantTables, grantSeqUsage, grantPruneFuncs), postgres.WithTestClock(nil, clock.Now))
			postgres.SetPruneBatch(t, 2)
			threeRecords(t, b, clock)
			owner := rawConn(t, dsn)
			mustExec(t, owner, c.ddl)
			res, err := b.PruneAudit(ctx, audit.PruneRequest{Before: clock.Now(), Actor: "ops", RequestID: "p1"})
			if err == nil {
				t.Fatalf("prune after %s: %+v, no error", c.ddl, res)
			}
			for _, s := range []string{"audit record could not be written", "leasestore_audit_era DISABLE ROW LEVEL SECURITY", "leasestore_audit_new_era()"} {
				wantRefused(t, "prune after "+c.ddl, err, s)
			}
			if n := count(t, owner, "SELECT count(*) FROM leasestore_audit"); n != 3 || res.Removed != 0 {
				t.Fatalf("the refused prune removed %d records (the trail holds %d of 3), want none", res.Removed, n)
			}
		})
	}
}

// A DBA's trigger that drops the trail's inserts (see
// TestForeignTriggersOnTheTrailAreRefused) drops a prune's record too:
// the prune failed with a generic error ("no rows in result set"). It must
// fail as a change whose record a trigger dropped does, naming the
// causes and their fixes, and its batch commits nothing.
func TestPruneWhoseRecordATriggerDropsIsRefused(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	dsn := pgtest.MigratedDSN(t)
	clock := contract.NewClock()
	b := openBackend(t, dsn, postgres.WithTestClock(nil, clock.Now))
	threeRecords(t, b, clock)
	owner := rawConn(t, dsn)
	mustExec(t, owner, `CREATE FUNCTION dba_drop_prunes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.op = 'prune' THEN
        RETURN NULL;
    END IF;
    RETURN NEW;
END $$`)
	mustExec(t, owner, `CREATE TRIGGER dba_drop_prunes BEFORE INSERT ON leasestore_audit FOR EACH ROW EXECUTE FUNCTION dba_drop_prunes()`)
	res, err := b.PruneAudit(ctx, audit.PruneRequest{Before: clock.Now(), Actor: "ops", RequestID: "p1"})
	if err == nil {
		t.Fatalf("prune whose record a trigger drops: %+v, no error", res)
	}
	for _, s := range []string{"audit record could not be written", "or drop the trigger"} {
		wantRefused(t, "prune whose record a trigger drops", err, s)
	}
	if n := count(t, owner, "SELECT count(*) FROM leasestore_audit"); n != 3 || res.Removed != 0 {
		t.Fatalf("the refused prune removed %d records (the trail holds %d of 3), want none", res.Removed, n)
	}
}

// threeRecords acquires k0, k1 and k2 through b (three records in the
// trail for a prune to remove) and moves clock a minute past them.
func threeRecords(t *testing.T, b *postgres.Backend, clock *contract.Clock) {
	t.Helper()
	for i := range 3 {
		res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key(fmt.Sprint("k", i)), Owner: "w", TTL: time.Hour, RequestID: fmt.Sprint("a", i)})
		wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	}
	clock.Advance(time.Minute)
}
