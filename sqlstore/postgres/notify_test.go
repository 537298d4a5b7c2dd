package postgres_test

import (
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// listenerPIDs returns the server pids of the listener connections of
// backends with application name app: the sessions that hold a waiter's
// advisory lock.
func listenerPIDs(t *testing.T, dsn, app string) []int32 {
	t.Helper()
	rows, err := rawPool(t, dsn).Query(ctxT(t), `
SELECT DISTINCT a.pid FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid
WHERE a.application_name = $1 AND l.locktype = 'advisory' AND l.classid = 1818583412 AND l.mode = 'ShareLock' AND l.granted`, app)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var pids []int32
	for rows.Next() {
		var pid int32
		if err := rows.Scan(&pid); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	return pids
}

// A waiter's registration survives its listener connection dying: every
// waiter is signalled (a release may have gone unheard), the backend
// reconnects, takes the key's lock again, and a later release still wakes
// it.
func TestListenerReconnects(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	app := appName(t)
	waiter := openBackend(t, dsn, &postgres.Config{ApplicationName: app})
	other := openBackend(t, dsn, nil)
	k := key("k")
	ch, cancel, err := waiter.Subscribe(ctxT(t), k)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	pids := listenerPIDs(t, dsn, app)
	if len(pids) != 1 {
		t.Fatalf("%d listener sessions hold the key's wait lock, want 1", len(pids))
	}
	mustExec(t, rawPool(t, dsn), `SELECT pg_terminate_backend($1)`, pids[0])
	select {
	case <-ch:
	case <-time.After(opTimeout):
		t.Fatal("the waiter was not signalled when its listener connection died")
	}
	// The backend reconnects and registers the key again.
	deadline := time.Now().Add(opTimeout)
	for {
		now := listenerPIDs(t, dsn, app)
		if len(now) == 1 && now[0] != pids[0] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new listener session holds the key's wait lock (now %v, before %d)", now, pids[0])
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case <-ch: // a second signal of the outage may still be pending
	default:
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
	for len(listenerPIDs(t, dsn, app)) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the wait lock is still held after the subscription was cancelled")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
