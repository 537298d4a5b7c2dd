package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/contract"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// TestReadFromACursorBehindAPruneFails is the SQLite test's twin: a
// follower of a namespace whose cursor was behind a prune resumed past the
// records the prune removed (readAuditSQL's a.id > @after), without an
// error and without any sign of the gap. Now the read fails, unavailable
// and matching audit.ErrPruned (so does one from a1.0, a position, not the
// start); a cursor at the last record removed, a quiet namespace's
// follower and a read from the start (no cursor) read as before.
// Each test has a schema of its own.
func TestReadFromACursorBehindAPruneFails(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	clock := contract.NewClock()
	b := openBackend(t, pgtest.MigratedDSN(t), postgres.WithTestClock(nil, clock.Now))
	res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "w", TTL: 30 * time.Second, RequestID: "a"})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	q := audit.Query{Namespace: "ns"} // not a follower's read: that waits on any transaction of the cluster
	page, err := b.ReadAudit(ctx, q)
	if err != nil || len(page.Records) != 1 {
		t.Fatalf("first page: %v, %v", page, err)
	}
	q.Cursor = audit.EncodeCursor(page.Records[0].ID) // the follower has read the acquire
	for i := range 3 {
		clock.Advance(time.Second)
		r, err := b.Renew(ctx, protocol.RenewRequest{Key: key("k"), Owner: "w", Token: res.Lease.Token, TTL: 30 * time.Second,
			RequestID: "r" + string(rune('0'+i))})
		wantStatus(t, "renew", r, err, protocol.StatusRenewed)
	}
	quiet, err := b.Acquire(ctx, protocol.AcquireRequest{Key: protocol.Key{Namespace: "quiet", Name: "q"}, Owner: "w",
		TTL: 30 * time.Second, RequestID: "q"})
	wantStatus(t, "acquire in quiet", quiet, err, protocol.StatusAcquired)
	clock.Advance(time.Minute)
	later, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("later"), Owner: "w", TTL: time.Hour, RequestID: "l"})
	wantStatus(t, "acquire later", later, err, protocol.StatusAcquired)
	ids := map[string]int64{}
	all, err := b.ReadAudit(ctx, audit.Query{Limit: audit.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range all.Records {
		ids[r.RequestID] = r.ID
	}
	pr, err := b.PruneAudit(ctx, audit.PruneRequest{Before: clock.Now(), Actor: "ops", RequestID: "prune"})
	if err != nil || pr.Removed != 5 {
		t.Fatalf("prune: %+v, %v; want the 5 records before the cut-off removed", pr, err)
	}
	next, err := b.ReadAudit(ctx, q)
	wantPruned(t, "follower of ns at "+q.Cursor, next, err)
	whole := q
	whole.Namespace = ""
	_, err = b.ReadAudit(ctx, whole)
	wantPruned(t, "follower of the whole trail at "+whole.Cursor, audit.Page{}, err)
	key := q
	key.Key = "k"
	_, err = b.ReadAudit(ctx, key)
	wantPruned(t, "follower of ns/k at "+key.Cursor, audit.Page{}, err)
	// a1.0 is a position (audit.Tail's of an empty trail), not the start:
	// a reader there has read none of the records the prune removed.
	zero := audit.Query{Cursor: audit.EncodeCursor(0)}
	_, err = b.ReadAudit(ctx, zero)
	wantPruned(t, "read of the whole trail at "+zero.Cursor, audit.Page{}, err)

	for _, ok := range []audit.Query{
		{Namespace: "ns", Cursor: audit.EncodeCursor(ids["r2"])},
		{Namespace: "quiet", Cursor: audit.EncodeCursor(ids["q"])},
		{Namespace: "ns"},
		{Namespace: "ns", Since: clock.Now().Add(-time.Hour)},
		{},
		{Namespace: "ns", Newest: true, Cursor: audit.EncodeNewestCursor(ids["l"] + 1)},
	} {
		p, err := b.ReadAudit(ctx, ok)
		if err != nil {
			t.Fatalf("read %+v after the prune: %v; want it served", ok, err)
		}
		if ok.Namespace == "ns" && (len(p.Records) != 1 || p.Records[0].ID != ids["l"]) {
			t.Fatalf("read %+v after the prune: %+v; want the one record left in ns", ok, p.Records)
		}
	}
}

// The database keeps where prunes left gaps, by a trigger on each DELETE
// through the prune window (one batch of a prune of the previous release,
// which knows nothing of it), and a role granted the tables before
// migration 7 (so not leasestore_audit_pruned) reads and prunes as before;
// so does one granted them before migration 8 (not
// leasestore_audit_prune_claim; migration 8 grants it EXECUTE on the
// functions that claim and free a prune's request id, as here), whose
// functions refuse it outside a prune's window.
func TestPruneGapIsKeptByTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	dsn := pgtest.MigratedDSN(t)
	roleDSN := pgtest.GrantedRoleDSN(t, dsn, "SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %s", "USAGE ON ALL SEQUENCES IN SCHEMA %s",
		grantPruneFuncs)
	cfg, err := pgx.ParseConfig(roleDSN)
	if err != nil {
		t.Fatal(err)
	}
	raw := rawPool(t, dsn)
	mustExec(t, raw, "REVOKE ALL ON leasestore_audit_pruned FROM "+pgx.Identifier{cfg.User}.Sanitize())
	mustExec(t, raw, "REVOKE ALL ON leasestore_audit_prune_claim FROM "+pgx.Identifier{cfg.User}.Sanitize())
	b := openBackend(t, roleDSN, nil)
	acquireLapsed(t, b, key, 3)
	p, err := b.ReadAudit(ctx, audit.Query{Namespace: "ns"})
	if err != nil || len(p.Records) != 3 {
		t.Fatalf("trail: %+v, %v", p, err)
	}
	ids := []int64{p.Records[0].ID, p.Records[1].ID, p.Records[2].ID}
	conn := rawConn(t, roleDSN)
	for _, stmt := range []string{
		`INSERT INTO leasestore_audit_prune (id, before) VALUES (1, 'infinity')`,
		`DELETE FROM leasestore_audit WHERE id IN (SELECT id FROM leasestore_audit ORDER BY id LIMIT 2)`,
		`DELETE FROM leasestore_audit_prune WHERE id = 1`,
	} {
		mustExec(t, conn, stmt)
	}
	for _, stmt := range []string{
		`SELECT leasestore_audit_prune_claim('p', 'run', 'ops', now(), now())`,
		`SELECT leasestore_audit_prune_unclaim('p', 'run')`,
	} {
		var pe *pgconn.PgError
		if _, err := conn.Exec(ctx, stmt); !errors.As(err, &pe) || pe.Code != "42501" {
			t.Fatalf("%s outside a prune's window: %v; want insufficient_privilege (42501)", stmt, err)
		}
	}
	q := audit.Query{Namespace: "ns", Cursor: audit.EncodeCursor(ids[0])}
	_, err = b.ReadAudit(ctx, q)
	wantPruned(t, "follower at the first record after a batch removed the first two", audit.Page{}, err)
	q.Cursor = audit.EncodeCursor(ids[1])
	if p, err := b.ReadAudit(ctx, q); err != nil || len(p.Records) != 1 || p.Records[0].ID != ids[2] {
		t.Fatalf("follower at the last record removed: %+v, %v; want the third record", p, err)
	}
	if res, err := b.PruneAudit(ctx, audit.PruneRequest{Before: time.Now(), Actor: "ops", RequestID: "p"}); err != nil || res.Removed != 1 {
		t.Fatalf("prune by the role without a grant on leasestore_audit_pruned: %+v, %v", res, err)
	}
	q.Cursor = audit.EncodeCursor(ids[1])
	_, err = b.ReadAudit(ctx, q)
	wantPruned(t, "follower at the second record after the prune removed the third", audit.Page{}, err)
}

// wantPruned fails the test unless err is a cursor-behind-a-prune failure:
// unavailable (as etcd's compacted follower), matching audit.ErrPruned,
// its message naming the prune and the way on.
func wantPruned(t *testing.T, what string, page audit.Page, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: page %+v, no error; want the read refused: records after the cursor were pruned", what, page)
	}
	if !errors.Is(err, audit.ErrPruned) || protocol.StatusOf(err) != protocol.StatusUnavailable {
		t.Fatalf("%s: %v (status %s); want unavailable matching audit.ErrPruned", what, err, protocol.StatusOf(err))
	}
	for _, want := range []string{audit.PrunedPrefix, "leasectl audit prune", "--since"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: %v; want the message to name %q", what, err, want)
		}
	}
}

// The trigger function that keeps the prune marks runs as its owner
// (SECURITY DEFINER). Nobody else may attach it to a table of theirs (a
// role with USAGE on the schema and TEMP, as the serving role has, raised
// the whole trail's mark to 9e18 from a temp table's deleted rows, and
// every cursor read then failed as behind a prune), and attached to
// another table, even by its owner, it marks nothing.
func TestPruneMarksCannotBeForged(t *testing.T) {
	ctx := ctxT(t)
	dsn := pgtest.MigratedDSN(t)
	b := openBackend(t, dsn, nil)
	res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "w", TTL: time.Hour, RequestID: "a"})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	page, err := b.ReadAudit(ctx, audit.Query{})
	if err != nil || len(page.Records) != 1 {
		t.Fatalf("page: %v %v", page, err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var schema string
	if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	role := "forger_" + pgtest.Namespace()[2:]
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), `DROP OWNED BY `+role)
		_, _ = c.Exec(context.Background(), `DROP ROLE `+role)
	})
	forge := func(table string) []string {
		return []string{
			`CREATE TEMP TABLE ` + table + ` (namespace text, id bigint)`,
			`CREATE TRIGGER ` + table + ` AFTER DELETE ON ` + table + ` REFERENCING OLD TABLE AS leasestore_audit_gone
			 FOR EACH STATEMENT EXECUTE FUNCTION "` + schema + `".leasestore_audit_keep_pruned()`,
			`INSERT INTO ` + table + ` VALUES ('ns', 9000000000000000000)`,
			`DELETE FROM ` + table,
		}
	}
	// Another role: refused when it attaches the function.
	for _, s := range []string{`CREATE ROLE ` + role, `GRANT USAGE ON SCHEMA "` + schema + `" TO ` + role, `SET ROLE ` + role} {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	steps := forge("forged")
	if _, err := conn.Exec(ctx, steps[0]); err != nil {
		t.Fatalf("%s: %v", steps[0], err)
	}
	var pe *pgconn.PgError
	if _, err := conn.Exec(ctx, steps[1]); !errors.As(err, &pe) || pe.Code != "42501" {
		for _, s := range steps[2:] {
			_, _ = conn.Exec(ctx, s)
		}
		t.Errorf("a role with USAGE on the schema attached the mark-keeping trigger function to its own table: %v", err)
	}
	if _, err := conn.Exec(ctx, `RESET ROLE`); err != nil {
		t.Fatal(err)
	}
	// Its owner, attaching it to another table: nothing is marked.
	for _, s := range forge("owners") {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	var marks int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM leasestore_audit_pruned`).Scan(&marks); err != nil || marks != 0 {
		t.Errorf("prune marks after deletes from tables other than the trail: %d (%v), want none", marks, err)
	}
	if _, err := b.ReadAudit(ctx, audit.Query{Cursor: audit.EncodeCursor(page.Records[0].ID)}); err != nil {
		t.Fatalf("a cursor read of a trail nothing was pruned from: %v", err)
	}
}
