package postgres_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
)

// TestOperationsOnASchemaRolledBackUnderThemNameTheVersions: a deployer
// runs `leasectl migrate down` while a release that needs the newest
// version serves. Health names both versions (TestHealthRefusesASchemaItCannotServe
// in open_test.go); the operations that meet the missing objects first
// (an audit read: leasestore_audit_pruned_mark of version 11; an acquire,
// four versions down: leasestore_outcome_fresh of version 9) say instead
// that the leasestore schema is missing from the connection's
// search_path, which sends the operator to check a search_path that is
// right. DESIGN.md: a schema a release cannot serve is refused with an
// error naming both versions.
func TestOperationsOnASchemaRolledBackUnderThemNameTheVersions(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	b := openBackend(t, dsn, nil)
	ns := pgtest.Namespace()
	key := keysIn(ns)
	res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute, RequestID: "a"})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	db := sqlDB(t, dsn)
	for range 4 { // to version 8
		if _, err := migrations.Down(ctxT(t), migrations.Postgres, db); err != nil {
			t.Fatal(err)
		}
	}
	want := fmt.Sprintf("version %d, this release needs %d", migrations.LatestVersion-4, migrations.LatestVersion)
	_, err = b.ReadAudit(ctxT(t), audit.Query{Namespace: ns})
	wantErrStatus(t, "audit read", err, protocol.StatusUnavailable)
	if !strings.Contains(err.Error(), want) {
		t.Errorf("audit read on the rolled-back schema: %q does not say %q", err, want)
	}
	_, err = b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k2"), Owner: "o", TTL: time.Minute, RequestID: "a2"})
	wantErrStatus(t, "acquire", err, protocol.StatusUnavailable)
	if !strings.Contains(err.Error(), want) {
		t.Errorf("acquire on the rolled-back schema: %q does not say %q", err, want)
	}
}
