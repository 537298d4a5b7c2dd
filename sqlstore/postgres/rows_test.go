package postgres_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/backendkit"
	"github.com/leasestore/leasestore/contract"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// wantVersionRefusal checks that err refuses a row of table at version 2.
func wantVersionRefusal(t *testing.T, what string, err error, table string) {
	t.Helper()
	wantErrStatus(t, what, err, protocol.StatusUnavailable)
	for _, s := range []string{table, "version 2", "version 1"} {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("%s: error %q does not mention %q", what, err, s)
		}
	}
}

func TestUnknownLeaseVersionIsRefused(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	clock := contract.NewClock()
	b := openBackend(t, dsn, postgres.WithTestClock(nil, clock.Now))
	raw := rawPool(t, dsn)
	ctx := ctxT(t)
	// A live row and an expired row, both written by a future release.
	mustExec(t, raw, `INSERT INTO leasestore_leases VALUES
		('ns', 'live', 'future', 7, $1, $1, $1::timestamptz + interval '1 hour', 2),
		('ns', 'gone', 'future', 8, $1, $1, $1::timestamptz - interval '1 hour', 2)`, clock.Now())
	before := count(t, raw, "SELECT count(*) FROM leasestore_leases WHERE version = 2 AND token IN (7, 8)")

	for _, name := range []string{"live", "gone"} {
		_, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key(name), Owner: "o", TTL: time.Minute, RequestID: "a-" + name})
		wantVersionRefusal(t, "acquire "+name, err, "leasestore_leases")
		_, err = b.Renew(ctx, protocol.RenewRequest{Key: key(name), Owner: "future", Token: 7, TTL: time.Minute, RequestID: "r-" + name})
		wantVersionRefusal(t, "renew "+name, err, "leasestore_leases")
		_, err = b.Release(ctx, protocol.ReleaseRequest{Key: key(name), Owner: "future", Token: 7, RequestID: "l-" + name})
		wantVersionRefusal(t, "release "+name, err, "leasestore_leases")
		_, err = b.Revoke(ctx, protocol.RevokeRequest{Key: key(name), Actor: "op", Reason: "r", RequestID: "v-" + name})
		wantVersionRefusal(t, "revoke "+name, err, "leasestore_leases")
		_, err = b.Get(ctx, protocol.GetRequest{Key: key(name), RequestID: "g"})
		wantVersionRefusal(t, "get "+name, err, "leasestore_leases")
	}
	_, err := b.List(ctx, protocol.ListRequest{Namespace: "ns", IncludeExpired: true, RequestID: "s"})
	wantVersionRefusal(t, "list", err, "leasestore_leases")

	// Nothing was changed or recorded.
	if after := count(t, raw, "SELECT count(*) FROM leasestore_leases WHERE version = 2 AND token IN (7, 8)"); after != before || after != 2 {
		t.Fatalf("%d rows of version 2 remain, want 2", after)
	}
	if n := count(t, raw, "SELECT count(*) FROM leasestore_audit"); n != 0 {
		t.Fatalf("%d audit rows, want none", n)
	}
	// Other keys still work.
	res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("other"), Owner: "o", TTL: time.Minute, RequestID: "a-other"})
	wantStatus(t, "acquire other", res, err, protocol.StatusAcquired)
}

func TestUnknownAuditVersionIsRefused(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	b := openBackend(t, dsn, nil)
	raw := rawPool(t, dsn)
	ctx := ctxT(t)
	req := protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute, RequestID: "future-request"}
	mustExec(t, raw, `INSERT INTO leasestore_audit (id, at, op, namespace, name, owner, token, request_id, actor, reason,
		status, version, params_hash, expires_at)
		VALUES (1, now(), 'acquire', 'ns', 'k', 'o', 1, $1, 'o', '', 'acquired', 2, $2, now() + interval '1 minute')`,
		req.RequestID, backendkit.Fingerprint(req))

	_, err := b.Acquire(ctx, req)
	wantVersionRefusal(t, "replay of a future record", err, "leasestore_audit")
	if n := count(t, raw, "SELECT count(*) FROM leasestore_leases"); n != 0 {
		t.Fatalf("%d leases, want none", n)
	}
	_, err = b.ReadAudit(ctx, audit.Query{})
	wantVersionRefusal(t, "read audit", err, "leasestore_audit")
}

func TestAuditTrailIsAppendOnly(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	b := openBackend(t, dsn, nil)
	res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute, RequestID: "a"})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	raw := rawPool(t, dsn)
	for _, stmt := range []string{
		"UPDATE leasestore_audit SET owner = 'forged'",
		"DELETE FROM leasestore_audit",
		"TRUNCATE leasestore_audit",
	} {
		_, err := raw.Exec(ctxT(t), stmt)
		if err == nil {
			t.Fatalf("%s: accepted", stmt)
		}
		pe, ok := err.(*pgconn.PgError)
		if !ok || pe.Code != "42501" || !strings.Contains(pe.Message, "append-only") {
			t.Fatalf("%s: error %v, want the append-only refusal (SQLSTATE 42501)", stmt, err)
		}
	}
	if n := count(t, raw, "SELECT count(*) FROM leasestore_audit WHERE owner = 'o'"); n != 1 {
		t.Fatalf("%d audit rows, want the 1 written", n)
	}
}

// TestAuditRecordsAreComplete checks the columns of each kind of record,
// read back through the reader and raw.
func TestAuditRecordsAreComplete(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	clock := contract.NewClock()
	b := openBackend(t, dsn, postgres.WithTestClock(nil, clock.Now))
	ctx := ctxT(t)
	acq, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute, RequestID: "a"})
	wantStatus(t, "acquire", acq, err, protocol.StatusAcquired)
	clock.Advance(time.Second)
	ren, err := b.Renew(ctx, protocol.RenewRequest{Key: key("k"), Owner: "o", Token: acq.Lease.Token, TTL: 2 * time.Minute, RequestID: "r"})
	wantStatus(t, "renew", ren, err, protocol.StatusRenewed)
	clock.Advance(time.Second)
	rev, err := b.Revoke(ctx, protocol.RevokeRequest{Key: key("k"), Actor: "admin", Reason: "stuck", RequestID: "v"})
	wantStatus(t, "revoke", rev, err, protocol.StatusRevoked)
	acq2, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "p", TTL: time.Minute, RequestID: "a2"})
	wantStatus(t, "acquire", acq2, err, protocol.StatusAcquired)
	rel, err := b.Release(ctx, protocol.ReleaseRequest{Key: key("k"), Owner: "p", Token: acq2.Lease.Token, RequestID: "l"})
	wantStatus(t, "release", rel, err, protocol.StatusReleased)

	page, err := b.ReadAudit(ctx, audit.Query{Namespace: "ns", Key: "k"})
	if err != nil {
		t.Fatal(err)
	}
	t0 := contract.ClockStart
	want := []audit.Record{
		{At: t0, Op: protocol.OpAcquire, Owner: "o", Token: acq.Lease.Token, RequestID: "a", Actor: "o", Status: protocol.StatusAcquired, ExpiresAt: t0.Add(time.Minute)},
		{At: t0.Add(time.Second), Op: protocol.OpRenew, Owner: "o", Token: acq.Lease.Token, RequestID: "r", Actor: "o", Status: protocol.StatusRenewed, ExpiresAt: t0.Add(time.Second + 2*time.Minute)},
		{At: t0.Add(2 * time.Second), Op: protocol.OpRevoke, Owner: "o", Token: acq.Lease.Token, RequestID: "v", Actor: "admin", Reason: "stuck", Status: protocol.StatusRevoked, ExpiresAt: t0.Add(time.Second + 2*time.Minute)},
		{At: t0.Add(2 * time.Second), Op: protocol.OpAcquire, Owner: "p", Token: acq2.Lease.Token, RequestID: "a2", Actor: "p", Status: protocol.StatusAcquired, ExpiresAt: t0.Add(2*time.Second + time.Minute)},
		{At: t0.Add(2 * time.Second), Op: protocol.OpRelease, Owner: "p", Token: acq2.Lease.Token, RequestID: "l", Actor: "p", Status: protocol.StatusReleased, ExpiresAt: t0.Add(2*time.Second + time.Minute)},
	}
	if len(page.Records) != len(want) {
		t.Fatalf("%d records, want %d: %+v", len(page.Records), len(want), page.Records)
	}
	for i, w := range want {
		got := page.Records[i]
		w.ID, w.Namespace, w.Key, w.Version = got.ID, "ns", "k", audit.RecordFormatVersion
		if got != w {
			t.Fatalf("record %d:\n got %+v\nwant %+v", i, got, w)
		}
		if i > 0 && got.ID <= page.Records[i-1].ID {
			t.Fatalf("record ids not increasing: %d after %d", got.ID, page.Records[i-1].ID)
		}
	}
	raw := rawPool(t, dsn)
	if n := count(t, raw, `SELECT count(*) FROM leasestore_audit
		WHERE params_hash <> '' AND expires_at IS NOT NULL AND acquired_at IS NOT NULL AND renewed_at IS NOT NULL`); n != len(want) {
		t.Fatalf("%d rows with a params hash and the lease's times, want %d", n, len(want))
	}
}

// TestOutcomesUnderASessionTimeZone runs with a session time zone far from
// UTC: leases read back on every path (the changed row, and the rows that
// leasestore_outcome returns as JSON for conflicts and replays) must keep
// their instants to the microsecond.
func TestOutcomesUnderASessionTimeZone(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t) + "&timezone=Asia/Kathmandu"
	b := openBackend(t, dsn, nil)
	var tz string
	if err := b.Pool().QueryRow(ctxT(t), "SHOW TimeZone").Scan(&tz); err != nil || tz != "Asia/Kathmandu" {
		t.Fatalf("session time zone %q (%v)", tz, err)
	}
	ctx := ctxT(t)
	// A token drawn first, so that k's is at least 2 and the stale renew's
	// (one below it) positive: a token of 0 is invalid input.
	warm, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("warm"), Owner: "o", TTL: time.Minute, RequestID: "w"})
	wantStatus(t, "acquire warm", warm, err, protocol.StatusAcquired)
	req := protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: 90*time.Second + 123*time.Microsecond, RequestID: "a"}
	first, err := b.Acquire(ctx, req)
	wantStatus(t, "acquire", first, err, protocol.StatusAcquired)
	held := *first.Lease
	if got := held.ExpiresAt.Sub(held.AcquiredAt); got != req.TTL {
		t.Fatalf("expires %v after acquired, want %v", got, req.TTL)
	}
	conflict, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "p", TTL: time.Minute, RequestID: "b"})
	wantStatus(t, "conflict", conflict, err, protocol.StatusConflict)
	replay, err := b.Acquire(ctx, req)
	wantStatus(t, "replay", replay, err, protocol.StatusAcquired)
	for what, l := range map[string]*protocol.Lease{"conflict": conflict.Lease, "replay": replay.Lease} {
		if l == nil || l.Owner != held.Owner || l.Token != held.Token || !l.AcquiredAt.Equal(held.AcquiredAt) ||
			!l.ExpiresAt.Equal(held.ExpiresAt) || l.ExpiresAt.Location() != time.UTC {
			t.Fatalf("%s carries %+v, want %+v in UTC", what, l, held)
		}
	}
	stale, err := b.Renew(ctx, protocol.RenewRequest{Key: key("k"), Owner: "o", Token: held.Token - 1, TTL: time.Minute, RequestID: "c"})
	wantStatus(t, "stale renew", stale, err, protocol.StatusStaleToken)
	if stale.Lease == nil || !stale.Lease.RenewedAt.Equal(held.RenewedAt) {
		t.Fatalf("stale renew carries %+v, want %+v", stale.Lease, held)
	}
}
