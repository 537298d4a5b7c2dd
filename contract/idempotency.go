package contract

import (
	"time"

	"github.com/leasestore/leasestore/protocol"
)

// expectReplay checks that a result is a replay with status want.
func (e *env) expectReplay(what string, res protocol.Result, err error, want protocol.Status) protocol.Result {
	e.t.Helper()
	e.expect(what, res, err, want)
	if !res.Replayed {
		e.t.Fatalf("%s: not flagged replayed", what)
	}
	return res
}

func idempotencyCases() []testCase {
	return []testCase{
		{"acquire_replay", func(e *env) {
			req := e.acquireReq("job", "w1", leaseTTL)
			l := e.acquireWith(e.a, req)
			e.clock.Advance(time.Second)
			for _, rt := range []*protocol.Runtime{e.a, e.b} {
				before := e.snapshot("job")
				res, err := rt.Acquire(e.ctx, req)
				e.expectReplay("repeated acquire", res, err, protocol.StatusAcquired)
				e.expectLease("replayed lease", res.Lease, l)
				if res.RequestID != req.RequestID {
					e.t.Fatalf("replay request id %q, want %q", res.RequestID, req.RequestID)
				}
				e.unchanged("after replay", before)
			}
			// After release, the replay still answers the first outcome and
			// does not acquire again.
			e.release(e.b, l)
			before := e.snapshot("job")
			res, err := e.b.Acquire(e.ctx, req)
			e.expectReplay("acquire replayed after release", res, err, protocol.StatusAcquired)
			e.expectLease("replayed lease", res.Lease, l)
			e.unchanged("replay after release", before)
			if g := e.get(e.a, "job"); g != nil {
				e.t.Fatalf("get after replaying a released acquire: %s", fmtLease(g))
			}
		}},
		{"acquire_replay_over_new_holder", func(e *env) {
			req := e.acquireReq("job", "w1", leaseTTL)
			l := e.acquireWith(e.b, req)
			e.clock.Advance(leaseTTL)
			cur := e.acquire(e.a, "job", "w2", leaseTTL)
			before := e.snapshot("job")
			res, err := e.a.Acquire(e.ctx, req)
			e.expectReplay("acquire replayed after expiry", res, err, protocol.StatusAcquired)
			e.expectLease("replayed lease", res.Lease, l)
			e.unchanged("replay", before)
			e.expectLease("get", e.get(e.b, "job"), cur)
		}},
		{"renew_replay", func(e *env) {
			l := e.acquire(e.a, "job", "w1", leaseTTL)
			e.clock.Advance(time.Second)
			req := protocol.RenewRequest{Key: l.Key, Owner: l.Owner, Token: l.Token, TTL: renewTTL, RequestID: e.rid()}
			res, err := e.a.Renew(e.ctx, req)
			e.expect("renew", res, err, protocol.StatusRenewed)
			renewed := *res.Lease
			e.clock.Advance(2 * time.Second)
			for _, rt := range []*protocol.Runtime{e.b, e.a} {
				before := e.snapshot("job")
				res, err = rt.Renew(e.ctx, req)
				e.expectReplay("repeated renew", res, err, protocol.StatusRenewed)
				e.expectLease("replayed lease", res.Lease, renewed)
				if !sameInstant(res.Lease.RenewedAt, renewed.RenewedAt) {
					e.t.Fatalf("replayed renewed_at %v, want %v", res.Lease.RenewedAt, renewed.RenewedAt)
				}
				e.unchanged("after replay (not extended again)", before)
			}
			e.expectLease("get", e.get(e.b, "job"), renewed)
			// Still a replay once the lease expired.
			e.clock.Advance(renewTTL)
			res, err = e.b.Renew(e.ctx, req)
			e.expectReplay("renew replayed after expiry", res, err, protocol.StatusRenewed)
			e.expectHolder("replayed lease", res.Lease, renewed)
		}},
		{"release_replay", func(e *env) {
			l := e.acquire(e.a, "job", "w1", leaseTTL)
			req := protocol.ReleaseRequest{Key: l.Key, Owner: l.Owner, Token: l.Token, RequestID: e.rid()}
			res, err := e.a.Release(e.ctx, req)
			e.expect("release", res, err, protocol.StatusReleased)
			cur := e.acquire(e.b, "job", "w2", leaseTTL)
			for _, rt := range []*protocol.Runtime{e.b, e.a} {
				before := e.snapshot("job")
				res, err = rt.Release(e.ctx, req)
				e.expectReplay("repeated release", res, err, protocol.StatusReleased)
				e.expectLease("replayed release", res.Lease, l)
				e.unchanged("after replay", before)
			}
			e.expectLease("the new holder is untouched", e.get(e.a, "job"), cur)
		}},
		{"revoke_replay", func(e *env) {
			l := e.acquire(e.a, "job", "w1", leaseTTL)
			req := protocol.RevokeRequest{Key: l.Key, Actor: "ops", Reason: "drain", RequestID: e.rid()}
			res, err := e.b.Revoke(e.ctx, req)
			e.expect("revoke", res, err, protocol.StatusRevoked)
			cur := e.acquire(e.a, "job", "w2", leaseTTL)
			for _, rt := range []*protocol.Runtime{e.a, e.b} {
				before := e.snapshot("job")
				res, err = rt.Revoke(e.ctx, req)
				e.expectReplay("repeated revoke", res, err, protocol.StatusRevoked)
				e.expectLease("replayed revoke", res.Lease, l)
				e.unchanged("after replay", before)
			}
			e.expectLease("the new holder is untouched", e.get(e.b, "job"), cur)
		}},
		{"reused_id_other_parameters_is_invalid", func(e *env) {
			acq := e.acquireReq("job", "w1", leaseTTL)
			l := e.acquireWith(e.a, acq)
			ren := protocol.RenewRequest{Key: l.Key, Owner: l.Owner, Token: l.Token, TTL: renewTTL, RequestID: e.rid()}
			res, err := e.b.Renew(e.ctx, ren)
			e.expect("renew", res, err, protocol.StatusRenewed)
			held := *res.Lease
			rev := protocol.RevokeRequest{Key: e.key("gone"), Actor: "ops", Reason: "r", RequestID: e.rid()}
			e.acquire(e.b, "gone", "w9", leaseTTL)
			res, err = e.a.Revoke(e.ctx, rev)
			e.expect("revoke", res, err, protocol.StatusRevoked)
			e.clock.Advance(time.Second)

			before := e.snapshot("job")
			other := func(r protocol.AcquireRequest, f func(*protocol.AcquireRequest)) protocol.AcquireRequest {
				f(&r)
				return r
			}
			type call struct {
				name string
				do   func(rt *protocol.Runtime) (protocol.Result, error)
			}
			calls := []call{
				{"acquire other owner", func(rt *protocol.Runtime) (protocol.Result, error) {
					return rt.Acquire(e.ctx, other(acq, func(r *protocol.AcquireRequest) { r.Owner = "w2" }))
				}},
				{"acquire other ttl", func(rt *protocol.Runtime) (protocol.Result, error) {
					return rt.Acquire(e.ctx, other(acq, func(r *protocol.AcquireRequest) { r.TTL = 2 * leaseTTL }))
				}},
				{"acquire other key", func(rt *protocol.Runtime) (protocol.Result, error) {
					return rt.Acquire(e.ctx, other(acq, func(r *protocol.AcquireRequest) { r.Key = e.key("free") }))
				}},
				{"renew with an acquire's id", func(rt *protocol.Runtime) (protocol.Result, error) {
					return rt.Renew(e.ctx, protocol.RenewRequest{Key: l.Key, Owner: l.Owner, Token: l.Token, TTL: renewTTL, RequestID: acq.RequestID})
				}},
				{"release with an acquire's id", func(rt *protocol.Runtime) (protocol.Result, error) {
					return rt.Release(e.ctx, protocol.ReleaseRequest{Key: l.Key, Owner: l.Owner, Token: l.Token, RequestID: acq.RequestID})
				}},
				{"revoke with an acquire's id", func(rt *protocol.Runtime) (protocol.Result, error) {
					return rt.Revoke(e.ctx, protocol.RevokeRequest{Key: l.Key, Actor: "ops", Reason: "r", RequestID: acq.RequestID})
				}},
				{"renew other ttl", func(rt *protocol.Runtime) (protocol.Result, error) {
					r := ren
					r.TTL = leaseTTL
					return rt.Renew(e.ctx, r)
				}},
				{"release with a renew's id", func(rt *protocol.Runtime) (protocol.Result, error) {
					return rt.Release(e.ctx, protocol.ReleaseRequest{Key: l.Key, Owner: l.Owner, Token: l.Token, RequestID: ren.RequestID})
				}},
				{"acquire with a revoke's id", func(rt *protocol.Runtime) (protocol.Result, error) {
					return rt.Acquire(e.ctx, protocol.AcquireRequest{Key: e.key("free"), Owner: "w1", TTL: leaseTTL, RequestID: rev.RequestID})
				}},
				{"revoke other reason", func(rt *protocol.Runtime) (protocol.Result, error) {
					r := rev
					r.Reason = "another reason"
					return rt.Revoke(e.ctx, r)
				}},
				{"revoke other key", func(rt *protocol.Runtime) (protocol.Result, error) {
					r := rev
					r.Key = l.Key
					return rt.Revoke(e.ctx, r)
				}},
			}
			for _, c := range calls {
				for _, rt := range []*protocol.Runtime{e.a, e.b} {
					res, err := c.do(rt)
					e.expect(c.name, res, err, protocol.StatusInvalid)
					if res.Replayed {
						e.t.Fatalf("%s: flagged replayed", c.name)
					}
					e.unchanged(c.name, before)
				}
			}
			e.expectLease("the lease is untouched", e.get(e.a, "job"), held)
			if g := e.get(e.a, "free"); g != nil {
				e.t.Fatalf("get free: %s, want not_found", fmtLease(g))
			}
		}},
		{"failed_outcome_is_not_replayed", func(e *env) {
			held := e.acquire(e.a, "job", "w1", leaseTTL)
			req := e.acquireReq("job", "w2", leaseTTL)
			res, err := e.b.Acquire(e.ctx, req)
			e.expect("acquire a held key", res, err, protocol.StatusConflict)
			if res.Replayed {
				e.t.Fatal("conflict flagged replayed")
			}
			e.release(e.a, held)
			// The conflict was not recorded: the retry runs again and wins.
			l := e.acquireWith(e.b, req)
			if l.Token <= held.Token {
				e.t.Fatalf("token %d, want more than %d", l.Token, held.Token)
			}
			res, err = e.a.Acquire(e.ctx, req)
			e.expectReplay("the winning retry, repeated", res, err, protocol.StatusAcquired)
			e.expectLease("replayed lease", res.Lease, l)

			// Likewise for a renew that failed.
			e.clock.Advance(leaseTTL)
			ren := protocol.RenewRequest{Key: l.Key, Owner: l.Owner, Token: l.Token, TTL: renewTTL, RequestID: e.rid()}
			res, err = e.a.Renew(e.ctx, ren)
			e.expect("renew after expiry", res, err, protocol.StatusExpired)
			res, err = e.a.Renew(e.ctx, ren)
			e.expect("renew after expiry, repeated", res, err, protocol.StatusExpired)
			if res.Replayed {
				e.t.Fatal("expired flagged replayed")
			}
		}},
	}
}
