package postgres_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// A DBA's ALTER SEQUENCE of leasestore_fencing_seq other than its
// cache (docs/postgres-settings.md refused only CACHE n > 1): a sequence
// that counts down, or one that cycles at a MAXVALUE, hands a key whose
// row was swept a token it had before. DESIGN.md: "No server setting or
// operation a DBA may do breaks a guarantee ... Each is either made
// harmless by the backend or refused at open/health".
func TestFencingSequenceThatGoesBackIsRefused(t *testing.T) {
	t.Parallel()
	for name, alter := range map[string]func(top int64) string{
		"increment by -1": func(int64) string {
			return "ALTER SEQUENCE leasestore_fencing_seq INCREMENT BY -1"
		},
		"maxvalue cycle": func(top int64) string {
			return fmt.Sprintf("ALTER SEQUENCE leasestore_fencing_seq MAXVALUE %d CYCLE", top)
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dsn := pgtest.MigratedDSN(t)
			key := keysIn(pgtest.Namespace())
			b := openBackend(t, dsn, nil)
			raw := rawPool(t, dsn)
			gone, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("gone"), Owner: "w", TTL: time.Hour,
				RequestID: "a-gone"})
			wantStatus(t, "acquire gone", gone, err, protocol.StatusAcquired)
			top, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("top"), Owner: "w", TTL: time.Hour,
				RequestID: "a-top"})
			wantStatus(t, "acquire top", top, err, protocol.StatusAcquired)
			res, err := b.Release(ctxT(t), protocol.ReleaseRequest{Key: key("gone"), Owner: "w", Token: gone.Lease.Token,
				RequestID: "r-gone"})
			wantStatus(t, "release gone", res, err, protocol.StatusReleased)
			if _, err := b.Sweep(ctxT(t), 100, 0); err != nil {
				t.Fatalf("sweep: %v", err)
			}
			if n := count(t, raw, "SELECT count(*) FROM leasestore_leases WHERE name = 'gone'"); n != 0 {
				t.Fatalf("the sweep left the released key's row (%d rows)", n)
			}
			// The DBA's change to the sequence.
			mustExec(t, raw, alter(top.Lease.Token))
			if err := b.Health(ctxT(t)); err != nil {
				t.Logf("health refused the sequence: %v", err)
				// Refused at health, naming the fix; Open refuses it too,
				// and once the fix is made the swept key's next token is
				// above every token issued.
				wantErrStatus(t, "health", err, protocol.StatusUnavailable)
				if !strings.Contains(err.Error(), "ALTER SEQUENCE leasestore_fencing_seq INCREMENT BY 1 NO CYCLE") {
					t.Fatalf("health: %v; want it to name ALTER SEQUENCE leasestore_fencing_seq INCREMENT BY 1 NO CYCLE", err)
				}
				_, err = postgres.Open(ctxT(t), dsn, nil)
				wantErrStatus(t, "open", err, protocol.StatusUnavailable)
				mustExec(t, raw, "ALTER SEQUENCE leasestore_fencing_seq INCREMENT BY 1 NO CYCLE NO MAXVALUE")
				if err := b.Health(ctxT(t)); err != nil {
					t.Fatalf("health after the fix: %v", err)
				}
				again, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("gone"), Owner: "w2", TTL: time.Hour,
					RequestID: "a-gone-again"})
				wantStatus(t, "acquire after the fix", again, err, protocol.StatusAcquired)
				if again.Lease.Token <= top.Lease.Token {
					t.Fatalf("after the fix the swept key got token %d; %d was issued before", again.Lease.Token, top.Lease.Token)
				}
				return
			}
			b2 := openBackend(t, dsn, nil)
			again, err := b2.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("gone"), Owner: "w2", TTL: time.Hour,
				RequestID: "a-gone-again"})
			if err != nil || again.Status != protocol.StatusAcquired {
				t.Logf("acquire after the change: %v, %v (refused: fine)", again.Status, err)
				return
			}
			if again.Lease.Token <= gone.Lease.Token {
				t.Fatalf("after %q, health said healthy and the swept key got token %d; it had %d before",
					alter(top.Lease.Token), again.Lease.Token, gone.Lease.Token)
			}
		})
	}
}

// A DBA's ALTER TABLE leasestore_audit DISABLE TRIGGER (USER, ALL,
// or a trigger by name; or ENABLE REPLICA TRIGGER) has the effect that
// session_replication_role = replica has, which Open, New and Health
// refuse (docs/postgres-settings.md: "the triggers that keep the audit
// trail append-only do not fire"): the trail can be edited, and a prune
// leaves no mark, so a follower behind it skips the removed records
// silently. Health answers healthy.
func TestDisabledAuditTriggersAreRefused(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	ns := pgtest.Namespace()
	key := keysIn(ns)
	b := openBackend(t, dsn, nil)
	raw := rawPool(t, dsn)
	res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "w", TTL: time.Hour, RequestID: "a"})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)

	mustExec(t, raw, "ALTER TABLE leasestore_audit DISABLE TRIGGER USER") // a DBA's maintenance, not undone
	healthErr := b.Health(ctxT(t))
	if healthErr != nil {
		t.Logf("health refused: %v", healthErr)
		wantErrStatus(t, "health", healthErr, protocol.StatusUnavailable)
		for _, name := range []string{"leasestore_audit_no_update_delete", "leasestore_audit_no_truncate", "leasestore_audit_keep_pruned"} {
			if !strings.Contains(healthErr.Error(), "ALTER TABLE leasestore_audit ENABLE TRIGGER "+name) {
				t.Fatalf("health: %v; want it to name ALTER TABLE leasestore_audit ENABLE TRIGGER %s", healthErr, name)
			}
		}
		return
	}
	var problems []string
	if _, err := raw.Exec(ctxT(t), "UPDATE leasestore_audit SET owner = 'forged' WHERE request_id = 'a'"); err == nil {
		problems = append(problems, "an UPDATE of an audit record went through")
	}
	time.Sleep(50 * time.Millisecond)
	if _, err := b.PruneAudit(ctxT(t), audit.PruneRequest{Before: res.Lease.AcquiredAt.Add(10 * time.Millisecond), Actor: "ops",
		RequestID: "prune"}); err != nil {
		t.Fatalf("prune: %v", err)
	}
	page, err := b.ReadAudit(ctxT(t), audit.Query{Namespace: ns, Cursor: audit.EncodeCursor(1), Follow: true})
	if !errors.Is(err, audit.ErrPruned) {
		problems = append(problems, fmt.Sprintf("a follower's read from before the prune answered %d records, err %v, not behind a prune",
			len(page.Records), err))
	}
	t.Fatalf("health answered healthy with the audit trail's triggers disabled; then %s", strings.Join(problems, "; "))
}

// TestSweepKeepsRowsWhileTheSequenceGoesBack: the sweep removes a key's
// row only while any later acquire of the key is sure to draw a greater
// token: not while the fencing sequence counts down or cycles, which
// Health refuses (TestFencingSequenceThatGoesBackIsRefused) but a sweeper
// of a running service meets until the DBA fixes it.
func TestSweepKeepsRowsWhileTheSequenceGoesBack(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	key := keysIn(pgtest.Namespace())
	b := openBackend(t, dsn, nil)
	raw := rawPool(t, dsn)
	for i := range 3 {
		res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key(fmt.Sprintf("k%d", i)), Owner: "w",
			TTL: time.Millisecond, RequestID: fmt.Sprintf("a%d", i)})
		wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	}
	time.Sleep(5 * time.Millisecond)
	rows := func() int { return count(t, raw, "SELECT count(*) FROM leasestore_leases") }
	for _, alter := range []string{
		"ALTER SEQUENCE leasestore_fencing_seq INCREMENT BY -1",
		"ALTER SEQUENCE leasestore_fencing_seq INCREMENT BY 1 CYCLE",
	} {
		mustExec(t, raw, alter)
		if n, err := b.Sweep(ctxT(t), 100, 0); err != nil || n.Removed != 0 || rows() != 3 {
			t.Fatalf("sweep after %q: %+v, %v, %d rows left; want none removed", alter, n, err, rows())
		}
	}
	mustExec(t, raw, "ALTER SEQUENCE leasestore_fencing_seq NO CYCLE")
	if n, err := b.Sweep(ctxT(t), 100, 0); err != nil || n.Removed != 2 || rows() != 1 {
		t.Fatalf("sweep after the fix: %+v, %v, %d rows left; want k0's and k1's rows removed, k2's kept (the greatest token)",
			n, err, rows())
	}
}

// TestRaiseTokensRefusesASequenceThatGoesBack: fencing raise moves the
// sequence past every token; one that counts down, or cycles, would come
// back below that floor (a cycling one past its MAXVALUE at once). It is
// refused as Health refuses it, naming the fix, and moves nothing: neither
// the sequence nor the audit ids' offset.
func TestRaiseTokensRefusesASequenceThatGoesBack(t *testing.T) {
	t.Parallel()
	for _, alter := range []string{
		"ALTER SEQUENCE leasestore_fencing_seq INCREMENT BY -1",
		"ALTER SEQUENCE leasestore_fencing_seq CYCLE",
	} {
		t.Run(alter, func(t *testing.T) {
			t.Parallel()
			dsn := pgtest.MigratedDSN(t)
			b := openBackend(t, dsn, nil)
			raw := rawPool(t, dsn)
			cycle(t, b, "k", "w", "0", false)
			mustExec(t, raw, alter)
			last := count(t, raw, "SELECT last_value FROM leasestore_fencing_seq")
			offset := count(t, raw, "SELECT id_offset FROM leasestore_audit_era")
			floor, err := b.RaiseTokens(ctxT(t), protocol.MinTokenRaise)
			wantErrStatus(t, fmt.Sprintf("raise (floor %d)", floor), err, protocol.StatusUnavailable)
			if !strings.Contains(err.Error(), "ALTER SEQUENCE leasestore_fencing_seq INCREMENT BY 1 NO CYCLE") {
				t.Fatalf("raise: %v; want it to name the fix", err)
			}
			if now := count(t, raw, "SELECT last_value FROM leasestore_fencing_seq"); now != last {
				t.Fatalf("the refused raise moved the sequence from %d to %d", last, now)
			}
			if now := count(t, raw, "SELECT id_offset FROM leasestore_audit_era"); now != offset {
				t.Fatalf("the refused raise moved the audit ids' offset from %d to %d", offset, now)
			}
		})
	}
}

// TestFencingSequenceAtItsMaxValue: a DBA's MAXVALUE that the sequence
// reached makes every acquire fail (nextval: SQLSTATE 2200H). The acquire,
// fencing raise and Health answer unavailable naming the fix, not "the
// server refused the statement"; after it they serve again.
func TestFencingSequenceAtItsMaxValue(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	b := openBackend(t, dsn, nil)
	raw := rawPool(t, dsn)
	cycle(t, b, "k", "w", "0", false)
	first := cycle(t, b, "k", "w", "1", false).Token // MAXVALUE must be above MINVALUE (1)
	mustExec(t, raw, fmt.Sprintf("ALTER SEQUENCE leasestore_fencing_seq MAXVALUE %d", first))
	const fix = "ALTER SEQUENCE leasestore_fencing_seq NO MAXVALUE"
	wantFix := func(what string, err error) {
		t.Helper()
		wantErrStatus(t, what, err, protocol.StatusUnavailable)
		if !strings.Contains(err.Error(), fix) {
			t.Fatalf("%s: %v; want it to name %s", what, err, fix)
		}
	}
	res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("new"), Owner: "w", TTL: time.Minute, RequestID: "new"})
	if err == nil {
		t.Fatalf("acquire with the sequence at its MAXVALUE: %+v", res)
	}
	wantFix("acquire", err)
	_, err = b.RaiseTokens(ctxT(t), protocol.MinTokenRaise)
	wantFix("fencing raise", err)
	wantFix("health", b.Health(ctxT(t)))
	_, err = postgres.Open(ctxT(t), dsn, nil)
	wantFix("open", err)

	mustExec(t, raw, "ALTER SEQUENCE leasestore_fencing_seq "+strings.TrimPrefix(fix, "ALTER SEQUENCE leasestore_fencing_seq "))
	if err := b.Health(ctxT(t)); err != nil {
		t.Fatalf("health after the fix: %v", err)
	}
	res, err = b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("new"), Owner: "w", TTL: time.Minute, RequestID: "new2"})
	wantStatus(t, "acquire after the fix", res, err, protocol.StatusAcquired)
	if res.Lease.Token <= first {
		t.Fatalf("token %d after the fix, want above %d", res.Lease.Token, first)
	}
}

// TestAuditTriggersThatDoNotFireAreRefused: each way a DBA can stop one of
// the audit trail's triggers from firing (DISABLE TRIGGER by name, ENABLE
// REPLICA TRIGGER, DROP TRIGGER) is refused at Open, New and Health, naming
// the trigger and the fix; ENABLE ALWAYS TRIGGER fires in every session and
// is accepted.
func TestAuditTriggersThatDoNotFireAreRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ change, want string }{
		{"ALTER TABLE leasestore_audit DISABLE TRIGGER leasestore_audit_keep_pruned",
			"leasestore_audit_keep_pruned is disabled"},
		{"ALTER TABLE leasestore_audit ENABLE REPLICA TRIGGER leasestore_audit_no_update_delete",
			"leasestore_audit_no_update_delete fires only in replica sessions"},
		{"DROP TRIGGER leasestore_audit_no_truncate ON leasestore_audit",
			"leasestore_audit_no_truncate is missing"},
		{"ALTER TABLE leasestore_audit ENABLE ALWAYS TRIGGER leasestore_audit_keep_pruned", ""},
	} {
		t.Run(c.change, func(t *testing.T) {
			t.Parallel()
			dsn := pgtest.MigratedDSN(t)
			b := openBackend(t, dsn, nil)
			raw := rawPool(t, dsn)
			mustExec(t, raw, c.change)
			err := b.Health(ctxT(t))
			if c.want == "" {
				if err != nil {
					t.Fatalf("health: %v", err)
				}
				return
			}
			wantErrStatus(t, "health", err, protocol.StatusUnavailable)
			name := strings.Fields(c.want)[0]
			fix := "ALTER TABLE leasestore_audit ENABLE TRIGGER " + name
			if strings.HasPrefix(c.change, "DROP") {
				fix = "create " + name + " again as migrations/postgres/00001_leasestore.sql does"
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), fix) {
				t.Fatalf("health: %v; want it to say %q and name %q", err, c.want, fix)
			}
			_, err = postgres.Open(ctxT(t), dsn, nil)
			wantErrStatus(t, "open", err, protocol.StatusUnavailable)
			_, err = postgres.New(ctxT(t), raw, nil)
			wantErrStatus(t, "new", err, protocol.StatusUnavailable)
		})
	}
}

// TestPruneWindowGuardThatDoesNotFireIsRefused: the trigger that lets only
// a role that may delete audit records open the prune window (migration 8
// leaves it ENABLE ALWAYS) is one of the store's own triggers too.
// Disabled, firing only in replica sessions, or dropped, it lets a role
// without DELETE on the trail open the window and take or free a prune's
// request id, while Health answered healthy. Each is refused at Health
// and Open, naming the fix; ENABLE (it fires in every origin session,
// and a replica session is refused) is accepted.
func TestPruneWindowGuardThatDoesNotFireIsRefused(t *testing.T) {
	t.Parallel()
	const enable = "ALTER TABLE leasestore_audit_prune ENABLE ALWAYS TRIGGER leasestore_audit_prune_window_guard"
	for _, c := range []struct{ change, fix string }{
		{"ALTER TABLE leasestore_audit_prune DISABLE TRIGGER leasestore_audit_prune_window_guard", enable},
		{"ALTER TABLE leasestore_audit_prune ENABLE REPLICA TRIGGER leasestore_audit_prune_window_guard", enable},
		{"DROP TRIGGER leasestore_audit_prune_window_guard ON leasestore_audit_prune",
			"create leasestore_audit_prune_window_guard again as migrations/postgres/00008_prune_claim.sql does"},
		{"ALTER TABLE leasestore_audit_prune ENABLE TRIGGER leasestore_audit_prune_window_guard", ""},
	} {
		t.Run(c.change, func(t *testing.T) {
			t.Parallel()
			dsn := pgtest.MigratedDSN(t)
			b := openBackend(t, dsn, nil)
			mustExec(t, rawConn(t, dsn), c.change)
			err := b.Health(ctxT(t))
			if c.fix == "" {
				if err != nil {
					t.Fatalf("health: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Health answered healthy after %s", c.change)
			}
			wantErrStatus(t, "health", err, protocol.StatusUnavailable)
			if !strings.Contains(err.Error(), c.fix) {
				t.Fatalf("health: %v; want it to name %q", err, c.fix)
			}
			_, err = postgres.Open(ctxT(t), dsn, nil)
			wantErrStatus(t, "open", err, protocol.StatusUnavailable)
		})
	}
}

// TestPruneRefusesWhileItsMarkIsNotKept: a prune removes records only
// while the trigger that marks what it removed fires; otherwise a reader
// whose cursor lies before them would skip them silently. The prune is
// refused, naming the fix, removes nothing and writes no record; once the
// trigger is enabled again it runs, and the reader behind it is told.
func TestPruneRefusesWhileItsMarkIsNotKept(t *testing.T) {
	t.Parallel()
	for _, change := range []string{
		"ALTER TABLE leasestore_audit DISABLE TRIGGER leasestore_audit_keep_pruned",
		"ALTER TABLE leasestore_audit ENABLE REPLICA TRIGGER leasestore_audit_keep_pruned",
	} {
		t.Run(change, func(t *testing.T) {
			t.Parallel()
			dsn := pgtest.MigratedDSN(t)
			ns := pgtest.Namespace()
			key := keysIn(ns)
			b := openBackend(t, dsn, nil)
			raw := rawPool(t, dsn)
			res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "w", TTL: 10 * time.Millisecond, RequestID: "a"})
			wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
			mustExec(t, raw, change)
			records := count(t, raw, "SELECT count(*) FROM leasestore_audit")
			time.Sleep(50 * time.Millisecond)
			prune := audit.PruneRequest{Before: res.Lease.AcquiredAt.Add(10 * time.Millisecond), Actor: "ops", RequestID: "prune"}
			pruned, err := b.PruneAudit(ctxT(t), prune)
			wantErrStatus(t, fmt.Sprintf("prune (%+v)", pruned), err, protocol.StatusUnavailable)
			if !strings.Contains(err.Error(), "ALTER TABLE leasestore_audit ENABLE TRIGGER leasestore_audit_keep_pruned") {
				t.Fatalf("prune: %v; want it to name the fix", err)
			}
			if n := count(t, raw, "SELECT count(*) FROM leasestore_audit"); n != records || pruned.Removed != 0 {
				t.Fatalf("the refused prune removed records: %d left of %d, %+v", n, records, pruned)
			}

			mustExec(t, raw, "ALTER TABLE leasestore_audit ENABLE TRIGGER leasestore_audit_keep_pruned")
			if pruned, err = b.PruneAudit(ctxT(t), prune); err != nil || pruned.Removed != 1 {
				t.Fatalf("prune after the fix: %+v, %v; want the acquire's record removed", pruned, err)
			}
			_, err = b.ReadAudit(ctxT(t), audit.Query{Namespace: ns, Cursor: audit.EncodeCursor(1)})
			if !errors.Is(err, audit.ErrPruned) {
				t.Fatalf("a read from before the prune: %v; want it behind a prune", err)
			}
		})
	}
}
