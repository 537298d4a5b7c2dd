package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// A key whose row another session keeps locked (SELECT ... FOR UPDATE, for
// three seconds) delays no operation on another key, with coalescing as
// without: 9 callers with 1 s deadlines, one on the locked key and eight on
// three other keys, acquire and release in a loop while the lock is held.
// The locked key's caller times out; no caller of another key does, and
// with a fixed limit of round trips in flight batches were sent meanwhile
// (so the case was exercised; the adaptive limit may have room for every
// caller).
// (The subtests' keys differ: advisory locks are shared by every schema of
// the database.)
func TestStuckKeyDelaysNoOtherKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  *postgres.Config
	}{
		{"adaptive", nil},
		{"coalescing", &postgres.Config{MaxInFlight: 2}},
		{"no-coalescing", &postgres.Config{NoCoalescing: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dsn := pgtest.MigratedDSN(t)
			stuck := tc.name + "-stuck"
			b := openBackend(t, dsn, tc.cfg)
			ctx := ctxT(t)
			res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key(stuck), Owner: "o", TTL: time.Minute,
				RequestID: protocol.RandomRequestID()})
			wantStatus(t, "acquire stuck", res, err, protocol.StatusAcquired)
			res, err = b.Release(ctx, protocol.ReleaseRequest{Key: key(stuck), Owner: "o", Token: res.Lease.Token,
				RequestID: protocol.RandomRequestID()})
			wantStatus(t, "release stuck", res, err, protocol.StatusReleased)

			locker := rawConn(t, dsn)
			tx, err := locker.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			mustExec(t, tx, `SELECT 1 FROM leasestore_leases WHERE namespace = 'ns' AND name = $1 FOR UPDATE`, stuck)
			hold := time.Now().Add(3 * time.Second)

			var (
				healthyTimeouts, healthyOps, stuckTimeouts atomic.Int64
				otherErrs                                  = make(chan error, 100)
				wg                                         sync.WaitGroup
			)
			cycle := func(name string, stuck bool) {
				owner := protocol.RandomRequestID()
				for time.Now().Before(hold) {
					octx, cancel := context.WithTimeout(context.Background(), time.Second)
					res, err := b.Acquire(octx, protocol.AcquireRequest{Key: key(name), Owner: owner, TTL: time.Minute,
						RequestID: protocol.RandomRequestID()})
					if err == nil && res.Status == protocol.StatusAcquired {
						res, err = b.Release(octx, protocol.ReleaseRequest{Key: key(name), Owner: owner,
							Token: res.Lease.Token, RequestID: protocol.RandomRequestID()})
					}
					cancel()
					switch {
					case errors.Is(err, protocol.ErrTimeout) && stuck:
						stuckTimeouts.Add(1)
					case errors.Is(err, protocol.ErrTimeout):
						healthyTimeouts.Add(1)
					case errors.Is(err, protocol.ErrUnavailable):
						// A hot key changed under the acquire several times in a
						// row (8 callers share 3 keys): the caller retries.
					case err != nil:
						select {
						case otherErrs <- err:
						default:
						}
						return
					case !stuck:
						healthyOps.Add(1)
					}
				}
			}
			batchesBefore, _, _ := postgres.CoalesceStats(b)
			wg.Add(9)
			go func() { defer wg.Done(); cycle(stuck, true) }()
			for i := range 8 {
				go func() { defer wg.Done(); cycle(tc.name+[]string{"-h0", "-h1", "-h2"}[i%3], false) }()
			}
			wg.Wait()
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			close(otherErrs)
			for err := range otherErrs {
				t.Errorf("unexpected error: %v", err)
			}
			batches, _, _ := postgres.CoalesceStats(b)
			t.Logf("healthy-key cycles %d, healthy-key timeouts %d, locked-key timeouts %d, batches %d",
				healthyOps.Load(), healthyTimeouts.Load(), stuckTimeouts.Load(), batches-batchesBefore)
			if stuckTimeouts.Load() == 0 {
				t.Fatal("the locked key's caller never timed out: the row lock held nothing up")
			}
			if healthyOps.Load() == 0 {
				t.Fatal("no operation on another key completed")
			}
			if tc.cfg != nil && !tc.cfg.NoCoalescing && batches == batchesBefore {
				t.Fatal("no batch was sent while the key was locked: the case was not exercised")
			}
			if n := healthyTimeouts.Load(); n != 0 {
				t.Fatalf("%d operations on other keys timed out while one key's row was locked, want 0", n)
			}
		})
	}
}

// Both slots of the adaptive limit's floor (2) held by operations whose
// keys another session keeps locked: an operation on a free key still
// goes at once, in a round trip over the limit (the kick: the slots'
// round trips overran), not when a stuck one gives up. Without the kick it
// waits for them (here: until its own 5 s deadline).
func TestStuckSlotsHoldNoOneUp(t *testing.T) {
	t.Parallel()
	b, key, unstick := stuckSlots(t, &postgres.Config{MaxConns: 4})
	if limit := postgres.InFlightLimit(b); limit != 2 {
		t.Fatalf("limit %d with both stuck operations in flight, want the floor, 2 (the test's premise)", limit)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: key("free"), Owner: "o", TTL: time.Minute,
		RequestID: protocol.RandomRequestID()})
	cancel()
	took := time.Since(start)
	wantStatus(t, "acquire of a free key", res, err, protocol.StatusAcquired)
	if took > 2*time.Second {
		t.Errorf("the free key's acquire took %v behind two stuck slots, want well under 2s", took)
	}
	unstick()
}

// stuckSlots opens a backend with cfg (its ApplicationName set here) and
// starts acquires of the keys s1 and s2 of a namespace of its own, which
// another session keeps locked, and returns once both wait on their keys:
// the backend, the namespace's keys, and unstick, which lets the two go
// and checks that they then acquired.
func stuckSlots(t *testing.T, cfg *postgres.Config) (b *postgres.Backend, key func(string) protocol.Key, unstick func()) {
	t.Helper()
	dsn := pgtest.MigratedDSN(t)
	ns := pgtest.Namespace()
	key = keysIn(ns)
	app := "stuck-slots-" + ns
	cfg.ApplicationName = app
	b = openBackend(t, dsn, cfg)
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
	return b, key, func() {
		mustExec(t, locker, `SELECT pg_advisory_unlock_all()`)
		for range 2 {
			if err := <-stuck; err != nil {
				t.Errorf("stuck operation after the locks went: %v", err)
			}
		}
	}
}
