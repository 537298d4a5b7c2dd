package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// A DBA gives the store's role idle_session_timeout = 1s (ALTER ROLE ...
// SET). The listener's connection sits idle between notifications; were
// the server to end it every second, the listener would reconnect and wake
// every waiter each time (a thundering herd of acquires, every waiter's,
// every period) although no key changed. N waiters on held keys, over
// several periods: each sends its first attempt and the one after its
// subscription, and no more; the listener keeps one session.
func TestRoleIdleSessionTimeoutWakesNoWaiter(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	roleDSN := pgtest.RoleDSN(t, dsn, "idle_session_timeout = 1s")
	probe := rawConn(t, roleDSN)
	time.Sleep(1500 * time.Millisecond)
	if err := probe.Ping(ctxT(t)); err == nil {
		t.Fatal("a session of the role idle for 1.5s was not ended: the role's idle_session_timeout does not apply, the test would prove nothing")
	}
	app := appName(t)
	const n = 8
	attempts, raw := waitersOnHeldKeys(t, dsn, roleDSN, keysIn(pgtest.Namespace()), app, n)
	first := listenerPIDs(t, raw, app)[0]
	time.Sleep(3500 * time.Millisecond) // three periods of the role's idle_session_timeout and more
	now := listenerPIDs(t, raw, app)
	if got := attempts.Load(); got != 2*n {
		t.Errorf("%d waiters on held keys sent %d attempts over 3.5s in which no key changed, want %d "+
			"(the first and the one after subscribing each): they were woken for nothing", n, got, 2*n)
	}
	if len(now) != 1 || now[0] != first {
		t.Errorf("the listener's session %d was replaced (now %v): the role's idle_session_timeout ended it", first, now)
	}
}

// The listener's session is ended every so often by something the backend
// cannot pin (a DBA's job that terminates idle sessions, as here; a
// firewall's or load balancer's idle cut-off). No key changed: the
// listener reconnects and takes its locks again, and wakes no waiter. It
// woke every waiter twice each time (at the break, and once the locks were
// held again): a herd of attempts every period.
func TestListenerReconnectionWakesNoWaiterWhenNothingChanged(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	app := appName(t)
	const n = 8
	keys := keysIn(pgtest.Namespace())
	attempts, raw := waitersOnHeldKeys(t, dsn, dsn, keys, app, n)
	// Keys share a wait lock when their hashes fall in one bucket: the
	// listener holds one lock per bucket.
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("k%d", i)
	}
	locks := count(t, raw, `SELECT count(DISTINCT hashtext($1 || '/' || k) & `+postgres.WaitLockMask+`) FROM unnest($2::text[]) AS k`,
		keys("k0").Namespace, names)
	deadline := time.Now().Add(opTimeout)
	const kills = 3
	for range kills {
		pid := listenerPIDs(t, raw, app)[0]
		mustExec(t, raw, `SELECT pg_terminate_backend($1)`, pid)
		for {
			now := listenerPIDs(t, raw, app)
			if len(now) == 1 && now[0] != pid && count(t, raw, `SELECT count(*) FROM pg_locks WHERE pid = $1 AND locktype = 'advisory'
				AND classid = 1818583412 AND granted`, now[0]) == locks {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no new listener session holds the %d waiters' %d locks (now %v, before %d)", n, locks, now, pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	time.Sleep(500 * time.Millisecond) // the waiters' attempts on any signal
	if got := attempts.Load(); got != 2*n {
		t.Errorf("%d waiters on held keys sent %d attempts through %d reconnections of the listener in which no key changed, "+
			"want %d (the first and the one after subscribing each): they were woken for nothing", n, got, kills, 2*n)
	}
}

// Safety of the above: a release that commits while the listener is
// disconnected (held there by WithReconnectHook) notifies nobody, since
// the key's wait lock is free; the new connection finds the key's row
// changed and signals its waiter, and only its: the waiter of a key that
// did not change is not woken.
func TestListenerReconnectionWakesTheWaitersOfKeysThatChanged(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	app := appName(t)
	cfg, reconnecting, resume := reconnectHeld(app)
	defer resume()
	b := openBackend(t, dsn, cfg)
	other := openBackend(t, dsn, nil)
	keys := keysIn(pgtest.Namespace())
	acquireKeys(t, other, keys, 2, 5*time.Minute) // k0, k1, tokens in order
	changed, cancel, err := b.Subscribe(ctxT(t), keys("k0"))
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	unchanged, cancel1, err := b.Subscribe(ctxT(t), keys("k1"))
	if err != nil {
		t.Fatal(err)
	}
	defer cancel1()
	got, err := other.Get(ctxT(t), protocol.GetRequest{Key: keys("k0")})
	wantStatus(t, "get k0", got, err, protocol.StatusFound)
	raw := rawPool(t, dsn)
	pids := listenerPIDs(t, raw, app)
	if len(pids) != 1 {
		t.Fatalf("%d listener sessions hold the keys' wait locks, want 1", len(pids))
	}
	mustExec(t, raw, `SELECT pg_terminate_backend($1)`, pids[0])
	select {
	case <-reconnecting:
	case <-time.After(opTimeout):
		t.Fatal("the listener did not set out to reconnect after its connection died")
	}
	res, err := other.Release(ctxT(t), protocol.ReleaseRequest{Key: keys("k0"), Owner: "w", Token: got.Lease.Token,
		RequestID: "r0"})
	wantStatus(t, "release k0", res, err, protocol.StatusReleased)
	resume()
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter of k0, released while the listener was disconnected, was not woken within 5s of the reconnection")
	}
	select {
	case <-unchanged:
		t.Fatal("the waiter of k1, which did not change, was woken by the reconnection")
	case <-time.After(300 * time.Millisecond):
	}
}

// waitersOnHeldKeys holds n keys (k0...) through a backend on dsn and
// starts a waiter on each through a runtime over a backend on waiterDSN
// whose sessions carry app (so listenerPIDs finds its listener), each with
// a recheck of an hour: only a signal wakes one. It returns once each sent
// its first attempt and the one after subscribing, and one listener
// session holds their locks, with the count of acquire attempts and a raw
// pool on dsn; the waiters stop when the test ends.
func waitersOnHeldKeys(t *testing.T, dsn, waiterDSN string, key func(string) protocol.Key, app string,
	n int) (*atomic.Int64, *pgxpool.Pool) {
	t.Helper()
	attempts := new(atomic.Int64)
	obs := protocol.ObserverFunc(func(_ context.Context, ev protocol.OperationEvent) {
		if ev.Op == protocol.OpAcquire {
			attempts.Add(1)
		}
	})
	holder := openBackend(t, dsn, nil)
	acquireKeys(t, holder, key, n, 5*time.Minute)
	b := openBackend(t, waiterDSN, &postgres.Config{ApplicationName: app})
	rt := protocol.New(b, &protocol.Config{Observer: obs})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, _ = protocol.AcquireWait(ctx, rt, protocol.AcquireRequest{Key: key(fmt.Sprintf("k%d", i)), Owner: "waiter",
				TTL: time.Minute}, &protocol.WaitConfig{Recheck: time.Hour})
		})
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	raw := rawPool(t, dsn)
	deadline := time.Now().Add(opTimeout)
	for attempts.Load() < int64(2*n) || len(listenerPIDs(t, raw, app)) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the waiters sent %d attempts, %d listener sessions: want %d, 1", attempts.Load(),
				len(listenerPIDs(t, raw, app)), 2*n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return attempts, raw
}
