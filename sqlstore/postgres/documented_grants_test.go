package postgres_test

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// roleName is the role a DSN of pgtest.GrantedRoleDSN logs in as, quoted.
func roleName(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return pgx.Identifier{u.User.Username()}.Sanitize()
}

// documentedGrants returns the statements of the grant set that
// docs/postgres-settings.md#privileges gives ("A common grant set that
// serves, sweeps and prunes"), for schema and role (quoted identifiers)
// in place of its leasestore and app.
func documentedGrants(t *testing.T, schema, role string) []string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "postgres-settings.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "runs it as this page gives it):\n\n```sql\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/postgres-settings.md: no sql block after the common grant set's \"runs it as this page gives it):\"")
	}
	var text []string
	for _, line := range strings.Split(block, "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "--") {
			text = append(text, line)
		}
	}
	var stmts []string
	for _, s := range strings.Split(strings.Join(text, " "), ";") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		s = strings.ReplaceAll(s, "leasestore.leasestore_", schema+".leasestore_")
		s = strings.ReplaceAll(s, "SCHEMA leasestore ", "SCHEMA "+schema+" ")
		if !strings.HasSuffix(s, " TO app") {
			t.Fatalf("docs/postgres-settings.md: %q does not grant to app", s)
		}
		stmts = append(stmts, strings.TrimSuffix(s, "app")+role)
	}
	return stmts
}

// docs/postgres-settings.md#privileges lists what an application's role
// needs and gives a grant set that serves, sweeps and prunes. It left out
// EXECUTE on the store's functions, which PostgreSQL gives PUBLIC unless
// the schema owner's default privileges keep new functions private (ALTER
// DEFAULT PRIVILEGES ... REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC, which
// the same page names): there a role granted that set failed every change
// ("permission denied for function leasestore_audit_went_back"). The set,
// run as the page gives it, must serve every operation on a schema its
// owner migrated, either way: Health, the changes, a change that met
// another committed after its snapshot (read by leasestore_outcome_fresh,
// in its one round trip), a batch (the coalescer's temporary function,
// made on each connection), an audit read from a cursor, gc, prune,
// fencing raise and the new era of audit ids Health starts after a move
// to another cluster.
func TestDocumentedGrantSetServesEveryOperation(t *testing.T) {
	t.Parallel()
	for _, private := range []bool{false, true} {
		name := "PUBLIC executes new functions"
		if private {
			name = "the owner keeps new functions private"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := ctxT(t)
			dsn := pgtest.DSN(t)
			ownerDSN := pgtest.RoleDSN(t, dsn)
			owner := rawConn(t, ownerDSN)
			if private {
				mustExec(t, owner, "ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC")
			}
			if err := pgtest.Migrate(ctx, ownerDSN); err != nil {
				t.Fatal(err)
			}
			roleDSN := pgtest.GrantedRoleDSN(t, dsn)
			for _, g := range documentedGrants(t, pgx.Identifier{schemaOf(t, dsn)}.Sanitize(), roleName(t, roleDSN)) {
				mustExec(t, owner, g)
			}
			b := openBackend(t, roleDSN, nil)
			serve(t, b)

			// A change that met another committed after its snapshot.
			ns := pgtest.Namespace()
			k := keysIn(ns)
			pool, queries, writes := countingPool(t, roleDSN)
			one, err := postgres.New(ctx, pool, nil)
			if err != nil {
				t.Fatal(err)
			}
			res, err := one.Acquire(ctx, protocol.AcquireRequest{Key: k("warm"), Owner: "o", TTL: time.Minute, RequestID: "warm"})
			wantStatus(t, "acquire to warm the statement cache", res, err, protocol.StatusAcquired)
			ahead := openBackend(t, ownerDSN, &postgres.Config{NoCoalescing: true})
			res, q, w, err := behindAnother(t, owner, k("raced"), queries, writes,
				func() error {
					_, err := ahead.Acquire(ctx, protocol.AcquireRequest{Key: k("raced"), Owner: "first", TTL: time.Minute, RequestID: "first"})
					return err
				},
				func() (protocol.Result, error) {
					return one.Acquire(ctx, protocol.AcquireRequest{Key: k("raced"), Owner: "second", TTL: time.Minute, RequestID: "second"})
				})
			wantStatus(t, "the acquire behind another", res, err, protocol.StatusConflict)
			if res.Lease == nil || res.Lease.Owner != "first" || q != 1 || w != 1 {
				t.Fatalf("the acquire behind another: conflict with %+v in %d queries and %d round trips; "+
					"want first's lease in 1 and 1 (read by leasestore_outcome_fresh)", res.Lease, q, w)
			}

			if err := b.BatchCycle(ctx, []protocol.Key{k("b1"), k("b2"), k("b3")}, "batch"); err != nil {
				t.Fatalf("a batch: %v", err)
			}
			page, err := b.ReadAudit(ctx, audit.Query{Namespace: "ns", Limit: 1})
			if err != nil || page.NextCursor == "" {
				t.Fatalf("audit, first page: %+v, %v", page, err)
			}
			if _, err := b.ReadAudit(ctx, audit.Query{Namespace: "ns", Cursor: page.NextCursor}); err != nil {
				t.Fatalf("audit from a cursor: %v", err)
			}
			if _, err := b.Sweep(ctx, 100, 0); err != nil {
				t.Fatalf("gc: %v", err)
			}
			if _, err := b.PruneAudit(ctx, audit.PruneRequest{Before: time.Now(), Actor: "ops", RequestID: "p1"}); err != nil {
				t.Fatalf("prune: %v", err)
			}
			if _, err := b.RaiseTokens(ctx, protocol.MinTokenRaise); err != nil {
				t.Fatalf("fencing raise: %v", err)
			}
			// A move to another cluster: the next ids map below the trail's
			// newest (written with the offset the raise moved).
			res, err = b.Acquire(ctx, protocol.AcquireRequest{Key: k("after-raise"), Owner: "o", TTL: time.Minute, RequestID: "r1"})
			wantStatus(t, "acquire after fencing raise", res, err, protocol.StatusAcquired)
			mustExec(t, owner, "UPDATE leasestore_audit_era SET id_offset = 0")
			if err := b.Health(ctx); err != nil {
				t.Fatalf("health after the audit ids went back: %v", err)
			}
			if n := count(t, owner, "SELECT id_offset FROM leasestore_audit_era"); n == 0 {
				t.Fatal("health after the audit ids went back left the era's offset at 0")
			}
		})
	}
}
