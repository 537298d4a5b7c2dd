package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// Contract v3: a member waiting on its key delays no member on another
// key. With a fixed limit of round trips in flight (Config.MaxInFlight: 2,
// as TestStuckKeyDelaysNoOtherKey's "coalescing" case) whose two slots
// are held by operations whose keys another session keeps locked, an
// operation on a free key still goes, as it does with the adaptive limit
// (TestStuckSlotsHoldNoOneUp); not when a stuck one gives up.
func TestStuckSlotsHoldNoOneUpWithAFixedLimit(t *testing.T) {
	t.Parallel()
	dsn := pgtest.MigratedDSN(t)
	ns := pgtest.Namespace()
	key := keysIn(ns)
	app := "stuck-fixed-" + ns
	b := openBackend(t, dsn, &postgres.Config{MaxInFlight: 2, MaxConns: 4, ApplicationName: app})
	locker := rawConn(t, dsn)
	for _, name := range []string{"s1", "s2"} {
		mustExec(t, locker, `SELECT pg_advisory_lock(1818583411, hashtext($1))`, ns+"/"+name)
	}
	stuck := make(chan error, 2)
	for _, name := range []string{"s1", "s2"} {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key(name), Owner: "o", TTL: time.Minute,
				RequestID: protocol.RandomRequestID()})
			if err == nil && res.Status != protocol.StatusAcquired {
				err = fmt.Errorf("acquire %s: %s", name, res.Status)
			}
			stuck <- err
		}()
	}
	watcher := rawConn(t, dsn)
	for waiting := 0; waiting < 2; {
		if err := watcher.QueryRow(ctxT(t), `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $1 AND wait_event_type = 'Lock' AND wait_event = 'advisory'`, app).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("free"), Owner: "o", TTL: time.Minute,
		RequestID: protocol.RandomRequestID()})
	cancel()
	took := time.Since(start)
	mustExec(t, locker, `SELECT pg_advisory_unlock_all()`)
	for range 2 {
		if err := <-stuck; err != nil {
			t.Errorf("stuck operation after the locks went: %v", err)
		}
	}
	if err != nil || res.Status != protocol.StatusAcquired || took > 2*time.Second {
		t.Fatalf("acquire of a free key behind two operations waiting on their keys: %s %v after %v, want acquired well under 2s",
			res.Status, err, took.Round(time.Millisecond))
	}
}
