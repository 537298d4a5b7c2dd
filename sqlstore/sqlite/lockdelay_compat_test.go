package sqlite_test

import (
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/replaycompat"
	"github.com/leasestore/leasestore/migrations"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/sqlite"
)

// The previous release's (schema 3) acquire, release and revoke
// statements, verbatim, as a binary of that release still running during
// a rolling deploy sends them (without the fencing bump and audit record,
// which schema 4 does not change).
const (
	v3Acquire = `
INSERT INTO leasestore_leases (namespace, name, owner, token, acquired_at, renewed_at, expires_at, version)
VALUES (?1, ?2, ?3, (SELECT last_token + 1 FROM leasestore_fencing WHERE id = 1), ?4, ?4, ?5, ?6)
ON CONFLICT (namespace, name) DO UPDATE SET
    owner       = excluded.owner,
    token       = excluded.token,
    acquired_at = excluded.acquired_at,
    renewed_at  = excluded.renewed_at,
    expires_at  = excluded.expires_at,
    version     = excluded.version
WHERE leasestore_leases.expires_at <= ?4 AND leasestore_leases.version = ?6
RETURNING token`
	v3Bump    = `UPDATE leasestore_fencing SET last_token = last_token + 1 WHERE id = 1 RETURNING last_token`
	v3Release = `
DELETE FROM leasestore_leases
WHERE namespace = ?1 AND name = ?2 AND owner = ?3 AND token = ?4 AND expires_at > ?5 AND version = ?6
RETURNING acquired_at, renewed_at, expires_at`
)

// TestPreviousReleaseOnSchema4: the previous release keeps serving on the
// schema with lock-delays (rolling deploy). Its acquire inserts and takes
// over leases; its lease has no lock-delay even over a row that had one
// (the token changed), so its expiry frees the key at once for this
// release; its release of a lease with a lock-delay frees the key at once.
func TestPreviousReleaseOnSchema4(t *testing.T) {
	t.Parallel()
	path := migratedFile(t)
	clock := newClock()
	b := open(t, path, clock)
	rt := protocol.New(b, nil)
	ctx := ctxT(t)
	db, err := sqlite.OpenDB(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	us := func(tm time.Time) int64 { return tm.UnixMicro() }
	v3acquire := func(name, owner string, ttl time.Duration) int64 {
		t.Helper()
		now := clock.Now()
		var tok, last int64
		if err := db.QueryRowContext(ctx, v3Acquire, "ns", name, owner, us(now), us(now.Add(ttl)), 1).Scan(&tok); err != nil {
			t.Fatalf("previous release's acquire of %s: %v", name, err)
		}
		if err := db.QueryRowContext(ctx, v3Bump).Scan(&last); err != nil || last != tok {
			t.Fatalf("bump: %d %v, want %d", last, err, tok)
		}
		return tok
	}

	// A lease of this release with a lock-delay runs out; the previous
	// release takes the key over (it knows no delay), and its lease has none.
	res, err := rt.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "new", TTL: time.Second, LockDelay: time.Hour})
	wantStatus(t, "acquire with a lock-delay", res, err, protocol.StatusAcquired)
	clock.Advance(time.Second)
	tok := v3acquire("k", "old", time.Second)
	got, err := rt.Get(ctx, protocol.GetRequest{Key: key("k")})
	wantStatus(t, "get", got, err, protocol.StatusFound)
	if got.Lease.Token != tok || got.Lease.LockDelay != 0 {
		t.Fatalf("the previous release's lease: %+v, want token %d and no lock-delay", got.Lease, tok)
	}
	clock.Advance(time.Second)
	res, err = rt.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "new", TTL: time.Minute})
	wantStatus(t, "acquire after the previous release's lease ran out", res, err, protocol.StatusAcquired)

	// The previous release releases a lease of this release with a
	// lock-delay: the key is free at once.
	res, err = rt.Acquire(ctx, protocol.AcquireRequest{Key: key("r"), Owner: "w", TTL: time.Minute, LockDelay: time.Hour})
	wantStatus(t, "acquire with a lock-delay", res, err, protocol.StatusAcquired)
	if _, err := db.ExecContext(ctx, v3Release, "ns", "r", "w", res.Lease.Token, us(clock.Now()), 1); err != nil {
		t.Fatalf("previous release's release: %v", err)
	}
	res, err = rt.Acquire(ctx, protocol.AcquireRequest{Key: key("r"), Owner: "x", TTL: time.Minute})
	wantStatus(t, "acquire after the previous release's release", res, err, protocol.StatusAcquired)

	// A fresh key through the previous release.
	v3acquire("fresh", "old", time.Minute)
}

// TestReplayOfRecordWithoutLockDelay: a record written before schema 5
// replays with lock-delay 0 (replaycompat); migrating down to 4 drops the
// records' lock-delay, and up again brings the column back NULL.
func TestReplayOfRecordWithoutLockDelay(t *testing.T) {
	t.Parallel()
	path := migratedFile(t)
	ctx := ctxT(t)
	open := func() protocol.Backend {
		b, err := sqlite.Open(ctx, path, nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	replaycompat.Check(ctx, t, "ns", open, func() {
		db := rawDB(t, path)
		for v := migrations.LatestVersion; v > 4; v-- {
			if _, err := migrations.Down(ctx, migrations.SQLite, db); err != nil {
				t.Fatalf("migrate down from %d to 4 with records: %v", v, err)
			}
		}
		if _, err := migrations.Up(ctx, migrations.SQLite, db); err != nil {
			t.Fatalf("migrate up again: %v", err)
		}
	})
}
