package postgres_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasestore/leasestore/internal/testkit/getspy"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// listenerPIDs returns the server pids of the listener connections of
// backends with application name app: the sessions that hold a waiter's
// advisory lock.
func listenerPIDs(t *testing.T, pool *pgxpool.Pool, app string) []int32 {
	t.Helper()
	return pids(t, pool, `
SELECT DISTINCT a.pid FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid
WHERE a.application_name = $1 AND l.locktype = 'advisory' AND l.classid = 1818583412 AND l.mode = 'ShareLock' AND l.granted`, app)
}

// listenerSessions returns the server pids of the sessions of backends
// with application name app whose last statement was LISTEN or a waiter's
// lock or unlock: the listener connections, whether or not anyone waits.
func listenerSessions(t *testing.T, pool *pgxpool.Pool, app string) []int32 {
	t.Helper()
	return pids(t, pool, `
SELECT pid FROM pg_stat_activity
WHERE application_name = $1 AND (query LIKE 'LISTEN %' OR query LIKE '%pg_advisory_%lock_shared(1818583412%')`, app)
}

// pids runs query, which selects server pids, with arg.
func pids(t *testing.T, pool *pgxpool.Pool, query string, arg any) []int32 {
	t.Helper()
	rows, err := pool.Query(ctxT(t), query, arg)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int32
	for rows.Next() {
		var pid int32
		if err := rows.Scan(&pid); err != nil {
			t.Fatal(err)
		}
		out = append(out, pid)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// A waiter's registration survives its listener connection dying: the
// backend reconnects, takes the key's lock again, and a later release
// still wakes it. No key changed meanwhile, so the reconnection itself
// wakes nobody (it used to signal every waiter twice: at the break and
// once the locks were held again).
func TestListenerReconnects(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	app := appName(t)
	waiter := openBackend(t, dsn, &postgres.Config{ApplicationName: app})
	other := openBackend(t, dsn, nil)
	raw := rawPool(t, dsn) // one pool for every look at the sessions
	k := key("k")
	ch, cancel, err := waiter.Subscribe(ctxT(t), k)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	pids := listenerPIDs(t, raw, app)
	if len(pids) != 1 {
		t.Fatalf("%d listener sessions hold the key's wait lock, want 1", len(pids))
	}
	mustExec(t, raw, `SELECT pg_terminate_backend($1)`, pids[0])
	// The backend reconnects and registers the key again.
	deadline := time.Now().Add(opTimeout)
	for {
		now := listenerPIDs(t, raw, app)
		if len(now) == 1 && now[0] != pids[0] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new listener session holds the key's wait lock (now %v, before %d)", now, pids[0])
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case <-ch:
		t.Fatal("the reconnection signalled the waiter although its key did not change")
	case <-time.After(200 * time.Millisecond):
	}
	rt := protocol.New(other, nil)
	res, err := rt.Acquire(ctxT(t), protocol.AcquireRequest{Key: k, Owner: "o", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Release(ctxT(t), protocol.ReleaseRequest{Key: k, Owner: "o", Token: res.Lease.Token}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(opTimeout):
		t.Fatal("a release after the reconnection did not wake the waiter")
	}
	// Cancelling the subscription lets the lock go.
	cancel()
	deadline = time.Now().Add(opTimeout)
	for len(listenerPIDs(t, raw, app)) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the wait lock is still held after the subscription was cancelled")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A holder hears a revoke at once (docs/holding.md) also when it commits
// while the listener reconnects: the revoke finds the key's wait lock
// free (the old session is gone, the new one has not taken it yet) and
// sends no notification. The new connection, once it holds the locks,
// finds the key's row changed and signals its waiters, and the holder's
// read finds the revoke. It used to hear of it at its next renewal, 20s
// later. The listener is held disconnected (WithReconnectHook) until the
// revoke committed.
func TestHoldHearsARevokeDuringTheListenersReconnection(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	app := appName(t)
	cfg, reconnecting, resume := reconnectHeld(app)
	defer resume()
	holder := protocol.New(openBackend(t, dsn, cfg), nil)
	other := protocol.New(openBackend(t, dsn, nil), nil)
	raw := rawPool(t, dsn)
	spy := getspy.New(holder)
	k := keysIn(pgtest.Namespace())("job")
	h, err := protocol.Hold(ctxT(t), spy, protocol.AcquireRequest{Key: k, Owner: "w1", TTL: time.Minute},
		&protocol.HoldConfig{RenewEvery: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h.Release(context.Background()); <-h.Done() }()
	select { // the read once the subscription is live
	case <-spy.Gets:
	case <-time.After(opTimeout):
		t.Fatal("no read after the subscription")
	}
	pids := listenerPIDs(t, raw, app)
	if len(pids) != 1 {
		t.Fatalf("%d listener sessions hold the key's wait lock, want 1", len(pids))
	}
	mustExec(t, raw, `SELECT pg_terminate_backend($1)`, pids[0])
	select {
	case <-reconnecting:
	case <-time.After(opTimeout):
		t.Fatal("the listener did not set out to reconnect after its connection died")
	}
	if _, err := other.Revoke(ctxT(t), protocol.RevokeRequest{Key: k, Actor: "op", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	resume()
	select {
	case <-h.Context().Done():
		if !errors.Is(context.Cause(h.Context()), protocol.ErrNotFound) {
			t.Fatalf("the holder lost the lease with %v, want a cause matching ErrNotFound", context.Cause(h.Context()))
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("revoke committed %v ago, while the listener was disconnected: the holder has not heard of it (renewals every 20s)",
			time.Since(revoked).Round(time.Millisecond))
	}
}

// The listener connection is closed once no waiter needed it for
// Config.ListenerIdle, and opened again by the next wait, which a release
// still wakes.
func TestListenerLetsGoWhenIdle(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	app := appName(t)
	const idle = time.Second
	waiter := openBackend(t, dsn, &postgres.Config{ApplicationName: app, ListenerIdle: idle})
	raw := rawPool(t, dsn) // one pool for every look at the sessions
	other := protocol.New(openBackend(t, dsn, nil), nil)
	k := key("k")
	for round := range 2 {
		ch, cancel, err := waiter.Subscribe(ctxT(t), k)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(listenerSessions(t, raw, app)); n != 1 {
			t.Fatalf("round %d: %d listener sessions while a waiter waits, want 1", round, n)
		}
		res, err := other.Acquire(ctxT(t), protocol.AcquireRequest{Key: k, Owner: "o", TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := other.Release(ctxT(t), protocol.ReleaseRequest{Key: k, Owner: "o", Token: res.Lease.Token}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ch:
		case <-time.After(opTimeout):
			t.Fatalf("round %d: the release did not wake the waiter", round)
		}
		cancel()
		stopped := time.Now()
		deadline := stopped.Add(opTimeout)
		for len(listenerSessions(t, raw, app)) != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the listener connection is still open %v after the last waiter stopped (ListenerIdle %v)",
					round, opTimeout, idle)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if took := time.Since(stopped); took < idle/2 {
			t.Errorf("round %d: the listener connection was closed %v after the last waiter stopped, before ListenerIdle %v", round, took, idle)
		}
	}
}

// A Config.ListenDSN that reaches another schema (or database) than the
// pool's hears no release of the store's: its notifications name the
// pool's schema, and a database's channels are its own. Subscribe must
// refuse it, naming ListenDSN, so that waiters poll; it succeeded, and a
// waiter slept up to its 30 s recheck after each release, and a holder
// (Hold, the scheduler, run) never heard a revoke at once.
func TestListenDSNOfAnotherSchemaIsRefused(t *testing.T) {
	t.Parallel()
	dsn, elsewhere := pgtest.MigratedDSN(t), pgtest.MigratedDSN(t)
	b := openBackend(t, dsn, &postgres.Config{ListenDSN: elsewhere})
	k := keysIn(pgtest.Namespace())("k")
	ch, cancel, err := b.Subscribe(ctxT(t), k)
	if err == nil {
		defer cancel()
		res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: k, Owner: "o", TTL: time.Minute, RequestID: "a"})
		wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
		rel, err := b.Release(ctxT(t), protocol.ReleaseRequest{Key: k, Owner: "o", Token: res.Lease.Token, RequestID: "r"})
		wantStatus(t, "release", rel, err, protocol.StatusReleased)
		woken := false
		select {
		case <-ch:
			woken = true
		case <-time.After(2 * time.Second):
		}
		t.Fatalf("Subscribe through a ListenDSN of another schema succeeded (woken by the store's release: %v)", woken)
	}
	wantErrStatus(t, "subscribe", err, protocol.StatusUnavailable)
	if !strings.Contains(err.Error(), "ListenDSN") {
		t.Fatalf("subscribe: %v does not name Config.ListenDSN", err)
	}
}

// Config.ListenDSN may carry leasestore's pooler parameter, as the pool's
// DSN does (a copy of it with the host changed): the listener takes it out
// before connecting, and pooler=session (sessions kept) listens. The
// server refused the parameter ("unrecognized configuration parameter
// \"pooler\""), so every Subscribe failed and waiters polled.
func TestListenDSNWithPoolerParameter(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	b := openBackend(t, dsn, &postgres.Config{ListenDSN: dsn + "&pooler=session"})
	k := keysIn(pgtest.Namespace())("k")
	ch, cancel, err := b.Subscribe(ctxT(t), k)
	if err != nil {
		t.Fatalf("subscribe with a ListenDSN that says pooler=session: %v", err)
	}
	defer cancel()
	res, err := b.Acquire(ctxT(t), protocol.AcquireRequest{Key: k, Owner: "o", TTL: time.Minute, RequestID: "a"})
	wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
	rel, err := b.Release(ctxT(t), protocol.ReleaseRequest{Key: k, Owner: "o", Token: res.Lease.Token, RequestID: "r"})
	wantStatus(t, "release", rel, err, protocol.StatusReleased)
	select {
	case <-ch:
	case <-time.After(opTimeout):
		t.Fatal("the release did not wake the waiter")
	}

	tb := openBackend(t, dsn, &postgres.Config{ListenDSN: dsn + "&pooler=transaction"})
	_, _, err = tb.Subscribe(ctxT(t), k)
	wantErrStatus(t, "subscribe with a ListenDSN that says pooler=transaction", err, protocol.StatusUnavailable)
	if !strings.Contains(err.Error(), "ListenDSN") {
		t.Fatalf("subscribe: %v does not name Config.ListenDSN", err)
	}
}

// reconnectHeld returns a Config (ApplicationName app) whose listener,
// once its connection broke, signals reconnecting and waits until resume
// is called before it connects again: a test commits changes while it is
// disconnected. resume may be called more than once; call it before the
// test ends (defer), as the Backend's Close waits for the listener.
func reconnectHeld(app string) (cfg *postgres.Config, reconnecting <-chan struct{}, resume func()) {
	signal, gate := make(chan struct{}, 1), make(chan struct{})
	var once sync.Once
	cfg = postgres.WithReconnectHook(&postgres.Config{ApplicationName: app}, func() {
		select {
		case signal <- struct{}{}:
		default:
		}
		<-gate
	})
	return cfg, signal, func() { once.Do(func() { close(gate) }) }
}
