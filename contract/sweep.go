package contract

import (
	"fmt"
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// sweepCases check protocol.Sweeper, for harnesses whose first handle
// implements it; others skip them.
func sweepCases() []testCase {
	sweeper := func(e *env, b protocol.Backend) protocol.Sweeper {
		s, ok := b.(protocol.Sweeper)
		if !ok {
			e.t.Skip("the harness's backend does not implement protocol.Sweeper")
		}
		return s
	}
	return []testCase{
		{"removes_only_rows_past_the_grace", func(e *env) {
			s := sweeper(e, e.h.Backend)
			old := e.acquire(e.a, "old", "w1", 10*time.Second)
			gone := e.acquire(e.a, "gone", "w1", time.Hour)
			e.release(e.a, gone)
			live := e.acquire(e.b, "live", "w2", time.Hour)
			e.clock.Advance(20 * time.Second)
			if n, err := s.Sweep(e.ctx, 100, time.Hour); err != nil || n.Removed != 0 {
				e.t.Fatalf("sweep with a grace longer than any lease ended: %d removed, %v; want none", n.Removed, err)
			}
			// The ended leases still answer as ended leases (where the
			// backend set their rows aside, that changes nothing).
			within, err := e.a.Renew(e.ctx, protocol.RenewRequest{Key: old.Key, Owner: old.Owner, Token: old.Token, TTL: leaseTTL, RequestID: e.rid()})
			e.expect("renew of an expired lease within the grace", within, err, protocol.StatusExpired)
			if rows := e.listAll(e.a, protocol.ListRequest{Namespace: e.ns, IncludeExpired: true}); len(rows) != 2 {
				e.t.Fatalf("rows with expired ones within the grace: %v, want old and live", rows)
			}
			if rows := e.listAll(e.a, protocol.ListRequest{Namespace: e.ns}); len(rows) != 1 || rows[0].Key.Name != "live" {
				e.t.Fatalf("live rows within the grace: %v, want only live", rows)
			}
			if n, err := s.Sweep(e.ctx, 100, 5*time.Second); err != nil || n.Removed < 1 {
				e.t.Fatalf("sweep: %d removed, %v; want the expired row (and the released one where it stays)", n.Removed, err)
			}
			if rows := e.listAll(e.a, protocol.ListRequest{Namespace: e.ns, IncludeExpired: true}); len(rows) != 1 || rows[0].Key.Name != "live" {
				e.t.Fatalf("rows after sweep: %v, want only the live lease", rows)
			}
			e.expectLease("live lease after sweep", e.get(e.a, "live"), live)
			// The former holder now gets not_found, no longer expired.
			res, err := e.a.Renew(e.ctx, protocol.RenewRequest{Key: old.Key, Owner: old.Owner, Token: old.Token, TTL: leaseTTL, RequestID: e.rid()})
			e.expect("renew of a swept lease", res, err, protocol.StatusNotFound)
			// Fencing holds across the sweep.
			for _, l := range []protocol.Lease{old, gone} {
				next := e.acquire(e.b, l.Key.Name, "w3", leaseTTL)
				if next.Token <= live.Token || next.Token <= l.Token {
					e.t.Fatalf("%s acquired after its row was swept with token %d, want more than %d and %d",
						l.Key.Name, next.Token, l.Token, live.Token)
				}
			}
		}},
		{"removes_at_most_max", func(e *env) {
			s := sweeper(e, e.h.Backend)
			for i := range 5 {
				e.acquire(e.a, fmt.Sprintf("k%d", i), "w1", time.Second)
			}
			// The greatest token goes to a live lease, as in a store in use:
			// PostgreSQL keeps the row of the greatest token, from which it
			// repairs a fencing sequence that lost its state.
			e.acquire(e.b, "live", "w2", time.Hour)
			e.clock.Advance(time.Minute)
			if n, err := s.Sweep(e.ctx, 2, 0); err != nil || n.Removed != 2 {
				e.t.Fatalf("sweep with max 2: %+v, %v", n, err)
			}
			if n, err := s.Sweep(e.ctx, 100, 0); err != nil || n.Removed != 3 {
				e.t.Fatalf("second sweep: %+v, %v; want the other 3", n, err)
			}
			if n, err := s.Sweep(e.ctx, 100, 0); err != nil || n.Removed != 0 || n.SetAside != 0 {
				e.t.Fatalf("third sweep: %+v, %v; want none", n, err)
			}
		}},
		{"bad_arguments_remove_no_live_lease", func(e *env) {
			// A Go caller's bad arithmetic: a max of 0 or less sweeps
			// nothing, a negative grace counts as none; a lease that has
			// not ended is never removed (its holder would hear not_found
			// and anyone could take the key, with no audit record).
			s := sweeper(e, e.h.Backend)
			e.acquire(e.a, "ended", "w1", time.Second)
			e.acquire(e.b, "filler", "w2", time.Hour) // the greatest token stays live
			e.clock.Advance(time.Minute)
			live := e.acquire(e.b, "live", "w2", time.Hour)
			for _, max := range []int{0, -1} {
				if n, err := s.Sweep(e.ctx, max, 0); err != nil || n.Removed != 0 {
					e.t.Fatalf("sweep with max %d: %+v, %v; want nothing removed", max, n, err)
				}
			}
			if _, err := s.Sweep(e.ctx, 100, -time.Hour); err != nil {
				e.t.Fatalf("sweep with grace -1h: %v", err)
			}
			e.expectLease("the live lease after a sweep with grace -1h", e.get(e.a, "live"), live)
			if rows := e.listAll(e.a, protocol.ListRequest{Namespace: e.ns}); len(rows) != 2 {
				e.t.Fatalf("live rows after the sweeps: %v, want filler and live", rows)
			}
		}},
		{"negative_grace_keeps_a_lock_delay", func(e *env) {
			// A negative grace counts as none: a lease whose lock-delay
			// still runs is not past it, so its row stays and keeps the key
			// (a removed row would let anyone take the key during the delay).
			s := sweeper(e, e.h.Backend)
			exp := e.acquireDelayed(e.a, "expired", "w1")
			e.clock.Advance(leaseTTL + time.Second)
			rev := e.acquireDelayed(e.a, "revoked", "w1")
			revokedAt := e.clock.Now()
			e.revoke(e.b, "revoked")
			e.acquire(e.b, "filler", "w2", time.Hour) // the greatest token stays live
			e.clock.Advance(time.Second)
			if _, err := s.Sweep(e.ctx, 100, -time.Hour); err != nil {
				e.t.Fatalf("sweep with grace -1h: %v", err)
			}
			e.expectDelayed("acquire after a sweep with grace -1h, within an expired lease's lock-delay", "expired", exp, exp.ExpiresAt)
			e.expectDelayed("acquire after a sweep with grace -1h, within a revoked lease's lock-delay", "revoked", rev, revokedAt)
		}},
	}
}
