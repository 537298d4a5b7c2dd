package postgres_test

import (
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// TestRenewWithoutTTLKeepsTheTTLAcrossADaylightSavingChange renews, without
// a TTL, a lease of 48h over the night a session time zone (a server's
// timezone setting, a role's or the DSN's) moves its clocks: the contract
// says such a renew keeps the lease's own TTL, so the lease must end 48h
// after the renew, on the store's single statement and on RenewMany's
// batch alike. The server's timestamptz - timestamptz gives whole days for
// every 24h, and adding a day in a zone with daylight saving adds 23h or
// 25h of elapsed time.
func TestRenewWithoutTTLKeepsTheTTLAcrossADaylightSavingChange(t *testing.T) {
	t.Parallel()
	// New York moves its clocks forward at 2026-03-08 02:00 local (07:00 UTC).
	before := time.Date(2026, 3, 7, 17, 0, 0, 0, time.UTC)
	dsn := pgtest.MigratedDSN(t) + "&timezone=America/New_York"
	b := openBackend(t, dsn, postgres.WithTestClock(nil, func() time.Time { return before }))
	ctx := ctxT(t)
	const ttl = 48 * time.Hour
	for i, name := range []string{"alone", "many"} {
		got, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key(name), Owner: "o", TTL: ttl, RequestID: "a-" + name})
		wantStatus(t, "acquire "+name, got, err, protocol.StatusAcquired)
		if d := got.Lease.ExpiresAt.Sub(got.Lease.AcquiredAt); d != ttl {
			t.Fatalf("acquire %s: expires %v after it was acquired, want %v", name, d, ttl)
		}
		req := protocol.RenewRequest{Key: key(name), Owner: "o", Token: got.Lease.Token, RequestID: "r-" + name}
		var renewed protocol.Result
		if i == 0 {
			renewed, err = b.Renew(ctx, req)
		} else {
			var many []protocol.Result
			many, err = b.RenewMany(ctx, []protocol.RenewRequest{req, {Key: key("absent"), Owner: "o", Token: 1, RequestID: "r-absent"}})
			if err == nil {
				renewed = many[0]
			}
		}
		wantStatus(t, "renew "+name, renewed, err, protocol.StatusRenewed)
		if d := renewed.Lease.ExpiresAt.Sub(renewed.Lease.RenewedAt); d != ttl {
			t.Errorf("renew (%s) without a TTL under TimeZone America/New_York: the lease now expires %v after the renew, want its own TTL %v",
				name, d, ttl)
		}
	}
}
