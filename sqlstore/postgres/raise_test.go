package postgres_test

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// pgBin returns the path of PostgreSQL's program name, from `pg_config
// --bindir`.
func pgBin(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("pg_config", "--bindir").Output()
	if err != nil {
		t.Fatalf("pg_config --bindir: %v (install PostgreSQL's client programs)", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), name)
}

// TestRaiseTokensAfterARestoreToAnEarlierPoint restores a store's schema
// from a pg_dump taken before more leases were issued, as an operator
// restoring a backup does: the restored store issues a token again that a
// holder of before the restore still has (the hazard). After RaiseTokens
// every token is greater than any issued before the restore.
func TestRaiseTokensAfterARestoreToAnEarlierPoint(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	var schema string
	if err := rawConn(t, dsn).QueryRow(ctxT(t), "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	b := openBackend(t, dsn, nil)
	cycle(t, b, "k", "w", "before-0", false)
	dump := filepath.Join(t.TempDir(), "store.dump")
	if out, err := exec.Command(pgBin(t, "pg_dump"), "-d", dsn, "-n", schema, "-Fc", "-f", dump).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v: %s", err, out)
	}
	var issued int64 // the greatest token issued after the dump
	for i := range 3 {
		issued = cycle(t, b, "k", "w", fmt.Sprintf("after-%d", i), i == 2).Token
	}
	held := cycle(t, b, "other", "w", "after-other", true).Token
	issued = max(issued, held)
	if err := b.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}

	mustExec(t, rawConn(t, dsn), "DROP SCHEMA "+schema+" CASCADE")
	if out, err := exec.Command(pgBin(t, "pg_restore"), "-d", dsn, "--no-owner", "--no-privileges", dump).CombinedOutput(); err != nil {
		t.Fatalf("pg_restore: %v: %s", err, out)
	}
	r := openBackend(t, dsn, nil)
	again := cycle(t, r, "k", "x", "restored-0", false)
	if again.Token > issued {
		t.Fatalf("the restored store issued token %d, above the %d issued after the dump: the test shows no hazard", again.Token, issued)
	}

	ids := readAll(t, r, "ns")
	floor, err := r.RaiseTokens(ctxT(t), protocol.MinTokenRaise)
	if err != nil {
		t.Fatal(err)
	}
	if floor < issued+protocol.MinTokenRaise-10 {
		t.Fatalf("floor %d, want about %d above the greatest token issued, %d", floor, protocol.MinTokenRaise, issued)
	}
	for _, name := range []string{"k", "other", "new"} {
		l := cycle(t, r, name, "x", "raised-"+name, false)
		if l.Token <= floor || l.Token <= issued {
			t.Fatalf("%s: token %d after the raise, want above the floor %d and every token issued before the restore (%d)",
				name, l.Token, floor, issued)
		}
	}
	// The audit ids moved too: every later record's id is more than the
	// step above the greatest before the raise.
	after := readAll(t, r, "ns")
	for _, id := range after[len(ids):] {
		if id <= ids[len(ids)-1]+protocol.MinTokenRaise {
			t.Fatalf("a record after the raise has id %d, want above %d (the greatest before it, %d, plus the step)",
				id, ids[len(ids)-1]+protocol.MinTokenRaise, ids[len(ids)-1])
		}
	}
	// Health finds nothing to repair: the sequence is past every token.
	if err := r.Health(ctxT(t)); err != nil {
		t.Fatalf("health after the raise: %v", err)
	}
}

// TestRaiseTokensRefusesABadStep: a step outside the bounds is invalid and
// moves nothing.
func TestRaiseTokensRefusesABadStep(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	b := openBackend(t, dsn, nil)
	first := cycle(t, b, "k", "w", "0", false).Token
	for _, by := range []int64{0, -5, protocol.MinTokenRaise - 1, protocol.MaxTokenRaise + 1} {
		_, err := b.RaiseTokens(ctxT(t), by)
		wantErrStatus(t, "raise by a bad step", err, protocol.StatusInvalid)
	}
	if next := cycle(t, b, "k", "w", "1", false).Token; next != first+1 {
		t.Fatalf("token %d after refused raises, want %d: a refused raise moved the counter", next, first+1)
	}
}

// TestRaiseTokensRefusesACachedSequence: a DBA set CACHE on the fencing
// sequence while a service ran (Open and Health refuse it from then on,
// operations go on). RaiseTokens returned a floor while the service's
// session went on handing out its cached values below it. It is refused
// as Open refuses it, naming the fix, and moves nothing.
func TestRaiseTokensRefusesACachedSequence(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	svc := openBackend(t, dsn, &postgres.Config{MaxConns: 2, NoCoalescing: true})
	op := openBackend(t, dsn, nil) // opened before the ALTER, as a long-running process is
	raw := rawConn(t, dsn)
	cycle(t, svc, "warm", "w", "warm", false)
	mustExec(t, raw, "ALTER SEQUENCE leasestore_fencing_seq CACHE 50")
	cached := cycle(t, svc, "k", "w", "cached", false).Token // svc's session now holds 49 more values
	last := count(t, raw, "SELECT last_value FROM leasestore_fencing_seq")
	offset := count(t, raw, "SELECT id_offset FROM leasestore_audit_era")
	floor, err := op.RaiseTokens(ctxT(t), protocol.MinTokenRaise)
	wantErrStatus(t, fmt.Sprintf("raise of a sequence caching 50 values (returned floor %d)", floor), err, protocol.StatusUnavailable)
	if !strings.Contains(err.Error(), "caches 50 values") || !strings.Contains(err.Error(), "ALTER SEQUENCE leasestore_fencing_seq CACHE 1") {
		t.Fatalf("raise of a cached sequence: %v; want Open's refusal, naming the fix", err)
	}
	if now := count(t, raw, "SELECT last_value FROM leasestore_fencing_seq"); now != last {
		t.Fatalf("the refused raise moved the sequence from %d to %d", last, now)
	}
	if now := count(t, raw, "SELECT id_offset FROM leasestore_audit_era"); now != offset {
		t.Fatalf("the refused raise moved the audit ids' offset from %d to %d", offset, now)
	}
	if next := cycle(t, svc, "k", "w", "after", false).Token; next != cached+1 {
		t.Fatalf("token %d after the refused raise, want %d (the session's next cached value)", next, cached+1)
	}
}

// Fencing raise moves the audit ids through leasestore_audit_era's row
// (raiseAuditIDsSQL), in the transaction that moves the sequence. A
// session that sees no row of it (eraRowUnseen), or whose row-level
// security policy shows the row but lets it update none, moved no id and
// answered a floor as if it had: after a restore to an earlier point the
// records written next would take again ids followers had read past
// (TestRaiseTokensAfterARestoreToAnEarlierPoint), silently. It must be
// refused, naming the era's row and the fix, and move nothing, the
// sequence included.
func TestRaiseTokensWithoutTheEraRowIsRefused(t *testing.T) {
	t.Parallel()
	cases := append(slices.Clone(eraRowUnseen), struct{ name, ddl string }{"a policy that shows the era's row and lets no update",
		"ALTER TABLE leasestore_audit_era ENABLE ROW LEVEL SECURITY; " +
			"CREATE POLICY leasestore_era_read ON leasestore_audit_era FOR SELECT TO PUBLIC USING (true)"})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dsn := pgtest.MigratedDSN(t)
			b := openBackend(t, pgtest.GrantedRoleDSN(t, dsn, grantTables, grantSeqUpdate), nil)
			cycle(t, b, "k", "w", "0", false)
			raw := rawConn(t, dsn)
			mustExec(t, raw, c.ddl)
			last := count(t, raw, "SELECT last_value FROM leasestore_fencing_seq")
			offset := count(t, raw, "SELECT coalesce((SELECT id_offset FROM leasestore_audit_era), -1)")
			floor, err := b.RaiseTokens(ctxT(t), protocol.MinTokenRaise)
			if err == nil {
				t.Fatalf("raise after %s: floor %d, no error, and the audit ids' offset is %d as before (-1: no row)",
					c.ddl, floor, count(t, raw, "SELECT coalesce((SELECT id_offset FROM leasestore_audit_era), -1)"))
			}
			for _, s := range []string{"leasestore_audit_era", "DISABLE ROW LEVEL SECURITY", "leasestore_audit_new_era()"} {
				wantRefused(t, "raise after "+c.ddl, err, s)
			}
			if now := count(t, raw, "SELECT last_value FROM leasestore_fencing_seq"); now != last {
				t.Fatalf("the refused raise moved the sequence from %d to %d", last, now)
			}
			if now := count(t, raw, "SELECT coalesce((SELECT id_offset FROM leasestore_audit_era), -1)"); now != offset {
				t.Fatalf("the refused raise moved the audit ids' offset from %d to %d", offset, now)
			}
		})
	}
}
