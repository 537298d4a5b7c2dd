package postgres_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasestore/leasestore/contract"
	"github.com/leasestore/leasestore/internal/testkit/pgtest"
	"github.com/leasestore/leasestore/protocol"
	"github.com/leasestore/leasestore/sqlstore/postgres"
)

// twoHandles opens two backends with separate pools on one migrated schema,
// as two processes would have them, sharing clock (nil: the server's).
func twoHandles(t *testing.T, clock *contract.Clock) (a, b *postgres.Backend, dsn string) {
	t.Helper()
	dsn = pgtest.MigratedDSN(t)
	cfg := &postgres.Config{MaxConns: 16}
	if clock != nil {
		cfg = postgres.WithTestClock(cfg, clock.Now)
	}
	return openBackend(t, dsn, cfg), openBackend(t, dsn, cfg), dsn
}

// race runs n functions at once, alternating between the two handles, and
// returns their results in order. A closed channel releases them together.
func race(n int, a, b *postgres.Backend, op func(i int, h *postgres.Backend) (protocol.Result, error)) ([]protocol.Result, []error) {
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		res   = make([]protocol.Result, n)
		errs  = make([]error, n)
	)
	for i := range n {
		h := a
		if i%2 == 1 {
			h = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res[i], errs[i] = op(i, h)
		}()
	}
	close(start)
	wg.Wait()
	return res, errs
}

// TestConcurrentAcquiresHaveOneWinner races 64 acquires of one key, from
// two pools, on a free key and on a key whose lease expired: exactly one is
// acquired, and the 63 others are conflicts that carry the winner's lease.
func TestConcurrentAcquiresHaveOneWinner(t *testing.T) {
	t.Parallel()
	clock := contract.NewClock()
	a, b, dsn := twoHandles(t, clock)
	raw := rawPool(t, dsn)
	for round, expired := range []bool{false, true, false, true} {
		name := fmt.Sprintf("k%d", round)
		prev := int64(0)
		if expired {
			res, err := a.Acquire(ctxT(t), protocol.AcquireRequest{Key: key(name), Owner: "old", TTL: time.Second, RequestID: name + "-old"})
			wantStatus(t, "first acquire", res, err, protocol.StatusAcquired)
			prev = res.Lease.Token
			clock.Advance(2 * time.Second)
		}
		results, errs := race(64, a, b, func(i int, h *postgres.Backend) (protocol.Result, error) {
			return h.Acquire(ctxT(t), protocol.AcquireRequest{
				Key: key(name), Owner: fmt.Sprintf("owner-%d", i), TTL: time.Minute, RequestID: fmt.Sprintf("%s/%d", name, i),
			})
		})
		var winner *protocol.Lease
		for i, r := range results {
			if errs[i] != nil {
				t.Fatalf("round %d: acquire %d: %v", round, i, errs[i])
			}
			if r.Status == protocol.StatusAcquired {
				if winner != nil {
					t.Fatalf("round %d: two winners: %+v and %+v", round, *winner, *r.Lease)
				}
				winner = r.Lease
			}
		}
		if winner == nil {
			t.Fatalf("round %d: no winner", round)
		}
		if winner.Token <= prev {
			t.Fatalf("round %d: token %d does not exceed the previous %d", round, winner.Token, prev)
		}
		for i, r := range results {
			if r.Status == protocol.StatusAcquired {
				continue
			}
			if r.Status != protocol.StatusConflict || r.Lease == nil ||
				r.Lease.Owner != winner.Owner || r.Lease.Token != winner.Token || !r.Lease.ExpiresAt.Equal(winner.ExpiresAt) {
				t.Fatalf("round %d: acquire %d: %q with lease %+v, want a conflict carrying the winner %+v",
					round, i, r.Status, r.Lease, *winner)
			}
		}
		var owner string
		var token int64
		if err := raw.QueryRow(ctxT(t), "SELECT owner, token FROM leasestore_leases WHERE name = $1", name).Scan(&owner, &token); err != nil {
			t.Fatal(err)
		}
		if owner != winner.Owner || token != winner.Token {
			t.Fatalf("round %d: the row holds %s/%d, the winner was %s/%d", round, owner, token, winner.Owner, winner.Token)
		}
		if n := count(t, raw, "SELECT count(*) FROM leasestore_audit WHERE name = $1 AND request_id LIKE $1 || '/%'", name); n != 1 {
			t.Fatalf("round %d: %d audit records for the race, want 1", round, n)
		}
	}
}

// TestDuplicateRequestsRace sends one request (same request id, same
// parameters) 16 times at once from two pools, for each state-changing
// operation: one takes effect, the others answer its outcome as a replay,
// and the trail records it once.
func TestDuplicateRequestsRace(t *testing.T) {
	t.Parallel()
	a, b, dsn := twoHandles(t, nil)
	raw := rawPool(t, dsn)
	const n = 16
	check := func(what string, results []protocol.Result, errs []error, want protocol.Status, rid string) *protocol.Lease {
		t.Helper()
		fresh := 0
		var first *protocol.Lease
		for i, r := range results {
			if errs[i] != nil {
				t.Fatalf("%s %d: %v", what, i, errs[i])
			}
			if r.Status != want {
				t.Fatalf("%s %d: status %q (%s), want %q", what, i, r.Status, r.Message, want)
			}
			if !r.Replayed {
				fresh++
			}
			if first == nil {
				first = r.Lease
			} else if r.Lease.Token != first.Token || r.Lease.Owner != first.Owner {
				t.Fatalf("%s %d: lease %+v differs from %+v", what, i, *r.Lease, *first)
			}
		}
		if fresh != 1 {
			t.Fatalf("%s: %d outcomes not replayed, want 1", what, fresh)
		}
		if c := count(t, raw, "SELECT count(*) FROM leasestore_audit WHERE request_id = $1", rid); c != 1 {
			t.Fatalf("%s: %d audit records, want 1", what, c)
		}
		return first
	}
	for round := range 3 {
		name := fmt.Sprintf("k%d", round)
		rid := func(op string) string { return fmt.Sprintf("%s-%s", name, op) }
		results, errs := race(n, a, b, func(_ int, h *postgres.Backend) (protocol.Result, error) {
			return h.Acquire(ctxT(t), protocol.AcquireRequest{Key: key(name), Owner: "me", TTL: time.Minute, RequestID: rid("acquire")})
		})
		l := check("acquire", results, errs, protocol.StatusAcquired, rid("acquire"))
		results, errs = race(n, a, b, func(_ int, h *postgres.Backend) (protocol.Result, error) {
			return h.Renew(ctxT(t), protocol.RenewRequest{Key: key(name), Owner: "me", Token: l.Token, TTL: time.Minute, RequestID: rid("renew")})
		})
		check("renew", results, errs, protocol.StatusRenewed, rid("renew"))
		if round%2 == 0 {
			results, errs = race(n, a, b, func(_ int, h *postgres.Backend) (protocol.Result, error) {
				return h.Release(ctxT(t), protocol.ReleaseRequest{Key: key(name), Owner: "me", Token: l.Token, RequestID: rid("release")})
			})
			check("release", results, errs, protocol.StatusReleased, rid("release"))
		} else {
			results, errs = race(n, a, b, func(_ int, h *postgres.Backend) (protocol.Result, error) {
				return h.Revoke(ctxT(t), protocol.RevokeRequest{Key: key(name), Actor: "op", Reason: "r", RequestID: rid("revoke")})
			})
			check("revoke", results, errs, protocol.StatusRevoked, rid("revoke"))
		}
		if c := count(t, raw, "SELECT count(*) FROM leasestore_leases WHERE name = $1 AND ended_token IS DISTINCT FROM token", name); c != 0 {
			t.Fatalf("round %d: the lease remains", round)
		}
	}
}

// TestRacingOperationsClassify races, on one held key, renews by the
// holder, a release by the holder, a revoke of its token and acquires by
// others, from two pools. Whatever the interleaving, the outcomes must fit
// one order: exactly one of release and revoke takes effect; renews either
// take effect or find the lease gone (not_found) or replaced (stale_token);
// at most one acquire wins, after the lease is gone, with a greater token;
// conflicts carry the holder's or the winner's lease; and the trail holds
// exactly the changes that were reported.
func TestRacingOperationsClassify(t *testing.T) {
	t.Parallel()
	a, b, dsn := twoHandles(t, nil)
	raw := rawPool(t, dsn)
	for round := range 4 {
		name := fmt.Sprintf("k%d", round)
		res, err := a.Acquire(ctxT(t), protocol.AcquireRequest{Key: key(name), Owner: "holder", TTL: time.Minute, RequestID: name + "-first"})
		wantStatus(t, "acquire", res, err, protocol.StatusAcquired)
		held := *res.Lease
		const renews, acquires = 8, 6
		n := renews + acquires + 2
		results, errs := race(n, a, b, func(i int, h *postgres.Backend) (protocol.Result, error) {
			rid := fmt.Sprintf("%s-%d", name, i)
			switch {
			case i < renews:
				return h.Renew(ctxT(t), protocol.RenewRequest{Key: key(name), Owner: "holder", Token: held.Token, TTL: time.Minute, RequestID: rid})
			case i < renews+acquires:
				return h.Acquire(ctxT(t), protocol.AcquireRequest{Key: key(name), Owner: fmt.Sprintf("other-%d", i), TTL: time.Minute, RequestID: rid})
			case i == renews+acquires:
				return h.Release(ctxT(t), protocol.ReleaseRequest{Key: key(name), Owner: "holder", Token: held.Token, RequestID: rid})
			default:
				return h.Revoke(ctxT(t), protocol.RevokeRequest{Key: key(name), Actor: "op", Reason: "r", Token: held.Token, RequestID: rid})
			}
		})
		var (
			winner           *protocol.Lease
			renewed, deletes int
		)
		for i, r := range results {
			if errs[i] != nil {
				t.Fatalf("round %d: op %d: %v", round, i, errs[i])
			}
			if i >= renews && i < renews+acquires && r.Status == protocol.StatusAcquired {
				if winner != nil {
					t.Fatalf("round %d: two acquires won", round)
				}
				winner = r.Lease
			}
		}
		for i, r := range results {
			bad := func() { t.Fatalf("round %d: op %d answered %q with lease %+v", round, i, r.Status, r.Lease) }
			switch {
			case i < renews:
				switch r.Status {
				case protocol.StatusRenewed:
					renewed++
				case protocol.StatusNotFound:
				case protocol.StatusStaleToken:
					if winner == nil || r.Lease == nil || r.Lease.Token != winner.Token {
						bad()
					}
				default:
					bad()
				}
			case i < renews+acquires:
				switch r.Status {
				case protocol.StatusAcquired:
					if r.Lease.Token <= held.Token {
						bad()
					}
				case protocol.StatusConflict:
					if r.Lease == nil || !(r.Lease.Token == held.Token || (winner != nil && r.Lease.Token == winner.Token)) {
						bad()
					}
				default:
					bad()
				}
			default:
				switch r.Status {
				case protocol.StatusReleased, protocol.StatusRevoked:
					deletes++
				case protocol.StatusNotFound:
				case protocol.StatusStaleToken:
					if winner == nil || r.Lease == nil || r.Lease.Token != winner.Token {
						bad()
					}
				default:
					bad()
				}
			}
		}
		if deletes != 1 {
			t.Fatalf("round %d: %d of release and revoke took effect, want 1", round, deletes)
		}
		records := func(ops string) int {
			return count(t, raw, "SELECT count(*) FROM leasestore_audit WHERE name = $1 AND op = ANY(string_to_array($2, ','))"+
				" AND request_id <> $1 || '-first'", name, ops)
		}
		wonAcquires := 0
		if winner != nil {
			wonAcquires = 1
		}
		if got := records("renew"); got != renewed {
			t.Fatalf("round %d: %d renew records, %d renews reported", round, got, renewed)
		}
		if got := records("release,revoke"); got != 1 {
			t.Fatalf("round %d: %d release and revoke records, want 1", round, got)
		}
		if got := records("acquire"); got != wonAcquires {
			t.Fatalf("round %d: %d acquire records, %d acquires reported", round, got, wonAcquires)
		}
		rows := count(t, raw, "SELECT count(*) FROM leasestore_leases WHERE name = $1 AND ended_token IS DISTINCT FROM token", name)
		if (winner != nil) != (rows == 1) {
			t.Fatalf("round %d: %d rows remain, winner %v", round, rows, winner)
		}
	}
}
