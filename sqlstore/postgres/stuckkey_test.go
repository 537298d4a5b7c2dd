package postgres_test

import (
	"context"
	"errors"
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
