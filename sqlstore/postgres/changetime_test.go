package postgres_test

import (
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
	"github.com/leasestore/leasestore/internal/testkit/changetimes"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// The time a change records is the time it takes effect, after any wait
// for its key: under contention on two keys (12 callers on two handles,
// leases released or left to expire, a sweeper with grace 0 removing
// ended rows), every acquire in the trail starts at or after the end of
// the key's previous lease (its release or revoke, else its expiry), and
// each record's times agree with the lease it wrote. The server's clock
// is the judge (no injected clock). Statements alone, and coalesced
// batches (MaxInFlight 2, so batches form): a batch reads each member's
// time after it holds the member's key; read once as now(), the
// transaction's start, it recorded acquires before the release they
// followed.
func TestChangeTimesFollowLockWaits(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	for _, c := range []struct {
		name string
		cfg  postgres.Config
	}{
		{"alone", postgres.Config{NoCoalescing: true}},
		{"coalesced", postgres.Config{MaxInFlight: 2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg1, cfg2 := c.cfg, c.cfg
			a, b := openBackend(t, dsn, &cfg1), openBackend(t, dsn, &cfg2)
			ns := "times-" + c.name // advisory locks are shared by every schema
			changetimes.Contend(t, []changetimes.Handle{a, b}, ns, 2*time.Second)
			changetimes.Check(t, a, ns)
		})
	}
}

// The same when the wait is for the key's row, which any session may lock
// (a DBA's SELECT ... FOR UPDATE, an UPDATE by hand): a change reads its
// time after it holds the row, so a renew that waited past the lease's
// expiry answers expired, and every change records a time at or after
// the moment the row was let go. It read the time before that wait: a
// renew answered renewed, and recorded, a lease that had expired before
// the change took effect.
func TestChangeTimesFollowRowLockWaits(t *testing.T) {
	dsn := pgtest.MigratedDSN(t)
	admin := rawPool(t, dsn)
	b := openBackend(t, dsn, &postgres.Config{NoCoalescing: true})
	ctx := ctxT(t)
	const hold = 1500 * time.Millisecond
	// lockRow holds the row of k for hold and returns the server's time
	// just before it let the row go.
	lockRow := func(k protocol.Key) <-chan time.Time {
		t.Helper()
		tx, err := admin.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SELECT FROM leasestore_leases WHERE namespace = $1 AND name = $2 FOR UPDATE`, k.Namespace, k.Name); err != nil {
			t.Fatal(err)
		}
		freed := make(chan time.Time, 1)
		go func() {
			time.Sleep(hold)
			var at time.Time
			if err := tx.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&at); err != nil {
				t.Error(err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Error(err)
			}
			freed <- at
		}()
		return freed
	}
	acquire := func(name string, ttl time.Duration) protocol.Lease {
		t.Helper()
		res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key(name), Owner: "o", TTL: ttl, RequestID: protocol.RandomRequestID()})
		wantStatus(t, "acquire "+name, res, err, protocol.StatusAcquired)
		return *res.Lease
	}

	t.Run("renew past the expiry", func(t *testing.T) {
		l := acquire("renewed", time.Second)
		freed := lockRow(l.Key)
		res, err := b.Renew(ctx, protocol.RenewRequest{Key: l.Key, Owner: "o", Token: l.Token, TTL: time.Minute, RequestID: protocol.RandomRequestID()})
		at := <-freed
		if err != nil || res.Status != protocol.StatusExpired {
			t.Fatalf("renew that waited for the row until %s, after the lease's expiry %s: %s %+v, %v; want expired",
				at.Format(time.RFC3339Nano), l.ExpiresAt.Format(time.RFC3339Nano), res.Status, res.Lease, err)
		}
	})
	// Each change of a live lease, and an acquire of a released key,
	// waiting for the row: its audit record's time.
	for _, c := range []struct {
		name   string
		change func(l protocol.Lease) (protocol.Result, error)
	}{
		{"renew", func(l protocol.Lease) (protocol.Result, error) {
			return b.Renew(ctx, protocol.RenewRequest{Key: l.Key, Owner: "o", Token: l.Token, TTL: time.Minute, RequestID: protocol.RandomRequestID()})
		}},
		{"release", func(l protocol.Lease) (protocol.Result, error) {
			return b.Release(ctx, protocol.ReleaseRequest{Key: l.Key, Owner: "o", Token: l.Token, RequestID: protocol.RandomRequestID()})
		}},
		{"revoke", func(l protocol.Lease) (protocol.Result, error) {
			return b.Revoke(ctx, protocol.RevokeRequest{Key: l.Key, Actor: "op", Reason: "test", RequestID: protocol.RandomRequestID()})
		}},
		{"acquire", func(l protocol.Lease) (protocol.Result, error) {
			return b.Acquire(ctx, protocol.AcquireRequest{Key: l.Key, Owner: "o2", TTL: time.Minute, RequestID: protocol.RandomRequestID()})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := acquire(c.name, time.Minute)
			if c.name == "acquire" {
				res, err := b.Release(ctx, protocol.ReleaseRequest{Key: l.Key, Owner: "o", Token: l.Token, RequestID: protocol.RandomRequestID()})
				wantStatus(t, "release before the acquire", res, err, protocol.StatusReleased)
			}
			freed := lockRow(l.Key)
			res, err := c.change(l)
			at := <-freed
			if err != nil || res.Lease == nil || res.Replayed {
				t.Fatalf("%s: %s %v", c.name, res.Status, err)
			}
			page, err := b.ReadAudit(ctx, audit.Query{Namespace: l.Key.Namespace, Key: l.Key.Name, Newest: true, Limit: 1})
			if err != nil || len(page.Records) != 1 || page.Records[0].Op != protocol.Op(c.name) {
				t.Fatalf("the %s's record: %+v, %v", c.name, page.Records, err)
			}
			if got := page.Records[0].At; got.Before(at) {
				t.Fatalf("%s recorded %s, %s before the row it waited for was let go (%s)", c.name,
					got.Format(time.RFC3339Nano), at.Sub(got), at.Format(time.RFC3339Nano))
			}
		})
	}
}

// Every writer of a key takes the key's advisory lock before its row's,
// also when the key has no row: a renew, release or revoke of a key that
// another transaction holds the lock of waits for it (the plan's row lock
// read the lock only through a join with the key's row, and a key without
// one answered at once).
func TestChangesOfAKeyWithoutARowTakeItsLock(t *testing.T) {
	dsn := pgtest.MigratedDSN(t)
	admin := rawPool(t, dsn)
	b := openBackend(t, dsn, &postgres.Config{NoCoalescing: true})
	ctx := ctxT(t)
	const hold = 700 * time.Millisecond
	k := key("no-row")
	for _, c := range []struct {
		name   string
		change func() (protocol.Result, error)
	}{
		{"renew", func() (protocol.Result, error) {
			return b.Renew(ctx, protocol.RenewRequest{Key: k, Owner: "o", Token: 1, TTL: time.Minute, RequestID: protocol.RandomRequestID()})
		}},
		{"release", func() (protocol.Result, error) {
			return b.Release(ctx, protocol.ReleaseRequest{Key: k, Owner: "o", Token: 1, RequestID: protocol.RandomRequestID()})
		}},
		{"revoke", func() (protocol.Result, error) {
			return b.Revoke(ctx, protocol.RevokeRequest{Key: k, Actor: "op", Reason: "test", RequestID: protocol.RandomRequestID()})
		}},
	} {
		tx, err := admin.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(1818583411, hashtext($1 || '/' || $2))`, k.Namespace, k.Name); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		go func() { time.Sleep(hold); _ = tx.Rollback(ctx) }()
		res, err := c.change()
		if took := time.Since(start); err != nil || res.Status != protocol.StatusNotFound || took < hold {
			t.Errorf("%s of a key without a row whose lock another transaction held for %v: %s, %v after %v; want not_found after the lock was let go",
				c.name, hold, res.Status, err, took)
		}
	}
}
