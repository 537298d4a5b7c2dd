package postgres_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
)

// rev72: a DBA's ALTER SEQUENCE of leasestore_fencing_seq other than its
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
