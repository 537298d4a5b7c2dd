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
)

// A DBA's ALTER SEQUENCE of leasestore_fencing_seq other than its
// cache (docs/postgres-settings.md refuses only CACHE n > 1): a sequence
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
				return // refused at health, naming it: fine
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
