package contract

import (
	"time"

	"github.com/leasestore/leasestore/protocol"
)

func fencingCases() []testCase {
	return []testCase{
		{"tokens_increase_through_cycles", func(e *env) {
			// Every way a lease ends, on alternating handles: release,
			// expiry, revoke, and each followed by a new acquire.
			var last int64
			next := func(rt *protocol.Runtime, owner string) protocol.Lease {
				e.t.Helper()
				l := e.acquire(rt, "job", owner, leaseTTL)
				if l.Token <= last {
					e.t.Fatalf("token %d, want more than the previous %d", l.Token, last)
				}
				last = l.Token
				return l
			}
			for i := range 3 {
				rt, other := e.a, e.b
				if i%2 == 1 {
					rt, other = e.b, e.a
				}
				e.release(other, next(rt, "w1"))
				next(other, "w2")
				e.clock.Advance(leaseTTL)
				next(rt, "w2") // the same owner again, after its lease expired
				e.revoke(other, "job")
				next(rt, "w3")
				e.clock.Advance(leaseTTL + time.Second) // w3's lease expires unreleased
				e.release(other, next(other, "w1"))
			}
			// Tokens of another key do not go backwards either.
			o := e.acquire(e.b, "other", "w1", leaseTTL)
			if o.Token <= 0 {
				e.t.Fatalf("token %d, want positive", o.Token)
			}
			e.release(e.a, o)
			if l := e.acquire(e.a, "other", "w1", leaseTTL); l.Token <= o.Token {
				e.t.Fatalf("token %d, want more than %d", l.Token, o.Token)
			}
		}},
		{"renew_keeps_token", func(e *env) {
			l := e.acquire(e.a, "job", "w1", leaseTTL)
			for i, ttl := range []time.Duration{renewTTL, time.Minute, time.Second, renewTTL, protocol.MinTTL} {
				e.clock.Advance(100 * time.Millisecond)
				rt := e.a
				if i%2 == 1 {
					rt = e.b
				}
				res, err := rt.Renew(e.ctx, protocol.RenewRequest{Key: l.Key, Owner: l.Owner, Token: l.Token, TTL: ttl, RequestID: e.rid()})
				e.expect("renew", res, err, protocol.StatusRenewed)
				now := e.clock.Now()
				// expires_at is now+ttl, even when that is earlier than before.
				want := l
				want.RenewedAt, want.ExpiresAt = now, now.Add(ttl)
				e.expectLease("renewed lease", res.Lease, want)
				e.expectLease("get after renew", e.get(e.b, "job"), want)
			}
		}},
		{"stale_writer_leaves_newer_lease_untouched", func(e *env) {
			old := e.acquire(e.a, "job", "w1", leaseTTL)
			e.clock.Advance(leaseTTL + time.Second)
			cur := e.acquire(e.b, "job", "w2", leaseTTL)
			before := e.snapshot("job")
			res, err := e.a.Renew(e.ctx, protocol.RenewRequest{Key: old.Key, Owner: old.Owner, Token: old.Token, TTL: renewTTL, RequestID: e.rid()})
			e.expect("stale renew", res, err, protocol.StatusStaleToken)
			e.expectLease("stale renew carries the newer lease", res.Lease, cur)
			res, err = e.a.Release(e.ctx, protocol.ReleaseRequest{Key: old.Key, Owner: old.Owner, Token: old.Token, RequestID: e.rid()})
			e.expect("stale release", res, err, protocol.StatusStaleToken)
			e.expectLease("stale release carries the newer lease", res.Lease, cur)
			res, err = e.a.Revoke(e.ctx, protocol.RevokeRequest{Key: old.Key, Actor: "operator", Reason: "stale", Token: old.Token, RequestID: e.rid()})
			e.expect("stale revoke", res, err, protocol.StatusStaleToken)
			e.expectLease("stale revoke carries the newer lease", res.Lease, cur)
			e.unchanged("after stale writers", before)
			e.expectLease("get", e.get(e.a, "job"), cur)
		}},
	}
}

func getCases() []testCase {
	return []testCase{
		{"found", func(e *env) {
			l := e.acquire(e.a, "job", "w1", leaseTTL)
			e.expectLease("get first handle", e.get(e.a, "job"), l)
			e.expectLease("get second handle", e.get(e.b, "job"), l)
		}},
		{"not_found", func(e *env) {
			if l := e.get(e.a, "job"); l != nil {
				e.t.Fatalf("get on an empty store: %s", fmtLease(l))
			}
			l := e.acquire(e.a, "job", "w1", leaseTTL)
			e.release(e.b, l)
			if g := e.get(e.a, "job"); g != nil {
				e.t.Fatalf("get after release: %s", fmtLease(g))
			}
		}},
		{"expired_is_not_found", func(e *env) {
			l := e.acquire(e.a, "job", "w1", leaseTTL)
			e.clock.Advance(leaseTTL - precision) // the last instant the lease is live
			e.expectLease("get 1µs before expiry", e.get(e.b, "job"), l)
			e.clock.Advance(precision)
			if g := e.get(e.b, "job"); g != nil {
				e.t.Fatalf("get at expires_at: %s, want not_found", fmtLease(g))
			}
			// The expired row is still stored until someone acquires over it.
			if r := e.row("job"); r == nil {
				e.t.Fatal("list include_expired: the expired row is missing")
			} else {
				e.expectLease("expired row", r, l)
			}
		}},
	}
}
