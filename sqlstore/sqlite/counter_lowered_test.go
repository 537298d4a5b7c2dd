package sqlite_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// TestFencingCounterLoweredBehindItsTriggerIsRefusedOrRepaired lowers the
// fencing counter from a second handle on the file (an operator's sqlite3
// shell, a script) the way its trigger allows: with the trigger dropped
// (or, in the sqlite3 shell, with `.dbconfig enable_trigger off`) and then
// created again with its migration's statement, as the refusal of a
// missing trigger tells the operator to. Every trigger is then as the
// migrations made it, but the counter is behind tokens the file issued
// and its audit trail records. DESIGN.md: every acquire issues a token
// strictly greater than every token ever issued for that key, and no
// operation a DBA may do breaks a guarantee: each is made harmless or
// refused at open/health (PostgreSQL repairs a fencing sequence behind the
// issued tokens at open and health). Here Open and Health must refuse the
// file, or the next acquire of the key must get a greater token.
func TestFencingCounterLoweredBehindItsTriggerIsRefusedOrRepaired(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	path := migratedFile(t)
	b := open(t, path, nil)
	var last int64
	for _, rid := range []string{"r1", "r2", "r3"} {
		last = cycleKey(t, b, "k", "w", rid, false)
	}

	triggers, err := migrations.SQLiteTriggers()
	if err != nil {
		t.Fatal(err)
	}
	var noDecrease string
	for _, tr := range triggers {
		if tr.Name == "leasestore_fencing_no_decrease" {
			noDecrease = tr.SQL
		}
	}
	if noDecrease == "" {
		t.Fatal("the migrations make no trigger leasestore_fencing_no_decrease")
	}
	other := otherHandle(t, path)
	for _, stmt := range []string{
		"DROP TRIGGER leasestore_fencing_no_decrease",
		"UPDATE leasestore_fencing SET last_token = 0 WHERE id = 1",
		noDecrease,
	} {
		if _, err := other.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}

	health := b.Health(ctx)
	again, openErr := sqlite.Open(ctx, path, nil)
	if openErr == nil {
		_ = again.Close(context.Background())
	}
	var pe *protocol.Error
	if errors.As(health, &pe) && pe.Status == protocol.StatusUnavailable && errors.As(openErr, &pe) && pe.Status == protocol.StatusUnavailable {
		return // refused at open and health
	}
	res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "w2", TTL: time.Minute, RequestID: "after"})
	wantStatus(t, "acquire after the counter was lowered", res, err, protocol.StatusAcquired)
	if res.Lease.Token <= last {
		t.Fatalf("the counter lowered behind the issued tokens was neither refused (health: %v; open: %v) nor repaired: "+
			"the key's last token was %d, the next acquire got %d", health, openErr, last, res.Lease.Token)
	}
}
