package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// showSetting reads a setting on a connection of b's pool.
func showSetting(t *testing.T, b *postgres.Backend, name string) string {
	t.Helper()
	var v string
	if err := b.Pool().QueryRow(ctxT(t), "SELECT current_setting($1)", name).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// A role whose sessions get a lock_timeout of 2ms (and an
// idle_in_transaction_session_timeout and idle_session_timeout) gives the
// pools of Open no false timeouts: they pin each to 0, so a renew that
// waits 300 ms for its key's row (locked by another session) answers
// renewed, not timeout within milliseconds (SQLSTATE 55P03).
func TestRoleTimeoutsArePinned(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	roleDSN := pgtest.RoleDSN(t, dsn, "lock_timeout = 2ms", "idle_in_transaction_session_timeout = 5ms",
		"idle_session_timeout = 250ms") // above a loaded machine's pause between the probe's connect and its query
	probe := rawConn(t, roleDSN)
	var lt string
	if err := probe.QueryRow(ctxT(t), "SELECT current_setting('lock_timeout')").Scan(&lt); err != nil || lt != "2ms" {
		t.Fatalf("the role's sessions have lock_timeout %q (%v), want 2ms: the test would prove nothing", lt, err)
	}
	b := openBackend(t, roleDSN, &postgres.Config{NoCoalescing: true})
	for _, name := range []string{"lock_timeout", "idle_in_transaction_session_timeout", "idle_session_timeout"} {
		if v := showSetting(t, b, name); v != "0" {
			t.Errorf("%s is %q on the pool's connections, want 0", name, v)
		}
	}
	ctx := ctxT(t)
	res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute, RequestID: "r1"})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	locker := rawConn(t, dsn)
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, tx, `SELECT 1 FROM leasestore_leases WHERE namespace = 'ns' AND name = 'k' FOR UPDATE`)
	unlocked := make(chan struct{})
	var unlockErr error
	go func() {
		defer close(unlocked)
		time.Sleep(300 * time.Millisecond)
		unlockErr = tx.Rollback(context.Background())
	}()
	defer func() { <-unlocked }() // before the connection's cleanup closes it
	start := time.Now()
	res, err = b.Renew(ctx, protocol.RenewRequest{Key: key("k"), Owner: "o", Token: res.Lease.Token, TTL: time.Minute, RequestID: "r2"})
	wantStatus(t, "renew that waited for the row lock", res, err, protocol.StatusRenewed)
	if waited := time.Since(start); waited < 250*time.Millisecond {
		t.Fatalf("the renew answered after %s: it did not wait for the row lock (the test would prove nothing)", waited)
	}
	<-unlocked
	if unlockErr != nil {
		t.Fatal(unlockErr)
	}
	time.Sleep(400 * time.Millisecond) // idle past the role's idle_session_timeout
	res, err = b.Get(ctx, protocol.GetRequest{Key: key("k")})
	wantStatus(t, "get after an idle pause", res, err, protocol.StatusFound)
	if err := b.Health(ctx); err != nil {
		t.Fatalf("health: %v", err)
	}
}

// A borrowed pool keeps its settings: one whose lock_timeout or
// idle_in_transaction_session_timeout is below the backend's statement
// bound, or whose session_replication_role is replica (the audit trail's
// triggers would not fire), is refused by New naming the setting.
func TestBorrowedPoolSettingsAreRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ setting, value, want string }{
		{"lock_timeout", "2ms", "lock_timeout is 2ms"},
		{"idle_in_transaction_session_timeout", "1s", "idle_in_transaction_session_timeout is 1s"},
		{"session_replication_role", "replica", "session_replication_role is replica"},
	} {
		t.Run(tc.setting, func(t *testing.T) {
			t.Parallel()
			pool := rawPool(t, withServerOption(t, pgtest.MigratedDSN(t), tc.setting, tc.value))
			_, err := postgres.New(ctxT(t), pool, nil)
			if err == nil || !errors.Is(err, protocol.ErrUnavailable) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New on a pool with %s = %s: %v, want unavailable naming %q", tc.setting, tc.value, err, tc.want)
			}
		})
	}
	// At or above the bound, a timeout changes nothing the backend answers.
	pool := rawPool(t, withServerOption(t, pgtest.MigratedDSN(t), "lock_timeout", "1min"))
	b, err := postgres.New(ctxT(t), pool, nil)
	if err != nil {
		t.Fatalf("New on a pool with lock_timeout = 1min: %v", err)
	}
	_ = b.Close(context.Background())
}

// A role whose sessions are read-only by default (as a replica's DSN given
// by mistake) opens, serves reads, and is reported unhealthy naming why;
// a write answers unavailable saying the connection is read-only.
func TestReadOnlyRoleIsUnhealthy(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	writer := openBackend(t, dsn, nil)
	res, err := writer.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k"), Owner: "o", TTL: time.Minute, RequestID: "r1"})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)

	b := openBackend(t, pgtest.RoleDSN(t, dsn, "default_transaction_read_only = on"), nil)
	res, err = b.Get(ctxT(t), protocol.GetRequest{Key: key("k")})
	wantStatus(t, "get through the read-only role", res, err, protocol.StatusFound)
	err = b.Health(ctxT(t))
	if !errors.Is(err, protocol.ErrUnavailable) || !strings.Contains(err.Error(), "default_transaction_read_only") {
		t.Fatalf("health through a read-only role: %v, want unavailable naming default_transaction_read_only", err)
	}
	_, err = b.Acquire(ctxT(t), protocol.AcquireRequest{Key: key("k2"), Owner: "o", TTL: time.Minute, RequestID: "r2"})
	if !errors.Is(err, protocol.ErrUnavailable) || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("acquire through a read-only role: %v, want unavailable saying read-only", err)
	}
}
