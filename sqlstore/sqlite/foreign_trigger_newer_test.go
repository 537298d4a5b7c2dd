package sqlite_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// TestForeignTriggerOnANewerSchemaIsRefused: during a rolling deploy this
// release serves the next release's schema, whose migrations may add
// triggers of their own, every one named leasestore_... A trigger of
// someone else's on the store's tables is refused all the same, as the
// PostgreSQL backend refuses it (storeObjectsError passes only unknown
// triggers named leasestore_ on a newer schema): one that rewrites the
// owner of every acquired lease makes an acquire answer a holder that a
// get does not show. On SQLite no trigger was looked at on a newer schema.
func TestForeignTriggerOnANewerSchemaIsRefused(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	path := migratedFile(t)
	b := open(t, path, nil)
	other := otherHandle(t, path)
	for _, q := range []string{
		fmt.Sprintf("INSERT INTO %s (version_id, is_applied) VALUES (%d, 1)", migrations.VersionTable, migrations.LatestVersion+1),
		// The next release's own trigger: served.
		`CREATE TRIGGER leasestore_next_guard BEFORE UPDATE ON leasestore_leases WHEN 0 BEGIN SELECT 1; END`,
		// A DBA's: refused.
		`CREATE TRIGGER reassign AFTER INSERT ON leasestore_leases
BEGIN UPDATE leasestore_leases SET owner = 'mallory' WHERE namespace = NEW.namespace AND name = NEW.name; END`,
	} {
		if _, err := other.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	health := b.Health(ctx)
	again, openErr := sqlite.Open(ctx, path, nil)
	if openErr == nil {
		_ = again.Close(context.Background())
	}
	for what, err := range map[string]error{"health": health, "open": openErr} {
		if protocol.StatusOf(err) != protocol.StatusUnavailable || !strings.Contains(fmt.Sprint(err), "reassign") ||
			strings.Contains(fmt.Sprint(err), "leasestore_next_guard") {
			t.Errorf("%s of schema %d (newer than this release's %d) with a DBA's trigger reassign on leasestore_leases "+
				"beside the next release's leasestore_next_guard: %v; want unavailable naming reassign alone",
				what, migrations.LatestVersion+1, migrations.LatestVersion, err)
		}
	}

	if _, err := other.ExecContext(ctx, `DROP TRIGGER reassign`); err != nil {
		t.Fatal(err)
	}
	if err := b.Health(ctx); err != nil {
		t.Errorf("health of the newer schema with the next release's own trigger alone: %v; want nil", err)
	}
	// At this release's own schema every trigger is known: the same
	// trigger is no migration's.
	if _, err := other.ExecContext(ctx, "DELETE FROM "+migrations.VersionTable+" WHERE version_id = ?", migrations.LatestVersion+1); err != nil {
		t.Fatal(err)
	}
	expectStatus(t, "health at this release's schema", b.Health(ctx), protocol.StatusUnavailable, "leasestore_next_guard")
}
