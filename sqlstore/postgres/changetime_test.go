package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/audit"
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
// is the judge (no injected clock).
func TestChangeTimesFollowLockWaits(t *testing.T) {
	t.Parallel()
	// Statements alone. (A coalesced batch reads its time once, as now(),
	// before it takes its keys: the batch function's own case.)
	for _, tc := range []struct {
		name string
		cfg  postgres.Config
	}{
		{"alone", postgres.Config{NoCoalescing: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dsn := pgtest.MigratedDSN(t)
			cfg1, cfg2 := tc.cfg, tc.cfg
			handles := []*postgres.Backend{openBackend(t, dsn, &cfg1), openBackend(t, dsn, &cfg2)}
			ns := "times-" + tc.name // advisory locks are shared by every schema
			keys := []string{"k0", "k1"}
			const ttl = 30 * time.Millisecond
			stop := time.Now().Add(2 * time.Second)
			errs := make(chan error, 32)
			var wg sync.WaitGroup
			for g := range 12 {
				b := handles[g%2]
				wg.Go(func() {
					owner := fmt.Sprintf("w%d", g)
					for i := 0; time.Now().Before(stop); i++ {
						ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
						k := protocol.Key{Namespace: ns, Name: keys[i%len(keys)]}
						res, err := b.Acquire(ctx, protocol.AcquireRequest{Key: k, Owner: owner, TTL: ttl, RequestID: protocol.RandomRequestID()})
						if err == nil && res.Status == protocol.StatusAcquired && i%4 != 0 { // every fourth is left to expire
							_, err = b.Release(ctx, protocol.ReleaseRequest{Key: k, Owner: owner, Token: res.Lease.Token,
								RequestID: protocol.RandomRequestID()})
						}
						cancel()
						if err != nil && !errors.Is(err, protocol.ErrUnavailable) { // unavailable: a hot key changed under it several times
							errs <- err
							return
						}
					}
				})
			}
			wg.Go(func() {
				for time.Now().Before(stop) {
					if _, err := handles[0].Sweep(context.Background(), 100, 0); err != nil {
						errs <- err
						return
					}
					time.Sleep(time.Millisecond)
				}
			})
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			checkChangeTimes(t, handles[0], ns, ttl)
		})
	}
}

// checkChangeTimes reads ns's trail and fails on an acquire that started
// before the key's previous lease ended, or a record whose expiry is not
// its time plus the TTL.
func checkChangeTimes(t *testing.T, r audit.Reader, ns string, ttl time.Duration) {
	t.Helper()
	type lease struct {
		owner string
		token int64
		end   time.Time // the release or revoke; else the expiry
	}
	last := map[string]*lease{}
	var acquires, overlaps int
	q := audit.Query{Namespace: ns, Limit: audit.MaxLimit}
	for {
		page, err := r.ReadAudit(ctxT(t), q)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range page.Records {
			l := last[rec.Key]
			switch rec.Op {
			case protocol.OpAcquire:
				acquires++
				if l != nil && rec.At.Before(l.end) {
					overlaps++
					if overlaps <= 5 {
						t.Errorf("record %d: %s acquired %s (token %d) at %s, %s before the lease of %s (token %d) ended at %s",
							rec.ID, rec.Owner, rec.Key, rec.Token, rec.At.Format(time.StampMicro), l.end.Sub(rec.At),
							l.owner, l.token, l.end.Format(time.StampMicro))
					}
				}
				last[rec.Key] = &lease{rec.Owner, rec.Token, rec.ExpiresAt}
				if d := rec.ExpiresAt.Sub(rec.At); d != ttl {
					t.Errorf("record %d: acquired at %s, expires %s later, want the TTL %s", rec.ID, rec.At, d, ttl)
				}
			case protocol.OpRelease, protocol.OpRevoke:
				if l == nil || l.token != rec.Token {
					t.Fatalf("record %d: %s of token %d, the key's lease is %+v", rec.ID, rec.Op, rec.Token, l)
				}
				l.end = rec.At
			default:
				t.Fatalf("record %d: unexpected %s", rec.ID, rec.Op)
			}
		}
		if page.NextCursor == "" {
			break
		}
		q.Cursor = page.NextCursor
	}
	t.Logf("%d acquires, %d started before the previous lease of their key ended", acquires, overlaps)
	if acquires < 20 {
		t.Fatalf("only %d acquires: the callers did not contend", acquires)
	}
}
