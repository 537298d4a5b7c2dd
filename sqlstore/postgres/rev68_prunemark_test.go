package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
)

// TestRev68PruneMarkForgedByRoleWithoutWrites: the SECURITY DEFINER trigger
// function leasestore_audit_keep_pruned is EXECUTE to PUBLIC, checks no
// TG_RELID, and reads leasestore_audit_gone by name. A role with only USAGE
// on the schema (and the default TEMP) attaches it to a temp table of its
// own and raises the marks as the function's owner: every cursor read then
// fails with ErrPruned though nothing was pruned.
func TestRev68PruneMarkForgedByRoleWithoutWrites(t *testing.T) {
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
	role := "rev68_" + pgtest.Namespace()[2:]
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), `DROP OWNED BY `+role)
		_, _ = c.Exec(context.Background(), `DROP ROLE `+role)
	})
	for _, s := range []string{
		`CREATE ROLE ` + role,
		`GRANT USAGE ON SCHEMA "` + schema + `" TO ` + role,
		`SET ROLE ` + role,
		`CREATE TEMP TABLE forge (namespace text, id bigint)`,
		`CREATE TRIGGER forge AFTER DELETE ON forge REFERENCING OLD TABLE AS leasestore_audit_gone
		 FOR EACH STATEMENT EXECUTE FUNCTION "` + schema + `".leasestore_audit_keep_pruned()`,
		`INSERT INTO forge VALUES ('ns', 9000000000000000000)`,
		`DELETE FROM forge`,
		`RESET ROLE`,
	} {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Logf("%s: %v (refused: no forgery)", s, err)
			return
		}
	}
	var through int64
	if err := conn.QueryRow(ctx, `SELECT through FROM leasestore_audit_pruned WHERE namespace = ''`).Scan(&through); err == nil {
		t.Logf("whole-trail mark after the forgery: %d", through)
	}
	_, err = b.ReadAudit(ctx, audit.Query{Cursor: audit.EncodeCursor(page.Records[0].ID)})
	if errors.Is(err, audit.ErrPruned) {
		t.Fatalf("a role with only USAGE on the schema forged a prune mark; a cursor read of an unpruned trail now fails: %v", err)
	}
}
